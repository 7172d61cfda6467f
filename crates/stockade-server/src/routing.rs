//! Which authority decides each sale, as this instance knows it.
//!
//! The store holds the truth (`sales.epoch`, `sales.authority`); this is a
//! cache of it, filled on first use and dropped whenever an engine or the
//! store answers that the sale has moved on (a wrong epoch, a stale
//! order). A stale entry can cost a refused purchase, never a wrong sale:
//! engines refuse purchases under another epoch and the store refuses to
//! commit them.

use dashmap::DashMap;
use stockade_core::{Epoch, SaleId};

use crate::store::authority::Authority;

/// Where a sale's purchases go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The sale's epoch.
    pub epoch: Epoch,
    /// Who decides.
    pub authority: Authority,
}

/// The routes this instance knows, and the sales it is rebuilding.
#[derive(Debug, Default)]
pub struct Routing {
    routes: DashMap<SaleId, Route>,
    rebuilding: DashMap<SaleId, ()>,
}

impl Routing {
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
