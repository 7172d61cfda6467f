//! The two libraries behind one interface: acquire (waiting as long as it
//! takes) and release one lock.

use std::future::Future;
use std::time::Duration;

use stockade_lock::{Lease, LockGuard, Locks};

use crate::LockBenchError;

/// A lock client as the harness drives it.
pub(crate) trait Contender: Send + Sync + 'static {
    /// Proof of ownership.
    type Guard: Send + 'static;

    /// Waits until the lock is acquired.
    fn acquire(&self) -> impl Future<Output = Result<Self::Guard, LockBenchError>> + Send;

    /// Releases it.
    fn release(
        &self,
        guard: Self::Guard,
    ) -> impl Future<Output = Result<(), LockBenchError>> + Send;
}

/// `stockade-lock`: waiters queue in Redis and the release hands the lock to
/// the first of them with one message.
pub(crate) struct Stockade {
    pub locks: Locks,
    pub name: String,
    pub lease: Duration,
}

impl Stockade {
    /// The commands `stockade-lock` only runs inside its Lua scripts (its
    /// clients send EVALSHA, RPUSH to queue, and SUBSCRIBE/UNSUBSCRIBE).
    pub const SCRIPT_COMMANDS: &[&str] = &[
        "set", "time", "incr", "pttl", "get", "del", "publish", "pexpire", "lpop", "lpos", "lset",
        "lrem",
    ];
}

impl Contender for Stockade {
    type Guard = LockGuard;

    async fn acquire(&self) -> Result<LockGuard, LockBenchError> {
        Ok(self
            .locks
            .lock_with(&self.name, Duration::MAX, Lease::Fixed(self.lease))
            .await?)
    }

    async fn release(&self, guard: LockGuard) -> Result<(), LockBenchError> {
        Ok(guard.release().await?)
    }
}

/// `rslock` 0.10 with its default retry policy (3 tries, 0–200 ms random
/// delay between them, then again): waiters poll.
pub(crate) struct Rslock {
    pub manager: rslock::LockManager,
    pub name: String,
    pub lease: Duration,
}

impl Rslock {
    /// The commands `rslock` only runs inside its Lua scripts (unlock).
    pub const SCRIPT_COMMANDS: &[&str] = &["get", "del"];
}

impl Contender for Rslock {
    type Guard = rslock::LockGuard;

    async fn acquire(&self) -> Result<rslock::LockGuard, LockBenchError> {
        self.manager
            .acquire(self.name.as_str(), self.lease)
            .await
            .map_err(|e| LockBenchError::Rslock(e.to_string()))
    }

    async fn release(&self, guard: rslock::LockGuard) -> Result<(), LockBenchError> {
        guard.release().await;
        Ok(())
    }
}
