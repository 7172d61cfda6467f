//! One sale's state in memory.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use dashmap::{DashMap, Entry};
use parking_lot::{Mutex, RwLock};
use stockade_core::rule;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Order, OrderId, Purchase, PurchaseOutcome, RebuildPlan,
    ReleaseOutcome, SaleSnapshot, SaleSpec, SoldCounts, UserId,
};

/// One sale: its spec, the stock counters and the maps of buyers, keys and
/// orders.
#[derive(Debug)]
pub(super) struct SaleBook {
    /// Read-locked by every operation, write-locked only by a rebuild, so a
    /// rebuild never interleaves with a purchase. Reads do not block each
    /// other.
    shape: RwLock<Shape>,
    /// The epoch the book holds ([`Epoch::CLOSED`] after `close`); changed
    /// only under the spec's write lock.
    epoch: AtomicU64,
    /// The newest epoch ever rebuilt under: older rebuilds are refused.
    newest: AtomicU64,
    holdings: DashMap<UserId, u32>,
    /// Items each buyer holds of each SKU (by position in the spec), kept
    /// only for a sale with a per-SKU limit.
    sku_holdings: DashMap<(UserId, usize), u32>,
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

/// The spec and the stock, replaced together by a rebuild.
#[derive(Debug)]
struct Shape {
    spec: SaleSpec,
    stock: Stock,
}

/// The stock of a sale.
#[derive(Debug)]
enum Stock {
    /// A one-SKU sale without tiers: one counter of what is left, taken
    /// with a compare-and-swap.
    One(AtomicU32),
    /// A sale of several SKUs or with tiers: what is sold of each SKU and
    /// to each tier, under one lock, so a bundle takes all its items or
    /// none and a reserve is judged with the counts it depends on.
    Many(Mutex<SoldCounts>),
}

impl Stock {
    fn new(spec: &SaleSpec, sold: SoldCounts) -> Self {
        if spec.skus().len() == 1 && spec.tiers().is_empty() {
            Self::One(AtomicU32::new(spec.total_stock() - sold.sold[0]))
        } else {
            Self::Many(Mutex::new(sold))
        }
    }

    /// Each SKU's stock left.
    fn remaining(&self, spec: &SaleSpec) -> Vec<u32> {
        match self {
            Self::One(left) => vec![left.load(Ordering::Acquire)],
            Self::Many(sold) => sold.lock().left(spec),
        }
    }

    /// Takes every item or none for a buyer of `tier` at `now`: the stock
    /// left in all after, or the rule's refusal.
    fn take(
        &self,
        spec: &SaleSpec,
        now: DateTime<Utc>,
        tier: Option<usize>,
        items: &[(usize, u32)],
    ) -> Result<u32, PurchaseOutcome> {
        match self {
            Self::One(left) => take_stock(spec, left, items[0].1),
            Self::Many(sold) => {
                let mut sold = sold.lock();
                rule::stock(spec, now, tier, &*sold, items)?;
                sold.take(tier, items);
                Ok(sold.left(spec).iter().sum())
            }
        }
    }

    /// Puts an order's items back: the stock left in all after.
    fn give_back(&self, spec: &SaleSpec, tier: Option<usize>, items: &[(usize, u32)]) -> u32 {
        match self {
            Self::One(left) => {
                let quantity: u32 = items.iter().map(|&(_, q)| q).sum();
                left.fetch_add(quantity, Ordering::AcqRel) + quantity
            }
            Self::Many(sold) => {
                let mut sold = sold.lock();
                // A live order's items are counted: this cannot fail.
                let _ = sold.give_back(tier, items);
                sold.left(spec).iter().sum()
            }
        }
    }
}

#[derive(Debug)]
struct OrderEntry {
    user_id: UserId,
    quantity: u32,
    /// Each SKU's position in the spec and its quantity.
    items: Vec<(usize, u32)>,
    /// The buyer's tier (its position in the spec).
    tier: Option<usize>,
    live: bool,
}

impl SaleBook {
    pub(super) fn new(spec: SaleSpec) -> Self {
        let stock = Stock::new(&spec, SoldCounts::new(&spec));
        Self {
            shape: RwLock::new(Shape { spec, stock }),
            epoch: AtomicU64::new(Epoch::FIRST.get()),
            newest: AtomicU64::new(Epoch::FIRST.get()),
            holdings: DashMap::new(),
            sku_holdings: DashMap::new(),
            keys: DashMap::new(),
            orders: DashMap::new(),
            outbox: DashMap::new(),
            accepted: AtomicU64::new(0),
        }
    }

    pub(super) fn spec(&self) -> SaleSpec {
        self.shape.read().spec.clone()
    }

    pub(super) fn held_epoch(&self) -> Epoch {
        Epoch::new(self.epoch.load(Ordering::Acquire))
    }

    pub(super) fn purchase(&self, purchase: &Purchase, now: DateTime<Utc>) -> PurchaseOutcome {
        let shape = self.shape.read();
        let epoch = self.held_epoch();
        if epoch != purchase.epoch() {
            return PurchaseOutcome::WrongEpoch { engine: epoch };
        }
        let Some(key) = purchase.idempotency_key() else {
            return self.decide(&shape, purchase, now);
        };
        // Holding the key's entry makes a concurrent request with the same
        // key wait, then see this one's order.
        match self.keys.entry((purchase.user_id().clone(), key.clone())) {
            Entry::Occupied(existing) => PurchaseOutcome::Duplicate {
                order_id: *existing.get(),
            },
            Entry::Vacant(vacant) => {
                let outcome = self.decide(&shape, purchase, now);
                if let PurchaseOutcome::Purchased { order_id, .. } = outcome {
                    vacant.insert(order_id);
                }
                outcome
            }
        }
    }

