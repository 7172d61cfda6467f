//! Which authority decides each sale, as this instance knows it.
//!
//! The store holds the truth (`sales.epoch`, `sales.authority`); this is a
//! cache of it, filled on first use and dropped whenever an engine or the
//! store answers that the sale has moved on (a wrong epoch, a stale
//! order). A stale entry can cost a refused purchase, never a wrong sale:
//! engines refuse purchases under another epoch and the store refuses to
//! commit them.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use parking_lot::Mutex;
use stockade_core::{Epoch, SaleId};

use stockade_store::authority::Authority;

/// Where a sale's purchases go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The sale's epoch.
    pub epoch: Epoch,
    /// Who decides.
    pub authority: Authority,
}

/// The routes this instance knows, the sales it is rebuilding, and what
/// it last heard of moving sales to the fallback.
#[derive(Debug)]
pub struct Routing {
    /// This process's name in the store's engine views.
    instance: String,
    routes: DashMap<SaleId, Route>,
    rebuilding: DashMap<SaleId, ()>,
    /// Until when a move to the fallback is refused without asking the
    /// store again (another instance reached the engine lately).
    fallback_refused_until: Mutex<Option<Instant>>,
}

impl Default for Routing {
    fn default() -> Self {
        Self {
            instance: uuid::Uuid::now_v7().to_string(),
            routes: DashMap::new(),
            rebuilding: DashMap::new(),
            fallback_refused_until: Mutex::new(None),
        }
    }
}

impl Routing {
    /// This process's name in the store's view of the engine (random,
    /// fresh at every start).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Forgets every route under the primary authority: this instance just
    /// failed to reach the engine, and another instance may move those
    /// sales to the fallback meanwhile. The next purchase of each reads its
    /// route from the store again rather than selling through an engine
    /// the store no longer trusts.
    pub fn forget_primaries(&self) {
        self.routes
            .retain(|_, route| route.authority != Authority::Primary);
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

    /// The cached route of a sale.
    pub fn get(&self, sale: &SaleId) -> Option<Route> {
        self.routes.get(sale).map(|r| *r)
    }

    /// Remembers a route read from the store, unless a newer one is known.
    pub fn learn(&self, sale: &SaleId, route: Route) {
        self.routes
            .entry(sale.clone())
            .and_modify(|known| {
                if route.epoch >= known.epoch {
                    *known = route;
                }
            })
            .or_insert(route);
    }

    /// Forgets a sale's route: the next purchase reads it from the store.
    pub fn forget(&self, sale: &SaleId) {
        self.routes.remove(sale);
    }

    /// Marks the sale as being rebuilt by this instance; false if it
    /// already was (one rebuild per sale per instance at a time).
    pub fn start_rebuild(&self, sale: &SaleId) -> bool {
        self.rebuilding.insert(sale.clone(), ()).is_none()
    }

    /// The rebuild has ended (done or given up until the next trigger).
    pub fn end_rebuild(&self, sale: &SaleId) {
        self.rebuilding.remove(sale);
    }

    /// Whether this instance is rebuilding the sale: its purchases are
    /// answered 503 `rebuilding` meanwhile.
    pub fn is_rebuilding(&self, sale: &SaleId) -> bool {
        self.rebuilding.contains_key(sale)
    }

    /// How many sales this instance is rebuilding.
    pub fn rebuilding_count(&self) -> usize {
        self.rebuilding.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_route_never_replaces_a_newer_one() {
        let routing = Routing::default();
        let sale = SaleId::new("s").unwrap();
        let route = |e, authority| Route {
            epoch: Epoch::new(e),
            authority,
        };
        routing.learn(&sale, route(3, Authority::Fallback));
        routing.learn(&sale, route(2, Authority::Primary));
        assert_eq!(routing.get(&sale), Some(route(3, Authority::Fallback)));
        routing.learn(&sale, route(4, Authority::Primary));
        assert_eq!(routing.get(&sale), Some(route(4, Authority::Primary)));
        routing.forget(&sale);
        assert_eq!(routing.get(&sale), None);
        assert!(routing.start_rebuild(&sale));
        assert!(!routing.start_rebuild(&sale));
        routing.end_rebuild(&sale);
        assert!(!routing.is_rebuilding(&sale));
    }
}
