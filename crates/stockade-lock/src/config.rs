//! Configuration: which nodes, how long leases are, how long to wait for Redis.

use std::time::Duration;

use crate::{LockError, Locks};

/// How long an acquired lock is leased for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lease {
    /// Lease for [`LocksBuilder::watchdog_lease`] and let a background
    /// watchdog extend it every third of that until the guard is released or
    /// dropped. The lock outlives a slow critical section, and still expires
    /// soon after the process dies.
    #[default]
    Watchdog,
    /// Lease for exactly this long; no watchdog. The guard's
    /// [`lost`](crate::LockGuard::lost) future completes when the lease (less
    /// the clock-drift allowance) runs out.
    Fixed(Duration),
}

impl From<Duration> for Lease {
    fn from(lease: Duration) -> Self {
        Self::Fixed(lease)
    }
}

/// The validated settings a [`Locks`] client runs with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub nodes: Vec<String>,
    pub key_prefix: String,
    pub watchdog_lease: Duration,
    pub command_timeout: Duration,
    pub max_fallback_retry: Duration,
    pub retry_jitter: Duration,
    pub clock_drift_factor: f64,
}

impl Config {
    /// Votes needed: a strict majority of the nodes.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// The allowance for clock drift between this process and the nodes over
    /// a lease: `lease × factor + 2 ms` (the Redlock recipe).
    pub fn drift(&self, lease: Duration) -> Duration {
        lease.mul_f64(self.clock_drift_factor) + Duration::from_millis(2)
    }
}

/// Builds a [`Locks`] client: one Redis node, or several independent ones for
/// Redlock.
///
/// ```no_run
/// # async fn demo() -> Result<(), stockade_lock::LockError> {
/// use std::time::Duration;
/// let locks = stockade_lock::Locks::builder()
///     .node("redis://10.0.0.1:6379")
///     .node("redis://10.0.0.2:6379")
///     .node("redis://10.0.0.3:6379")
///     .watchdog_lease(Duration::from_secs(10))
///     .command_timeout(Duration::from_millis(50))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocksBuilder {
    config: Config,
}

impl Default for LocksBuilder {
    fn default() -> Self {
        Self {
            config: Config {
                nodes: Vec::new(),
                key_prefix: "stockade-lock".to_owned(),
                watchdog_lease: Duration::from_secs(30),
                command_timeout: Duration::from_secs(1),
                max_fallback_retry: Duration::from_secs(5),
                retry_jitter: Duration::from_millis(20),
                clock_drift_factor: 0.01,
            },
        }
    }
}

impl LocksBuilder {
    /// Adds a Redis node (`redis://host:port/db`). One node gives a plain
    /// single-instance lock; three or five independent nodes give Redlock.
    pub fn node(mut self, url: impl Into<String>) -> Self {
        self.config.nodes.push(url.into());
        self
    }

    /// Prefix of every key and channel (default `stockade-lock`).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// The lease of [`Lease::Watchdog`] locks (default 30 s); the watchdog
    /// extends it every third of this.
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.config.watchdog_lease = lease;
        self
    }

    /// How long one Redis call may take before the node counts as unavailable
    /// for that call (default 1 s). For Redlock keep it well below the lease:
    /// a few tens of milliseconds.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }

    /// The longest a waiter sleeps without a release notification before it
    /// tries again (default 5 s). Waiters normally wake on the release
    /// message, or when the holder's lease runs out if that is sooner; this
    /// bound only matters if a message is lost.
    pub fn max_fallback_retry(mut self, max: Duration) -> Self {
        self.config.max_fallback_retry = max;
        self
    }

    /// Upper bound of the random delay added before a Redlock retry, so that
    /// clients that split the vote do not collide again (default 20 ms).
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.config.retry_jitter = jitter;
        self
    }

    /// Assumed relative clock drift between this process and the nodes
    /// (default 0.01, i.e. 1 %). Validity is `lease − elapsed − (lease ×
    /// factor + 2 ms)`.
    pub fn clock_drift_factor(mut self, factor: f64) -> Self {
        self.config.clock_drift_factor = factor;
        self
    }

    /// Checks the settings and connects. Succeeds when a quorum of the nodes
    /// answers a PING; the others are retried on every call.
    pub async fn connect(self) -> Result<Locks, LockError> {
        let config = self.validate()?;
        Locks::from_config(config).await
    }

    fn validate(self) -> Result<Config, LockError> {
        let config = self.config;
        let invalid = |what: &str| Err(LockError::InvalidConfig(what.to_owned()));
        if config.nodes.is_empty() {
            return invalid("no Redis node was given");
        }
        if config.key_prefix.is_empty() || config.key_prefix.contains(['{', '}']) {
            return invalid("the key prefix must be non-empty and free of `{` and `}`");
        }
        if !(0.0..0.5).contains(&config.clock_drift_factor) {
            return invalid("the clock drift factor must be in [0, 0.5)");
        }
        if config.watchdog_lease <= config.drift(config.watchdog_lease) * 3 {
            return invalid("the watchdog lease is too short for the clock-drift allowance");
        }
        if config.command_timeout.is_zero() || config.max_fallback_retry.is_zero() {
            return invalid("timeouts must be positive");
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_strict_majority() {
        let mut builder = LocksBuilder::default();
        for (nodes, quorum) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)] {
            builder.config.nodes = vec!["redis://x".to_owned(); nodes];
            assert_eq!(builder.config.quorum(), quorum);
        }
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(LocksBuilder::default().validate().is_err());
        let one = LocksBuilder::default().node("redis://x");
        assert!(one.clone().validate().is_ok());
        assert!(one.clone().key_prefix("a{b").validate().is_err());
        assert!(one.clone().clock_drift_factor(0.7).validate().is_err());
        assert!(
            one.watchdog_lease(Duration::from_millis(5))
                .validate()
                .is_err()
        );
    }
}
