//! Where the hand-written Redis strategies keep a sale: a stock counter and
//! a set of buyers, both under the bench's prefix and the sale's hash tag.

/// The prefix of every key the bench writes to Redis, so that a run on a
/// shared server can find and remove exactly its own keys.
pub const PREFIX: &str = "stockade-bench:";

/// The keys of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FcfsKeys {
    /// String: items left.
    pub stock: String,
    /// Set: user ids who bought.
    pub buyers: String,
    /// The name of the sale's lock (for `redis-lock`).
    pub lock: String,
}

impl FcfsKeys {
    /// The keys of sale `id`.
    pub fn new(id: &str) -> Self {
        Self {
            stock: format!("{PREFIX}{{{id}}}:stock"),
            buyers: format!("{PREFIX}{{{id}}}:buyers"),
            lock: format!("sale-{id}"),
        }
    }
}
