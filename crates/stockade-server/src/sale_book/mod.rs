//! What this instance knows of each sale, in one place: its spec, its
//! route (epoch and authority), whether this instance is rebuilding it,
//! whether it was sold out a moment ago, and its waiting room.
//!
//! The store holds the truth; the book is a cache of it, filled on first
//! use, one entry per sale in play, dropped whole when the sale is let go
//! after its retention ([`SaleBook::forget_sale`]). Every part of it is
//! safe to be stale: a stale route costs a refused purchase (engines
//! refuse purchases under another epoch and the store refuses to commit
//! them), stale sold-out knowledge lasts at most [`MAX_TTL`], and a sale's
//! spec and waiting room never change once created.
//!
//! # Layout
//! - `mod.rs`: the book and its entries.
//! - `routes.rs`: routes, rebuilds and moves to the fallback.
//! - `rejections.rs`: rejections that cost nothing (window, sold out,
//!   unknown sale).
//! - `rooms.rs`: the waiting room of each sale.

mod rejections;
mod rooms;
mod routes;

use std::sync::atomic::AtomicU64;
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use dashmap::DashMap;
use parking_lot::Mutex;
use stockade_core::{SaleId, SaleSpec};

pub use rejections::{DEFAULT_TTL, MAX_TTL, OrderTerms, Ticket, UNKNOWN_SALES_CAPACITY};
pub use routes::Route;

pub use rooms::Door;

/// The per-sale cache of one service. See the module documentation.
pub struct SaleBook {
    /// This process's name in the store's engine views.
    instance: String,
    /// How long sold-out and unknown-sale knowledge lasts.
    ttl: Duration,
    sales: DashMap<SaleId, Entry>,
    /// Ids the store had no sale for, until when.
    unknown: quick_cache::sync::Cache<SaleId, Instant>,
    /// Bumped whenever this instance creates a sale, so that a store read
    /// that raced the creation cannot record the sale as unknown.
    created: AtomicU64,
    /// Until when a move to the fallback is refused without asking the
    /// store again (another instance reached the engine lately).
    fallback_refused_until: Mutex<Option<Instant>>,
    /// Turns for reading a sale this book does not know from the store,
    /// by sale id's hash (see [`SaleBook::cold_read_turn`]).
    cold_reads: Box<[tokio::sync::Mutex<()>]>,
}

/// How many turns for cold store reads there are: at most this many such
/// reads at once, whatever a flood of unknown ids asks.
const COLD_READ_TURNS: usize = 64;

impl std::fmt::Debug for SaleBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaleBook")
            .field("instance", &self.instance)
            .field("ttl", &self.ttl)
            .field("sales", &self.sales.len())
            .field("unknown", &self.unknown.len())
            .finish()
    }
}

/// What is known of one sale. Each part is learned on its own: a sale
/// being rebuilt may have no route known yet, a sale read for its waiting
/// room no route either.
#[derive(Default)]
struct Entry {
    /// The sale's spec, read from the store (it never changes).
    spec: Option<SaleSpec>,
    /// Where its purchases go.
    route: Option<Route>,
    /// Whether this instance is rebuilding it.
    rebuilding: bool,
    /// The run id of the server this instance last rebuilt it on.
    rebuilt_on: Option<String>,
    /// Bumped whenever this instance gives stock back to the sale.
    generation: u64,
    /// Until when the sale is known to be sold out.
    sold_out_until: Option<Instant>,
    /// How its buyers get in (its waiting room, or its draw): None until
    /// read.
    room: Option<Door>,
}

impl SaleBook {
    /// An empty book whose sold-out and unknown-sale knowledge lasts `ttl`
    /// (at most [`MAX_TTL`]; zero: none is kept, every such purchase asks
    /// the engine or the store, the window is still answered from the spec).
    pub fn new(ttl: Duration) -> Self {
        Self {
            instance: stockade_core::entropy::uuid_v7().to_string(),
            ttl: ttl.min(MAX_TTL),
            sales: DashMap::new(),
            unknown: quick_cache::sync::Cache::new(UNKNOWN_SALES_CAPACITY),
            created: AtomicU64::new(0),
            fallback_refused_until: Mutex::new(None),
            cold_reads: (0..COLD_READ_TURNS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    /// The turn to read `sale` from the store when this book does not know
    /// it. Purchases that miss the book together queue here; the first
    /// reads and teaches the book (the route, or that the sale is unknown),
    /// and the others find the answer in the book when their turn comes
    /// instead of reading again: a burst for one cold or unknown sale costs
    /// one store read, not one per purchase.
    pub async fn cold_read_turn(&self, sale: &SaleId) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::BuildHasher as _;
        let hash = self.sales.hasher().hash_one(sale);
        let turn = usize::try_from(hash % COLD_READ_TURNS as u64).unwrap_or(0);
        self.cold_reads[turn].lock().await
    }

    /// Forgets everything about a sale let go after its retention (a later
    /// request reads it from the store again): the book stays bounded by
    /// the sales still in play.
    pub fn forget_sale(&self, sale: &SaleId) {
        self.sales.remove(sale);
    }

    /// How many sales the book has an entry for (bounded by the sales in
    /// play).
    pub fn sales_known(&self) -> usize {
        self.sales.len()
    }

    /// Changes the sale's entry, made empty if there was none.
    fn edit<R>(&self, sale: &SaleId, change: impl FnOnce(&mut Entry) -> R) -> R {
        let mut entry = self.sales.entry(sale.clone()).or_default();
        change(&mut entry)
    }

    /// Reads the sale's entry, if there is one.
    fn read<R>(&self, sale: &SaleId, look: impl FnOnce(&Entry) -> R) -> Option<R> {
        self.sales.get(sale).map(|entry| look(&entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_let_go_is_forgotten_whole() {
        let book = SaleBook::new(Duration::from_secs(1));
        let spec = SaleSpec::builder("s", 10).unwrap().build().unwrap();
        let sale = spec.id().clone();
        book.learn_spec(&spec);
        book.learn_route(
            &sale,
            Route {
                epoch: stockade_core::Epoch::new(2),
                authority: stockade_store::authority::Authority::Primary,
            },
        );
        assert!(book.start_rebuild(&sale));
        assert_eq!(book.sales_known(), 1);
        book.forget_sale(&sale);
        assert_eq!(book.sales_known(), 0);
        assert!(!book.knows(&sale));
        assert_eq!(book.route(&sale), None);
        assert!(!book.is_rebuilding(&sale));
    }
}
