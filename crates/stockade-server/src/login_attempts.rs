//! Failed dashboard logins per client: after [`MAX_FAILURES`] in
//! [`WINDOW`], a client's logins are answered 429 with `Retry-After` until
//! the oldest of them is a window old, so the admin token cannot be
//! guessed at the speed of the network. The failures are kept in the
//! order store, so every instance behind a load balancer counts them all
//! (n instances do not allow n times as many); per client address as the
//! rate limiter sees it (an IPv6 client by its /64). Time comes from the
//! service's clock; the store holds one window of failures.

use std::time::Duration;

use chrono::{DateTime, Utc};
use stockade_store::{OrderStore, StoreError};

/// Failures allowed in a window.
pub const MAX_FAILURES: usize = 5;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(60);

fn window_ms() -> i64 {
    i64::try_from(WINDOW.as_millis()).unwrap_or(60_000)
}

/// How long `client` must wait before trying again at `now`; None when
/// it may try.
pub async fn locked_for(
    store: &OrderStore,
    client: &str,
    now: DateTime<Utc>,
) -> Result<Option<Duration>, StoreError> {
    let now_ms = now.timestamp_millis();
    let failures = store
        .login_failures(client, now_ms - window_ms(), MAX_FAILURES)
        .await?;
    Ok(wait(&failures, now_ms))
}

/// The wait that `failures` (the latest, oldest first, all within the
/// window) impose at `now_ms`.
fn wait(failures: &[i64], now_ms: i64) -> Option<Duration> {
    if failures.len() < MAX_FAILURES {
        return None;
    }
    // Free again once the oldest failure that counts is a window old.
    let oldest = failures[failures.len() - MAX_FAILURES];
    let wait = u64::try_from(oldest + window_ms() - now_ms).unwrap_or_default();
    Some(Duration::from_millis(wait).max(Duration::from_secs(1)))
}

/// Records a failed login of `client` at `now`.
pub async fn failed(
    store: &OrderStore,
    client: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let now_ms = now.timestamp_millis();
    store
        .record_login_failure(client, now_ms, now_ms - window_ms())
        .await
}

/// A successful login forgets the client's failures.
pub async fn succeeded(store: &OrderStore, client: &str) -> Result<(), StoreError> {
    store.clear_login_failures(client).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_in_a_minute_lock_the_client_until_the_first_is_a_minute_old() {
        let t0 = 1_000_000;
        let failures: Vec<i64> = (0..5).map(|i| t0 + i * 10_000).collect();
        assert_eq!(wait(&failures[..4], t0 + 40_000), None);
        assert_eq!(wait(&failures, t0 + 40_000), Some(Duration::from_secs(20)));
        // Never less than a second (Retry-After counts whole seconds).
        assert_eq!(wait(&failures, t0 + 59_999), Some(Duration::from_secs(1)));
    }
}
