//! [`LockGuard`]: proof of ownership, with the fencing token, the validity
//! deadline and the [`lost`](LockGuard::lost) signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::LocksInner;
use crate::keys::LockKeys;
use crate::{FencingToken, LockError, LostReason, quorum, telemetry, watchdog};

/// What a guard and its watchdog share.
pub(crate) struct Held {
    pub locks: Arc<LocksInner>,
    pub keys: LockKeys,
    pub token: String,
    pub fence: FencingToken,
    pub lease: Duration,
    valid_until: Mutex<Instant>,
    lost: CancellationToken,
    lost_reason: OnceLock<LostReason>,
    /// Set before releasing: tells nodes that grant the lock late (Redlock
    /// stragglers) to give it back at once.
    given_up: Arc<AtomicBool>,
}

impl Held {
    pub fn new(
        locks: Arc<LocksInner>,
        keys: LockKeys,
        token: String,
        fence: u64,
        lease: Duration,
        valid_until: Instant,
        given_up: Arc<AtomicBool>,
    ) -> Self {
        Self {
            locks,
            keys,
            token,
            fence: FencingToken::new(fence),
            lease,
            valid_until: Mutex::new(valid_until),
            lost: CancellationToken::new(),
            lost_reason: OnceLock::new(),
            given_up,
        }
    }

    fn give_up(&self) {
        self.given_up.store(true, Ordering::SeqCst);
    }

    pub fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the deadline forward (never back) after a successful extension.
    pub fn extended_until(&self, deadline: Instant) {
        let mut valid_until = self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
        *valid_until = (*valid_until).max(deadline);
    }

    /// Records that ownership is lost and wakes everyone awaiting `lost()`.
    pub fn mark_lost(&self, reason: LostReason) {
        if self.lost_reason.set(reason).is_ok() {
            tracing::warn!(lock = %self.keys.name, fence = %self.fence, %reason, "lock lost");
            telemetry::lost(reason);
        }
        self.lost.cancel();
    }

    fn lost_reason(&self) -> Option<LostReason> {
        if let Some(reason) = self.lost_reason.get() {
            return Some(*reason);
        }
        (Instant::now() >= self.valid_until()).then_some(LostReason::Expired)
    }

    /// Completes when ownership is lost: marked by the watchdog, or the
    /// validity deadline passed without an extension.
    pub async fn lost(&self) -> LostReason {
        loop {
            if let Some(reason) = self.lost_reason.get() {
                return *reason;
            }
            let deadline = self.valid_until();
            if Instant::now() >= deadline {
                self.mark_lost(LostReason::Expired);
                continue;
            }
            tokio::select! {
                () = self.lost.cancelled() => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Ownership of a lock. Release it with [`release`](Self::release) to learn
/// whether it was still held; dropping it releases it in the background
/// (without blocking), and the lease bounds how long a lock whose release
/// never arrives stays taken.
///
/// The guard carries the lock's [fencing token](Self::fence): pass it with
/// every write the lock protects.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    held: Arc<Held>,
    watchdog: Option<AbortHandle>,
    released: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.held.keys.name)
            .field("fence", &self.held.fence)
            .field("validity", &self.validity())
            .field("watchdog", &self.watchdog.is_some())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(held: Held, with_watchdog: bool) -> Self {
        let held = Arc::new(held);
        let watchdog = with_watchdog.then(|| {
            let runtime = held.locks.runtime.clone();
            runtime
                .spawn(watchdog::run(Arc::clone(&held)))
                .abort_handle()
        });
        Self {
            held,
            watchdog,
            released: false,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.held.keys.name
    }

    /// The fencing token drawn when this lock was acquired: larger than every
    /// token of every earlier holder of the same lock.
    pub fn fence(&self) -> FencingToken {
        self.held.fence
    }

    /// The lease the lock was taken (and is extended) with.
    pub fn lease(&self) -> Duration {
        self.held.lease
    }

    /// How much longer the lock is certainly ours, as far as this process can
    /// tell: lease − time taken to acquire (or last extend) − clock drift
    /// allowance. Zero once it has run out.
    pub fn validity(&self) -> Duration {
        self.held
            .valid_until()
            .saturating_duration_since(Instant::now())
    }

    /// Whether ownership is known to be lost (watchdog verdict, or validity
    /// ran out).
    pub fn is_lost(&self) -> bool {
        self.held.lost_reason().is_some()
    }

    /// A future that completes when this guard stops owning the lock: when
    /// the watchdog finds the lock gone or someone else's, or when the
    /// validity deadline passes without a successful extension (for a fixed
    /// lease: when the lease runs out). Use it to stop work that must not
    /// continue without the lock; [`Locks::run`](crate::Locks::run) does
    /// this for you.
    pub async fn lost(&self) -> LostReason {
        self.held.lost().await
    }

    /// Extends the lease to `lease` from now, if the lock is still ours. For
    /// fixed leases; watchdog leases are extended automatically.
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let held = &self.held;
        let timeout = held.locks.config.command_timeout;
        match quorum::extend(&held.locks, &held.keys, &held.token, lease, timeout).await {
            Ok(valid_until) => {
                telemetry::extension("extended");
                held.extended_until(valid_until);
                Ok(())
            }
            Err(error) => {
                if matches!(error, LockError::NotHeld { .. }) {
                    telemetry::extension("not_held");
                    held.mark_lost(LostReason::Taken);
                } else {
                    telemetry::extension("error");
                }
                Err(error)
            }
        }
    }

    /// Releases the lock (deleting it only if it is still ours) and wakes
    /// its waiters. Returns [`LockError::NotHeld`] if it was no longer ours:
    /// the lease expired or someone else holds it now, and then nothing was
    /// deleted.
    pub async fn release(mut self) -> Result<(), LockError> {
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.abort();
        }
        let held = &self.held;
        held.give_up();
        let outcome = quorum::release(&held.locks, &held.keys, &held.token).await;
        // Only now: if this future is dropped before the answer, `Drop`
        // releases in the background instead (releasing twice is harmless,
        // the script compares tokens).
        self.released = true;
        telemetry::released(match &outcome {
            Ok(()) => "released",
            Err(LockError::NotHeld { .. }) => "not_held",
            Err(_) => "error",
        });
        outcome
    }

    /// The reason ownership was lost, if known (for [`Locks::run`](crate::Locks::run)).
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.held.lost_reason()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.abort();
        }
        if !self.released {
            let held = &self.held;
            held.give_up();
            telemetry::released("dropped");
            quorum::release_in_background(&held.locks, &held.keys, &held.token);
        }
    }
}
