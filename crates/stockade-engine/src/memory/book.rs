//! One sale's state in memory.

use std::sync::atomic::{AtomicU32, Ordering};

use chrono::{DateTime, Utc};
use dashmap::{DashMap, Entry};
use parking_lot::RwLock;
use stockade_core::sale::Window;
use stockade_core::{
    IdempotencyKey, Order, OrderId, OrderStatus, Purchase, PurchaseOutcome, RebuildPlan,
    ReleaseOutcome, SaleSnapshot, SaleSpec, UserId,
};

/// One sale: its spec, the stock counter and the maps of buyers, keys and
/// orders.
#[derive(Debug)]
pub(super) struct SaleBook {
    /// Read-locked by every operation, write-locked only by a rebuild, so a
    /// rebuild never interleaves with a purchase. Reads do not block each
    /// other.
    spec: RwLock<SaleSpec>,
    remaining: AtomicU32,
    holdings: DashMap<UserId, u32>,
    keys: DashMap<IdempotencyKey, OrderId>,
    orders: DashMap<OrderId, OrderEntry>,
    /// Accepted orders not yet acknowledged as committed nor released.
    outbox: DashMap<OrderId, Order>,
}

#[derive(Debug)]
struct OrderEntry {
    user_id: UserId,
    quantity: u32,
    live: bool,
}

impl SaleBook {
    pub(super) fn new(spec: SaleSpec) -> Self {
        Self {
            remaining: AtomicU32::new(spec.total_stock()),
            spec: RwLock::new(spec),
            holdings: DashMap::new(),
            keys: DashMap::new(),
            orders: DashMap::new(),
            outbox: DashMap::new(),
        }
    }

    pub(super) fn spec(&self) -> SaleSpec {
        self.spec.read().clone()
    }

    pub(super) fn purchase(&self, purchase: &Purchase, now: DateTime<Utc>) -> PurchaseOutcome {
        let spec = self.spec.read();
        let Some(key) = purchase.idempotency_key() else {
            return self.decide(&spec, purchase, now);
        };
        // Holding the key's entry makes a concurrent request with the same
        // key wait, then see this one's order.
        match self.keys.entry(key.clone()) {
            Entry::Occupied(existing) => PurchaseOutcome::Duplicate {
                order_id: *existing.get(),
            },
            Entry::Vacant(vacant) => {
                let outcome = self.decide(&spec, purchase, now);
                if let PurchaseOutcome::Purchased { order_id, .. } = outcome {
                    vacant.insert(order_id);
                }
                outcome
            }
        }
    }

    /// Window, limit and stock, then the record: the purchase without its key.
    fn decide(&self, spec: &SaleSpec, purchase: &Purchase, now: DateTime<Utc>) -> PurchaseOutcome {
        match spec.window_at(now) {
            Window::NotStarted => return PurchaseOutcome::NotStarted,
            Window::Ended => return PurchaseOutcome::Ended,
            Window::Open => {}
        }
        let quantity = purchase.quantity();
        // The buyer's entry stays locked until their holding is updated, so
        // two requests of one buyer cannot both pass the limit check.
        let holding = self.holdings.entry(purchase.user_id().clone());
        let already = match &holding {
            Entry::Occupied(held) => *held.get(),
            Entry::Vacant(_) => 0,
        };
        if u64::from(already) + u64::from(quantity) > u64::from(spec.per_user_limit()) {
            return PurchaseOutcome::LimitExceeded { already };
        }
        let remaining = match take_stock(&self.remaining, quantity) {
            Ok(remaining) => remaining,
            Err(0) => return PurchaseOutcome::SoldOut,
            Err(remaining) => return PurchaseOutcome::InsufficientStock { remaining },
        };
        match holding {
            Entry::Occupied(mut held) => *held.get_mut() += quantity,
            Entry::Vacant(vacant) => {
                vacant.insert(quantity);
            }
        }
        let order_id = OrderId::generate();
        self.orders.insert(
            order_id,
            OrderEntry {
                user_id: purchase.user_id().clone(),
                quantity,
                live: true,
            },
        );
        self.outbox.insert(
            order_id,
            Order {
                id: order_id,
                sale_id: spec.id().clone(),
                user_id: purchase.user_id().clone(),
                quantity,
                idempotency_key: purchase.idempotency_key().cloned(),
                // Payment holds are not implemented yet.
                status: OrderStatus::Confirmed,
                created_at: now,
            },
        );
        PurchaseOutcome::Purchased {
            order_id,
            remaining,
        }
    }

    pub(super) fn outbox(&self) -> Vec<Order> {
        let _spec = self.spec.read();
        let mut orders: Vec<Order> = self.outbox.iter().map(|e| e.value().clone()).collect();
        orders.sort_by_key(|o| o.id);
        orders
    }

    pub(super) fn acknowledge(&self, orders: &[OrderId]) {
        let _spec = self.spec.read();
        for id in orders {
            self.outbox.remove(id);
        }
    }

    pub(super) fn release(&self, order_id: OrderId) -> ReleaseOutcome {
        let _spec = self.spec.read();
        let Some(mut order) = self.orders.get_mut(&order_id) else {
            return ReleaseOutcome::UnknownOrder;
        };
        if !order.live {
            return ReleaseOutcome::AlreadyReleased;
        }
        order.live = false;
        self.outbox.remove(&order_id);
        let quantity = order.quantity;
        if let Some(mut held) = self.holdings.get_mut(&order.user_id) {
            *held = held.saturating_sub(quantity);
        }
        // Forget buyers who hold nothing, so the map stays as small as the
        // set of current holders.
        self.holdings
            .remove_if(&order.user_id, |_, held| *held == 0);
        let remaining = self.remaining.fetch_add(quantity, Ordering::AcqRel) + quantity;
        ReleaseOutcome::Released {
            quantity,
            remaining,
        }
    }

    pub(super) fn snapshot(&self, now: DateTime<Utc>) -> SaleSnapshot {
        let spec = self.spec.read();
        SaleSnapshot::at(spec.clone(), self.remaining.load(Ordering::Acquire), now)
    }

    pub(super) fn held_by(&self, user: &UserId) -> u32 {
        self.holdings.get(user).map_or(0, |held| *held)
    }

    /// Replaces everything with the rebuilt state, excluding all other
    /// operations on this sale meanwhile.
    pub(super) fn replace(&self, spec: SaleSpec, plan: RebuildPlan) {
        let mut current = self.spec.write();
        *current = spec;
        self.holdings.clear();
        self.keys.clear();
        self.orders.clear();
        self.outbox.clear();
        for (user, held) in plan.holdings {
            self.holdings.insert(user, held);
        }
        for (key, order_id) in plan.keys {
            self.keys.insert(key, order_id);
        }
        for order in plan.orders {
            self.orders.insert(
                order.id,
                OrderEntry {
                    user_id: order.user_id,
                    quantity: order.quantity,
                    live: order.live,
                },
            );
        }
        self.remaining.store(plan.remaining, Ordering::Release);
    }
}

/// Takes `quantity` from `stock` if that many are left. Returns the stock
/// left after taking, or the stock left untouched when there is not enough.
fn take_stock(stock: &AtomicU32, quantity: u32) -> Result<u32, u32> {
    stock
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            left.checked_sub(quantity)
        })
        .map(|before| before - quantity)
}
