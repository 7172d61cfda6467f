//! The keeper: one long-lived thread that starts, stops and kills every
//! server process of a cluster.
//!
//! The throwaway servers ask to be killed when their parent dies
//! (`PR_SET_PDEATHSIG`), and Linux means the parent *thread*. A server
//! started from tokio's blocking pool is SIGKILLed as soon as that pool
//! thread idles out (10 s later), so every blocking server operation runs
//! here instead, on a thread that lives as long as the cluster.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::mpsc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// The keeper thread. Dropping it ends the thread (after its last job).
pub struct Keeper {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts the thread.
    pub fn start() -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("server-keeper".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .expect("spawn the server keeper thread");
        Self {
            jobs: Some(jobs),
            thread: Some(thread),
        }
    }

    /// Runs blocking `f` on the keeper thread and waits for it; a panic in
    /// `f` is resumed here.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(catch_unwind(AssertUnwindSafe(f)));
        });
        self.jobs
            .as_ref()
            .expect("the keeper is running")
            .send(job)
            .expect("the server keeper thread is gone");
        match result.await.expect("the server keeper thread is gone") {
            Ok(value) => value,
            Err(panic) => resume_unwind(panic),
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
