//! Failed dashboard logins per client: after [`MAX_FAILURES`] in
//! [`WINDOW`], a client's logins are answered 429 with `Retry-After` until
//! the oldest of them is a window old, so the admin token cannot be
//! guessed at the speed of the network. Counted per instance (n instances
//! allow n times as many), per client address as the rate limiter sees it
//! (an IPv6 client by its /64). Time comes from the service's clock.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// Failures allowed in a window.
pub const MAX_FAILURES: usize = 5;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// The most clients remembered (a bounded S3-FIFO cache: a flood of
/// addresses cannot grow memory, and evicts the clients seen once first).
pub const MAX_CLIENTS: usize = 10_000;

/// Recent failed logins by client.
pub struct LoginAttempts {
    failures: quick_cache::sync::Cache<String, Vec<DateTime<Utc>>>,
}

impl std::fmt::Debug for LoginAttempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginAttempts")
            .field("clients", &self.failures.len())
            .finish()
    }
}

impl Default for LoginAttempts {
    fn default() -> Self {
        Self {
            failures: quick_cache::sync::Cache::new(MAX_CLIENTS),
        }
    }
}

fn window() -> TimeDelta {
    TimeDelta::from_std(WINDOW).unwrap_or(TimeDelta::minutes(1))
}

impl LoginAttempts {
    /// No failures yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long `client` must wait before trying again at `now`; None
    /// when it may try.
    pub fn locked_for(&self, client: &str, now: DateTime<Utc>) -> Option<Duration> {
        let failures = self.failures.get(client)?;
        let recent: Vec<&DateTime<Utc>> =
            failures.iter().filter(|at| now - **at < window()).collect();
        if recent.len() < MAX_FAILURES {
            return None;
        }
        // Free again once the oldest failure that counts is a window old.
        let oldest = recent[recent.len() - MAX_FAILURES];
        let wait = (*oldest + window() - now).to_std().unwrap_or_default();
        Some(wait.max(Duration::from_secs(1)))
    }

    /// Records a failed login of `client` at `now`.
    pub fn failed(&self, client: &str, now: DateTime<Utc>) {
        let mut failures = self.failures.get(client).unwrap_or_default();
        failures.retain(|at| now - *at < window());
        failures.push(now);
        let excess = failures.len().saturating_sub(MAX_FAILURES);
        failures.drain(..excess);
        self.failures.insert(client.to_owned(), failures);
    }

    /// A successful login forgets the client's failures.
    pub fn succeeded(&self, client: &str) {
        self.failures.remove(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_in_a_minute_lock_the_client_until_the_first_is_a_minute_old() {
        let attempts = LoginAttempts::new();
        let t0 = Utc::now();
        for i in 0..5 {
            assert_eq!(attempts.locked_for("1.2.3.4", t0), None);
            attempts.failed("1.2.3.4", t0 + TimeDelta::seconds(i * 10));
        }
        let now = t0 + TimeDelta::seconds(40);
        assert_eq!(
            attempts.locked_for("1.2.3.4", now),
            Some(Duration::from_secs(20))
        );
        assert_eq!(attempts.locked_for("5.6.7.8", now), None, "per client");
        // The first failure leaves the window: one more try.
        assert_eq!(
            attempts.locked_for("1.2.3.4", t0 + TimeDelta::seconds(60)),
            None
        );
        attempts.failed("1.2.3.4", t0 + TimeDelta::seconds(60));
        assert!(
            attempts
                .locked_for("1.2.3.4", t0 + TimeDelta::seconds(61))
                .is_some()
        );
        attempts.succeeded("1.2.3.4");
        assert_eq!(attempts.locked_for("1.2.3.4", t0), None);
    }

    #[test]
    fn memory_stays_bounded_under_a_flood_of_addresses() {
        let attempts = LoginAttempts::new();
        let now = Utc::now();
        for i in 0..MAX_CLIENTS + 50 {
            attempts.failed(&format!("client-{i}"), now);
        }
        assert!(attempts.failures.len() <= MAX_CLIENTS);
    }
}
