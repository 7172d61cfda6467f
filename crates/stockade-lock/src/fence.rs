//! Fencing tokens: numbers that grow with every acquisition of a lock.

use std::fmt;

/// A fencing token: a number drawn from a per-lock counter when the lock is
/// acquired. Every later acquisition of the same lock draws a larger one.
///
/// A lock alone cannot stop a holder that was paused (a GC pause, a swapped
/// process, a long network stall) past its lease from acting on stale
/// ownership. Passing the token along with every write, and having the
/// storage refuse a write whose token is smaller than one it has already
/// seen, can: see the `postgres` module (feature `postgres`) for the
/// PostgreSQL pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token value.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The token as a number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The token as a signed 64-bit integer, for databases without unsigned
    /// types (PostgreSQL `BIGINT`). Tokens come from a Redis integer counter,
    /// so they always fit.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<FencingToken> for u64 {
    fn from(token: FencingToken) -> Self {
        token.0
    }
}
