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
use std::sync::OnceLock;

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
    /// While an inline call runs on this thread: the instant (of the
    /// caller's runtime) it started. A call it makes (one store method
    /// calling another) runs within it.
    static INSIDE: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
}

/// Where inline calls' own tasks run: sqlx's (a connection handed back to
/// its pool, a timer of the pool) must not wait for the caller's runtime,
/// which is blocked in the call. One worker thread, started on first use.
fn own_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("stockade-store-calls")
            .enable_all()
            .build()
            .expect("the store's runtime for inline calls")
    })
}

/// Marks this thread as inside an inline call started at `started` until
/// dropped.
struct Inside;

impl Inside {
    fn enter(started: tokio::time::Instant) -> Self {
        INSIDE.with(|inside| inside.set(Some(started)));
        Self
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(None));
    }
}

/// The instant (on the caller's runtime) the inline call running on this
/// thread started, if one is: the caller's time stands still during the
/// call, and its clock cannot be read while the store's runtime is current.
pub fn inline_call_started() -> Option<tokio::time::Instant> {
    INSIDE.with(Cell::get)
}

impl Calls {
    /// Runs one store call.
    pub(crate) async fn run<T: Send>(self, work: impl Future<Output = T> + Send) -> T {
        if self == Calls::Async || inline_call_started().is_some() {
            return work.await;
        }
        let started = tokio::time::Instant::now();
        // On the caller's own thread, with the store's runtime current:
        // sqlx's tasks and timers run on that runtime's worker while this
        // thread (and with it the caller's runtime) waits for the call, and
        // the call's random choices (an entry's id) follow the caller's
        // seed. Unconstrained: the caller's task may have spent its
        // cooperative budget, which no other task could refill meanwhile.
        let _inside = Inside::enter(started);
        let _store = own_runtime().enter();
        futures::executor::block_on(tokio::task::unconstrained(work))
    }
}

/// A database that stops answering and starts again: while it is down,
/// every call either waits (before it starts) until it is back, as calls
/// to a database that hangs do ([`Down::Hangs`]), or fails at once, as
/// calls through a pooler whose server is gone do ([`Down::Refuses`]).
/// The simulator's store outage; cheap to clone.
#[derive(Debug, Clone)]
pub struct Outage {
    down: tokio::sync::watch::Sender<Option<Down>>,
}

/// How a database that is down answers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Down {
    /// Not at all, until it is back.
    Hangs,
    /// With an error, at once (a pooler such as PgBouncer in front of a
    /// server that is gone).
    Refuses,
}

impl Default for Outage {
    fn default() -> Self {
        Self {
            down: tokio::sync::watch::channel(None).0,
        }
    }
}

impl Outage {
    /// Takes the database down (`Some`) or brings it back (`None`).
    pub fn set(&self, down: Option<Down>) {
        self.down.send_replace(down);
    }

    /// Returns once the database is up, however it is down: a process
    /// that cannot open its store at start is restarted until it can.
    pub(crate) async fn wait_up(&self) {
        let mut down = self.down.subscribe();
        // The sender lives in `self`: the wait cannot fail.
        let _ = down.wait_for(Option::is_none).await;
    }

    /// Lets a call through once the database is up, or refuses it at once
    /// while it refuses.
    pub(crate) async fn admit(&self) -> Result<(), crate::StoreError> {
        let mut down = self.down.subscribe();
        let refused = down
            .wait_for(|down| *down != Some(Down::Hangs))
            .await
            .is_ok_and(|down| *down == Some(Down::Refuses));
        if refused {
            return Err(crate::StoreError::Unavailable(sqlx::Error::Io(
                std::io::ErrorKind::ConnectionRefused.into(),
            )));
        }
        Ok(())
    }
}

impl crate::OrderStore {
    /// Runs one call: once the database is up (or refused at once while
    /// it refuses), as [`Calls`] says.
    pub(crate) async fn call<T: Send>(
        &self,
        work: impl Future<Output = Result<T, crate::StoreError>> + Send,
    ) -> Result<T, crate::StoreError> {
        if let Some(outage) = &self.outage {
            outage.admit().await?;
        }
        self.calls.run(work).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_store_that_refuses_fails_calls_at_once_and_one_that_hangs_holds_them() {
        let outage = Outage::default();
        assert!(outage.admit().await.is_ok(), "up: let through");

        outage.set(Some(Down::Refuses));
        let started = tokio::time::Instant::now();
        let refused = outage.admit().await;
        assert!(
            matches!(refused, Err(crate::StoreError::Unavailable(_))),
            "refusing: {refused:?}"
        );
        assert_eq!(started.elapsed(), Duration::ZERO, "refused at once");

        outage.set(Some(Down::Hangs));
        let held = tokio::time::timeout(Duration::from_secs(5), outage.admit()).await;
        assert!(held.is_err(), "hanging: the call waits");
        let back = outage.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            back.set(None);
        });
        let started = tokio::time::Instant::now();
        assert!(outage.admit().await.is_ok(), "let through once back");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }
}
