//! One sale's state in memory.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use dashmap::{DashMap, Entry};
use parking_lot::RwLock;
use stockade_core::rule;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Order, OrderId, Purchase, PurchaseOutcome, RebuildPlan,
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
    /// The epoch the book holds ([`Epoch::CLOSED`] after `close`); changed
    /// only under the spec's write lock.
    epoch: AtomicU64,
    /// The newest epoch ever rebuilt under: older rebuilds are refused.
    newest: AtomicU64,
    remaining: AtomicU32,
    holdings: DashMap<UserId, u32>,
    /// Idempotency keys, scoped to their buyer.
    keys: DashMap<(UserId, IdempotencyKey), OrderId>,
    orders: DashMap<OrderId, OrderEntry>,
    /// Accepted orders not yet acknowledged as committed nor released,
    /// each with its place in the order of acceptance (ids minted in the
    /// same millisecond are in random order).
    outbox: DashMap<OrderId, (u64, Order)>,
    /// The next place in the order of acceptance.
    accepted: AtomicU64,
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
            epoch: AtomicU64::new(Epoch::FIRST.get()),
            newest: AtomicU64::new(Epoch::FIRST.get()),
            holdings: DashMap::new(),
            keys: DashMap::new(),
            orders: DashMap::new(),
            outbox: DashMap::new(),
            accepted: AtomicU64::new(0),
        }
    }

    pub(super) fn spec(&self) -> SaleSpec {
        self.spec.read().clone()
    }

    pub(super) fn held_epoch(&self) -> Epoch {
        Epoch::new(self.epoch.load(Ordering::Acquire))
    }

    pub(super) fn purchase(&self, purchase: &Purchase, now: DateTime<Utc>) -> PurchaseOutcome {
        let spec = self.spec.read();
        let epoch = self.held_epoch();
        if epoch != purchase.epoch() {
            return PurchaseOutcome::WrongEpoch { engine: epoch };
        }
        let Some(key) = purchase.idempotency_key() else {
            return self.decide(&spec, purchase, now);
        };
        // Holding the key's entry makes a concurrent request with the same
        // key wait, then see this one's order.
        match self.keys.entry((purchase.user_id().clone(), key.clone())) {
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
        if let Err(refused) = rule::window(spec, now) {
            return refused;
        }
        let quantity = purchase.quantity();
        // The buyer's entry stays locked until their holding is updated, so
        // two requests of one buyer cannot both pass the limit check.
        let holding = self.holdings.entry(purchase.user_id().clone());
        let already = match &holding {
            Entry::Occupied(held) => *held.get(),
            Entry::Vacant(_) => 0,
        };
        if let Err(refused) = rule::limit(spec, already, quantity) {
            return refused;
        }
        let remaining = match take_stock(&self.remaining, quantity) {
            Ok(remaining) => remaining,
            Err(refused) => return refused,
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
        let place = self.accepted.fetch_add(1, Ordering::Relaxed);
        self.outbox
            .insert(order_id, (place, Order::accepted(purchase, order_id, now)));
        PurchaseOutcome::Purchased {
            order_id,
            remaining,
        }
    }

    pub(super) fn outbox(&self) -> Vec<Order> {
        let _spec = self.spec.read();
        let mut orders: Vec<(u64, Order)> = self.outbox.iter().map(|e| e.value().clone()).collect();
        orders.sort_by_key(|(place, _)| *place);
        orders.into_iter().map(|(_, order)| order).collect()
    }

    pub(super) fn acknowledge(&self, orders: &[OrderId]) {
        let _spec = self.spec.read();
        for id in orders {
            self.outbox.remove(id);
        }
    }

    pub(super) fn release(&self, order_id: OrderId, epoch: Epoch) -> ReleaseOutcome {
        let _spec = self.spec.read();
        let held = self.held_epoch();
        if held != epoch {
            return ReleaseOutcome::WrongEpoch { engine: held };
        }
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

    /// Stops selling until the next rebuild; returns the epoch held.
    pub(super) fn close(&self) -> Epoch {
        let _spec = self.spec.write();
        Epoch::new(self.epoch.swap(Epoch::CLOSED.get(), Ordering::AcqRel))
    }

    /// Replaces everything with the rebuilt state under `epoch`, excluding
    /// all other operations on this sale meanwhile. Refused if a newer
    /// epoch was rebuilt already.
    pub(super) fn replace(
        &self,
        spec: SaleSpec,
        epoch: Epoch,
        plan: RebuildPlan,
    ) -> Result<(), EngineError> {
        let mut current = self.spec.write();
        let newest = Epoch::new(self.newest.load(Ordering::Acquire));
        if epoch < newest {
            return Err(EngineError::Superseded {
                sale_id: spec.id().clone(),
                epoch,
                newer: newest,
            });
        }
        self.newest.store(epoch.get(), Ordering::Release);
        self.epoch.store(epoch.get(), Ordering::Release);
        *current = spec;
        self.holdings.clear();
        self.keys.clear();
        self.orders.clear();
        self.outbox.clear();
        for (user, held) in plan.holdings {
            self.holdings.insert(user, held);
        }
        for (user, key, order_id) in plan.keys {
            self.keys.insert((user, key), order_id);
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
        Ok(())
    }
}

/// Takes `quantity` from `stock` by [`rule::take`], atomically: the stock
/// left after taking, or the rule's refusal of the stock as it was.
fn take_stock(stock: &AtomicU32, quantity: u32) -> Result<u32, PurchaseOutcome> {
    match stock.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
        rule::take(left, quantity).ok()
    }) {
        Ok(before) => rule::take(before, quantity),
        // Refused on this value: the rule says how.
        Err(left) => rule::take(left, quantity),
    }
}
