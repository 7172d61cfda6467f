//! Epochs: which decision of the engine's authority over a sale is current.
//!
//! The order store keeps one epoch per sale. Every change of who decides a
//! sale's purchases (the engine rebuilt from the store after it lost data,
//! a move to the fallback engine and back) bumps it, under the sale's row
//! lock, before the new authority sells. Engines hold the epoch they were
//! built under and refuse a purchase made under another one; every order
//! carries the epoch it was decided under, and the store commits it only
//! while that epoch is still the sale's. See `docs/consistency.md`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A sale's epoch: only ever grows. [`Epoch::CLOSED`] (0) is held by an
/// engine whose state for the sale is being replaced: it sells nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(u64);

impl Epoch {
    /// Held by an engine while it is being rebuilt: matches no purchase.
    pub const CLOSED: Epoch = Epoch(0);
    /// The epoch of a newly created sale.
    pub const FIRST: Epoch = Epoch(1);

    /// Wraps a stored value.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// As a database BIGINT (epochs never come near 2^63).
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// From a database BIGINT; None for a negative value.
    pub fn from_i64(value: i64) -> Option<Self> {
        u64::try_from(value).ok().map(Self)
    }

    /// The epoch after this one.
    pub const fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

impl Default for Epoch {
    fn default() -> Self {
        Self::FIRST
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
