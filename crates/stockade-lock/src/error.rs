//! Errors, and the kinds that tell a caller whether trying again can help.

use std::time::Duration;

/// Why a guard stopped owning its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// The lease ran out before it was extended (a fixed lease ended, or the
    /// watchdog could not reach a quorum of nodes in time).
    Expired,
    /// The lock was found gone or owned by someone else when the watchdog
    /// tried to extend it (deleted by hand, evicted, or Redis lost its data).
    Taken,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Expired => "its lease expired before it could be extended",
            Self::Taken => "it was gone or owned by someone else when the watchdog checked",
        })
    }
}

/// What kind of failure a [`LockError`] is, and so what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Redis (or a quorum of Redlock nodes) could not be reached or answered
    /// too slowly. Retry with backoff.
    Unavailable,
    /// The lock was held by someone else for the whole wait. Retry later, or
    /// give up: this is contention, not a fault.
    Timeout,
    /// The caller does not own the lock (any more): its lease expired or it
    /// was taken over. Retrying the release or extension cannot help.
    NotHeld,
    /// Ownership was lost while a critical section ran, and the section was
    /// cancelled. Its effects may be partial: do not retry blindly, re-check
    /// state under a new lock (and rely on fencing tokens for writes).
    Lost,
    /// The request was invalid (a bad lock name or configuration). Fix the
    /// caller.
    Invalid,
    /// Redis answered something this crate does not understand. A bug or a
    /// foreign value under the lock's key.
    Internal,
}

/// An error from the lock library. [`LockError::kind`] says what kind it is
/// and [`LockError::is_retryable`] whether trying again can succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Redis could not be reached, or too few Redlock nodes answered.
    #[error("lock `{lock}`: Redis is unavailable: {detail}")]
    Unavailable {
        /// The lock's name.
        lock: String,
        /// What failed, per node.
        detail: String,
        /// The first Redis error, if the failure was one.
        #[source]
        source: Option<redis::RedisError>,
    },
    /// Too few nodes answered when the client connected.
    #[error("cannot connect to Redis: {detail}")]
    Connect {
        /// What failed, per node.
        detail: String,
    },
    /// The lock could not be acquired within the wait.
    #[error("lock `{lock}` is held by someone else: not acquired within {waited:?}")]
    Timeout {
        /// The lock's name.
        lock: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// A release or extension found that the caller no longer owns the lock.
    #[error("lock `{lock}` is not held by this guard (its lease expired or it was taken over)")]
    NotHeld {
        /// The lock's name.
        lock: String,
    },
    /// Ownership was lost while a critical section ran.
    #[error(
        "lock `{lock}` was lost while the critical section ran ({reason}); the section was cancelled"
    )]
    Lost {
        /// The lock's name.
        lock: String,
        /// Why ownership was lost.
        reason: LostReason,
    },
    /// A lock name that cannot be used.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A configuration that cannot work.
    #[error("invalid lock configuration: {0}")]
    InvalidConfig(String),
    /// Redis answered something unexpected.
    #[error("lock `{lock}`: unexpected reply from Redis: {detail}")]
    Internal {
        /// The lock's name.
        lock: String,
        /// What was unexpected.
        detail: String,
    },
}

impl LockError {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Unavailable { .. } | Self::Connect { .. } => ErrorKind::Unavailable,
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::NotHeld { .. } => ErrorKind::NotHeld,
            Self::Lost { .. } => ErrorKind::Lost,
            Self::InvalidName { .. } | Self::InvalidConfig(_) => ErrorKind::Invalid,
            Self::Internal { .. } => ErrorKind::Internal,
        }
    }

    /// Whether the same call may succeed if tried again later
    /// ([`ErrorKind::Unavailable`] and [`ErrorKind::Timeout`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind(), ErrorKind::Unavailable | ErrorKind::Timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unavailable_and_timeout_are_retryable() {
        let lock = || "l".to_owned();
        let cases = [
            (
                LockError::Unavailable {
                    lock: lock(),
                    detail: String::new(),
                    source: None,
                },
                true,
            ),
            (
                LockError::Timeout {
                    lock: lock(),
                    waited: Duration::ZERO,
                },
                true,
            ),
            (LockError::NotHeld { lock: lock() }, false),
            (
                LockError::Lost {
                    lock: lock(),
                    reason: LostReason::Taken,
                },
                false,
            ),
            (LockError::InvalidConfig(String::new()), false),
        ];
        for (error, retryable) in cases {
            assert_eq!(error.is_retryable(), retryable, "{error}");
        }
    }
}
