//! Which authority decides each sale, and the rebuilds this instance runs.
//!
//! The store holds the truth (`sales.epoch`, `sales.authority`); a route
//! is learned with the sale's spec on first use and dropped whenever an
//! engine or the store answers that the sale has moved on (a wrong epoch,
//! a stale order).

use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use stockade_core::{Epoch, SaleId};
use stockade_store::authority::Authority;

use super::SaleBook;

/// Where a sale's purchases go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The sale's epoch.
    pub epoch: Epoch,
    /// Who decides.
    pub authority: Authority,
}

impl SaleBook {
    /// This process's name in the store's view of the engine (random,
    /// fresh at every start).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The sale's route as this instance knows it.
    pub fn route(&self, sale: &SaleId) -> Option<Route> {
        self.read(sale, |entry| entry.route).flatten()
    }

    /// The route of a sale whose spec is known too, which a purchase needs
    /// (None: read both from the store).
    pub fn route_with_spec(&self, sale: &SaleId) -> Option<Route> {
        self.read(sale, |entry| entry.spec.as_ref().and(entry.route))
            .flatten()
    }

    /// Remembers a route read from the store, unless a newer one is known.
    pub fn learn_route(&self, sale: &SaleId, route: Route) {
        self.edit(sale, |entry| {
            if entry.route.is_none_or(|known| route.epoch >= known.epoch) {
                entry.route = Some(route);
            }
        });
    }

    /// Forgets a sale's route: the next purchase reads it from the store.
    pub fn forget_route(&self, sale: &SaleId) {
        if let Some(mut entry) = self.sales.get_mut(sale) {
            entry.route = None;
        }
    }

    /// Forgets every route under the primary authority: this instance just
    /// failed to reach the engine, and another instance may move those
    /// sales to the fallback meanwhile. The next purchase of each reads its
    /// route from the store again rather than selling through an engine
    /// the store no longer trusts.
    pub fn forget_primaries(&self) {
        for mut entry in self.sales.iter_mut() {
            if entry
                .route
                .is_some_and(|route| route.authority == Authority::Primary)
            {
                entry.route = None;
            }
        }
    }

    /// Whether a move to the fallback was refused by the store's engine
    /// views less than a moment ago (so it is refused again for free).
    pub fn fallback_recently_refused(&self, now: Instant) -> bool {
        self.fallback_refused_until
            .lock()
            .is_some_and(|until| now < until)
    }

    /// Remembers that the store refused a move to the fallback, for `for_`.
    pub fn refuse_fallback_for(&self, now: Instant, for_: Duration) {
        *self.fallback_refused_until.lock() = Some(now + for_);
    }

    /// Marks the sale as being rebuilt by this instance; false if it
    /// already was (one rebuild per sale per instance at a time).
    pub fn start_rebuild(&self, sale: &SaleId) -> bool {
        self.edit(sale, |entry| {
            !std::mem::replace(&mut entry.rebuilding, true)
        })
    }

    /// The rebuild has ended (done or given up until the next trigger).
    pub fn end_rebuild(&self, sale: &SaleId) {
        if let Some(mut entry) = self.sales.get_mut(sale) {
            entry.rebuilding = false;
        }
    }

    /// This instance rebuilt the sale on the engine's server `run_id`.
    pub fn rebuilt_on(&self, sale: &SaleId, run_id: String) {
        self.edit(sale, |entry| entry.rebuilt_on = Some(run_id));
    }

    /// Whether this instance last rebuilt the sale on server `run_id`.
    pub fn was_rebuilt_on(&self, sale: &SaleId, run_id: &str) -> bool {
        self.read(sale, |entry| entry.rebuilt_on.as_deref() == Some(run_id))
            .unwrap_or(false)
    }

    /// Whether this instance is rebuilding the sale: its purchases are
    /// answered 503 `rebuilding` meanwhile.
    pub fn is_rebuilding(&self, sale: &SaleId) -> bool {
        self.read(sale, |entry| entry.rebuilding).unwrap_or(false)
    }

    /// How many sales this instance is rebuilding.
    pub fn rebuilding_count(&self) -> usize {
        self.sales.iter().filter(|entry| entry.rebuilding).count()
    }
}

#[cfg(test)]
mod tests {
    use stockade_core::SaleSpec;

    use super::*;

    fn route(epoch: u64, authority: Authority) -> Route {
        Route {
            epoch: Epoch::new(epoch),
            authority,
        }
    }

    #[test]
    fn an_older_route_never_replaces_a_newer_one() {
        let book = SaleBook::new(Duration::ZERO);
        let spec = SaleSpec::builder("s", 10).unwrap().build().unwrap();
        let sale = spec.id().clone();
        book.learn_spec(&spec);
        book.learn_route(&sale, route(3, Authority::Fallback));
        book.learn_route(&sale, route(2, Authority::Primary));
        assert_eq!(book.route(&sale), Some(route(3, Authority::Fallback)));
        book.learn_route(&sale, route(4, Authority::Primary));
        assert_eq!(book.route(&sale), Some(route(4, Authority::Primary)));
        book.forget_route(&sale);
        assert_eq!(book.route(&sale), None);
        assert!(book.start_rebuild(&sale));
        assert!(!book.start_rebuild(&sale));
        assert_eq!(book.rebuilding_count(), 1);
        book.end_rebuild(&sale);
        assert!(!book.is_rebuilding(&sale));
        assert_eq!(book.rebuilding_count(), 0);
    }

    #[test]
    fn a_route_counts_only_with_the_spec_and_primaries_are_forgotten_alone() {
        let book = SaleBook::new(Duration::ZERO);
        let on_engine = SaleSpec::builder("engine", 10).unwrap().build().unwrap();
        let on_store = SaleSpec::builder("store", 10).unwrap().build().unwrap();
        book.learn_route(on_engine.id(), route(1, Authority::Primary));
        // Without its spec the route is not enough to sell.
        assert_eq!(book.route_with_spec(on_engine.id()), None);
        assert_eq!(
            book.route(on_engine.id()),
            Some(route(1, Authority::Primary))
        );
        book.learn_spec(&on_engine);
        book.learn_spec(&on_store);
        book.learn_route(on_store.id(), route(2, Authority::Fallback));
        assert_eq!(
            book.route_with_spec(on_engine.id()),
            Some(route(1, Authority::Primary))
        );
        book.forget_primaries();
        assert_eq!(book.route(on_engine.id()), None);
        assert_eq!(
            book.route(on_store.id()),
            Some(route(2, Authority::Fallback))
        );
        // The spec stays: the window is still answered from it.
        assert!(book.knows(on_engine.id()));
    }
}
