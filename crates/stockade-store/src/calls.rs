//! How the store's calls meet the async runtime.
//!
//! In production a call awaits its database like any future ([`Calls::Async`]).
//! The simulator runs the whole cluster on one thread with paused time,
//! which moves whenever every task waits; a call to SQLite waits on the
//! connection's own thread, so time would jump, and other tasks would run,
//! while the call is in flight, at points that differ from run to run.
//! [`Calls::Inline`] runs each call to its end before it returns control:
//! no time passes and no other task runs during a store call, so a run is
//! the same every time.

use std::cell::Cell;
use std::future::Future;

/// How the store's calls run: awaited ([`Calls::Async`], the service) or
/// each to its end before control returns ([`Calls::Inline`], the
/// simulator).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Calls {
    /// Each call is a future awaited like any other.
    #[default]
    Async,
    /// Each call completes before the task that made it yields.
    Inline,
}

thread_local! {
    /// True while an inline call runs on this thread: a call it makes
    /// (one store method calling another) runs within it.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as inside an inline call until dropped.
struct Inside;

impl Inside {
    fn enter() -> Self {
        INSIDE.with(|inside| inside.set(true));
        Self
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(false));
    }
}

impl Calls {
    /// Runs one store call.
    pub(crate) async fn run<T>(self, work: impl Future<Output = T>) -> T {
        if self == Calls::Async || INSIDE.with(Cell::get) {
            return work.await;
        }
        let done = {
            let _inside = Inside::enter();
            futures::executor::block_on(work)
        };
        // The pool takes a connection back in a task of its own: let it
        // run before the next call asks for one.
        tokio::task::yield_now().await;
        done
    }
}