    /// Items, window, limits and stock, then the record: the purchase
    /// without its key.
    fn decide(&self, shape: &Shape, purchase: &Purchase, now: DateTime<Utc>) -> PurchaseOutcome {
        let spec = &shape.spec;
        let items = match rule::resolve(spec, purchase.items()) {
            Ok(items) => items,
            Err(refused) => return refused,
        };
        let tier = rule::tier(spec, purchase.tier());
        if let Err(refused) = rule::window(spec, tier, now) {
            return refused;
        }
        let quantity = purchase.quantity();
        let user = purchase.user_id();
        // The buyer's entry stays locked until their holdings are updated,
        // so two requests of one buyer cannot both pass a limit check.
        let holding = self.holdings.entry(user.clone());
        let already = match &holding {
            Entry::Occupied(held) => *held.get(),
            Entry::Vacant(_) => 0,
        };
        if let Err(refused) = rule::limit(spec, tier, already, quantity) {
            return refused;
        }
        let held_of_sku = |i| {
            self.sku_holdings
                .get(&(user.clone(), i))
                .map_or(0, |held| *held)
        };
        if let Err(refused) = rule::sku_limits(spec, &items, held_of_sku) {
            return refused;
        }
        let remaining = match shape.stock.take(spec, now, tier, &items) {
            Ok(remaining) => remaining,
            Err(refused) => return refused,
        };
        // The per-SKU holdings first: the buyer's entry, locked until it is
        // updated just below, keeps their next request from reading them
        // before they count this purchase.
        if spec.per_sku_limit().is_some() {
            for &(i, q) in &items {
                *self.sku_holdings.entry((user.clone(), i)).or_insert(0) += q;
            }
        }
        match holding {
            Entry::Occupied(mut held) => *held.get_mut() += quantity,
            Entry::Vacant(vacant) => {
                vacant.insert(quantity);
            }
        }
        let order_id = OrderId::generate();
        let order = Order::accepted(
            purchase,
            rule::order_items(spec, &items),
            rule::order_tier(spec, tier),
            order_id,
            now,
        );
        self.orders.insert(
            order_id,
            OrderEntry {
                user_id: user.clone(),
                quantity,
                items,
                tier,
                live: true,
            },
        );
        let place = self.accepted.fetch_add(1, Ordering::Relaxed);
        self.outbox.insert(order_id, (place, order));
        PurchaseOutcome::Purchased {
            order_id,
            remaining,
        }
    }

    pub(super) fn outbox(&self) -> Vec<Order> {
        let _shape = self.shape.read();
        let mut orders: Vec<(u64, Order)> = self.outbox.iter().map(|e| e.value().clone()).collect();
        orders.sort_by_key(|(place, _)| *place);
        orders.into_iter().map(|(_, order)| order).collect()
    }

    pub(super) fn acknowledge(&self, orders: &[OrderId]) {
        let _shape = self.shape.read();
        for id in orders {
            self.outbox.remove(id);
        }
    }

    pub(super) fn release(&self, order_id: OrderId, epoch: Epoch) -> ReleaseOutcome {
        let shape = self.shape.read();
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
        if shape.spec.per_sku_limit().is_some() {
            for &(i, q) in &order.items {
                let key = (order.user_id.clone(), i);
                if let Some(mut held) = self.sku_holdings.get_mut(&key) {
                    *held = held.saturating_sub(q);
                }
                self.sku_holdings.remove_if(&key, |_, held| *held == 0);
            }
        }
        let remaining = shape.stock.give_back(&shape.spec, order.tier, &order.items);
        ReleaseOutcome::Released {
            quantity,
            remaining,
        }
    }

    pub(super) fn snapshot(&self, now: DateTime<Utc>) -> SaleSnapshot {
        let shape = self.shape.read();
        SaleSnapshot::at(shape.spec.clone(), &shape.stock.remaining(&shape.spec), now)
    }

    pub(super) fn held_by(&self, user: &UserId) -> u32 {
        self.holdings.get(user).map_or(0, |held| *held)
    }

    /// Stops selling until the next rebuild; returns the epoch held.
    pub(super) fn close(&self) -> Epoch {
        let _shape = self.shape.write();
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
        let mut current = self.shape.write();
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
        *current = Shape {
            stock: Stock::new(&spec, plan.sold),
            spec,
        };
        self.holdings.clear();
        self.sku_holdings.clear();
        self.keys.clear();
        self.orders.clear();
        self.outbox.clear();
        for (user, held) in plan.holdings {
            self.holdings.insert(user, held);
        }
        for (key, held) in plan.sku_holdings {
            self.sku_holdings.insert(key, held);
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
                    items: order.items,
                    tier: order.tier,
                    live: order.live,
                },
            );
        }
        Ok(())
    }
}

/// Takes `quantity` from the one counter of a one-SKU sale by
/// [`rule::take`], atomically: the stock left after taking, or the rule's
/// refusal of the stock as it was.
fn take_stock(spec: &SaleSpec, stock: &AtomicU32, quantity: u32) -> Result<u32, PurchaseOutcome> {
    match stock.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
        left.checked_sub(quantity)
    }) {
        Ok(before) => Ok(before - quantity),
        // Refused on this value: the rule says how.
        Err(left) => rule::take(spec, left, quantity),
    }
}
