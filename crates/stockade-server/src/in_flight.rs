//! This instance's orders that the engine accepted and the store has not
//! decided yet (the writer's in-flight set), each with a way to wait for
//! its decision.
//!
//! A lookup answers `pending` from here without touching the store, and a
//! long poll (`GET /v1/orders/{id}?wait=N`) waits on [`Decided`] instead of
//! reading the store again and again: the writer takes the order out once
//! the store has decided it (or when it stops), which wakes every waiter
//! at once; the waiter then reads the store once.

use std::collections::BTreeSet;

use dashmap::DashMap;
use stockade_core::{Order, OrderId, SaleId};
use stockade_store::engine_views::InFlightOrders;
use tokio::sync::watch;

/// The set. Shared by the writer and the handlers.
#[derive(Debug, Default)]
pub struct InFlight {
    orders: DashMap<OrderId, Entry>,
}

#[derive(Debug)]
struct Entry {
    order: Order,
    /// Dropped when the order leaves the set: that wakes the waiters.
    decided: watch::Sender<()>,
}

/// Completes once the order has left the set: the store decided it (or
/// the writer stopped with it undecided).
#[derive(Debug)]
pub struct Decided(watch::Receiver<()>);

impl Decided {
    /// Waits until the order has left the set.
    pub async fn wait(mut self) {
        // Nothing is ever sent: this returns once the sender is dropped.
        while self.0.changed().await.is_ok() {}
    }
}

impl InFlight {
    /// Adds an order accepted by the engine.
    pub fn insert(&self, order: Order) {
        let (decided, _) = watch::channel(());
        self.orders.insert(order.id, Entry { order, decided });
    }

    /// Takes an order out (decided, or given up): its waiters wake.
    pub fn remove(&self, id: &OrderId) {
        self.orders.remove(id);
    }

    /// The order, if it is in flight here.
    pub fn get(&self, id: &OrderId) -> Option<Order> {
        self.orders.get(id).map(|entry| entry.order.clone())
    }

    /// The order and a way to wait for its decision, if it is in flight
    /// here (None: decided already, or never here).
    pub fn watch(&self, id: &OrderId) -> Option<(Order, Decided)> {
        self.orders
            .get(id)
            .map(|entry| (entry.order.clone(), Decided(entry.decided.subscribe())))
    }

    /// How many orders are in flight.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    /// Whether any order of `sale` is in flight.
    pub fn holds_sale(&self, sale: &SaleId) -> bool {
        self.orders.iter().any(|entry| entry.order.sale_id == *sale)
    }

    /// What the engine-view report says of the set: how many orders, and
    /// their sales (each once, in id order).
    pub fn report(&self) -> InFlightOrders {
        let mut sales = BTreeSet::new();
        let mut orders = 0;
        for entry in &self.orders {
            orders += 1;
            if !sales.contains(&entry.order.sale_id) {
                sales.insert(entry.order.sale_id.clone());
            }
        }
        InFlightOrders {
            orders,
            sales: sales.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn removing_an_order_wakes_its_waiters_even_late_ones() {
        let set = InFlight::default();
        let purchase = stockade_core::Purchase::new("s", "u", 1).unwrap();
        let order = Order::accepted(
            &purchase,
            vec![stockade_core::Item {
                sku: stockade_core::SkuId::default_sku(),
                quantity: purchase.quantity(),
            }],
            None,
            OrderId::generate(),
            chrono::Utc::now(),
        );
        let id = order.id;
        set.insert(order);
        let (_, early) = set.watch(&id).unwrap();
        let (_, late) = set.watch(&id).unwrap();
        let waiting = tokio::spawn(early.wait());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        set.remove(&id);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        // Subscribed before the removal, awaited after it: still woken.
        tokio::time::timeout(Duration::from_secs(1), late.wait())
            .await
            .unwrap();
        assert!(set.watch(&id).is_none());
        assert!(set.is_empty());
        assert_eq!(set.report(), InFlightOrders::default());
    }
}
