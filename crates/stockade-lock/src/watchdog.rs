//! The watchdog: extends a [`Lease::Watchdog`](crate::Lease::Watchdog) lock
//! every third of its lease with the compare-and-extend script, and marks the
//! guard lost when the lock is found gone or cannot be extended before its
//! validity runs out.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::guard::Held;
use crate::{LockError, LostReason, quorum, telemetry};

/// Runs until the lock is lost; aborted by the guard on release or drop.
pub(crate) async fn run(held: Arc<Held>) {
    let period = held.lease / 3;
    let mut next = Instant::now() + period;
    loop {
        tokio::time::sleep_until(next).await;
        let started = Instant::now();
        let locks = &held.locks;
        // An extension that answers after the lock has expired is useless.
        let timeout = locks.config.command_timeout.min(period);
        match quorum::extend(locks, &held.keys, &held.token, held.lease, timeout).await {
            Ok(valid_until) => {
                telemetry::extension("extended");
                held.extended_until(valid_until);
                next = started + period;
            }
            Err(LockError::NotHeld { .. }) => {
                telemetry::extension("not_held");
                held.mark_lost(LostReason::Taken);
                return;
            }
            Err(error) => {
                telemetry::extension("error");
                let now = Instant::now();
                if now >= held.valid_until() {
                    held.mark_lost(LostReason::Expired);
                    return;
                }
                tracing::debug!(lock = %held.keys.name, %error, "lease extension failed; retrying");
                // Retry soon, but not in a tight loop.
                next = now + (period / 4).max(Duration::from_millis(10));
            }
        }
    }
}
