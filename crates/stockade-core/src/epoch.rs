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
