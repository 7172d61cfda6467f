//! Shared helpers: specs, ids, purchases, crowds sent at once.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use stockade_core::{
    Engine, Epoch, IdempotencyKey, Order, OrderId, OrderStatus, Purchase, PurchaseOutcome, SaleId,
    SaleSpec, UserId,
};

use crate::harness::Harness;

pub(super) fn spec(id: &str, stock: u32, limit: u32) -> SaleSpec {
    SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap()
}

pub(super) fn sale(id: &str) -> SaleId {
    SaleId::new(id).unwrap()
}

pub(super) fn user(id: &str) -> UserId {
    UserId::new(id).unwrap()
}

pub(super) async fn buy(
    engine: &dyn Engine,
    sale: &str,
    user: &str,
    quantity: u32,
) -> PurchaseOutcome {
    engine
        .purchase(&Purchase::new(sale, user, quantity).unwrap())
        .await
        .unwrap()
}

pub(super) async fn buy_with_key(
    engine: &dyn Engine,
    sale: &str,
    user: &str,
    key: &str,
) -> PurchaseOutcome {
    let purchase = Purchase::new(sale, user, 1)
        .unwrap()
        .with_idempotency_key(key)
        .unwrap();
    engine.purchase(&purchase).await.unwrap()
}

/// What a crowd of concurrent purchases got.
#[derive(Debug, Default)]
pub(super) struct CrowdResult {
    pub(super) orders: Vec<OrderId>,
    pub(super) sold_out: usize,
    pub(super) others: Vec<PurchaseOutcome>,
    /// Answers the engine said to retry
    /// ([`stockade_core::EngineError::is_retryable`]), each asked again
    /// until it had a decision.
    pub(super) retried: usize,
}

/// How long a buyer told to retry waits before asking again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Sends `purchases` all at once, each from its own task, and sorts the
/// answers. A buyer told to retry
/// ([`stockade_core::EngineError::Unavailable`]: a store engine whose
/// connections stay busy longer than it lets a purchase wait for one, as a
/// crowd of thousands keeps them in a debug build) asks again a second
/// later, as the service's clients do on its 503; any other error fails
/// the test.
pub(super) async fn stampede(engine: &Arc<dyn Engine>, purchases: Vec<Purchase>) -> CrowdResult {
    let start = Arc::new(tokio::sync::Barrier::new(purchases.len()));
    let tasks: Vec<_> = purchases
        .into_iter()
        .map(|purchase| {
            let engine = Arc::clone(engine);
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                let mut retried = 0;
                loop {
                    match engine.purchase(&purchase).await {
                        Ok(outcome) => return (outcome, retried),
                        Err(error) if error.is_retryable() => {
                            retried += 1;
                            tokio::time::sleep(RETRY_AFTER).await;
                        }
                        Err(error) => panic!("{purchase:?}: {error}"),
                    }
                }
            })
        })
        .collect();
    let mut result = CrowdResult::default();
    for task in tasks {
        let (outcome, retried) = task.await.unwrap();
        result.retried += retried;
        match outcome {
            PurchaseOutcome::Purchased { order_id, .. } => result.orders.push(order_id),
            PurchaseOutcome::SoldOut => result.sold_out += 1,
            other => result.others.push(other),
        }
    }
    result
}

pub(super) fn distinct_buyers(sale: &str, count: usize) -> Vec<Purchase> {
    (0..count)
        .map(|i| Purchase::new(sale, format!("buyer-{i}"), 1).unwrap())
        .collect()
}

pub(super) async fn remaining(engine: &dyn Engine, sale_id: &str) -> u32 {
    engine
        .snapshot(&sale(sale_id))
        .await
        .unwrap()
        .unwrap()
        .remaining
}

pub(super) fn order(
    sale_id: &str,
    user_id: &str,
    quantity: u32,
    status: OrderStatus,
    key: Option<&str>,
) -> Order {
    Order {
        id: OrderId::generate(),
        sale_id: sale(sale_id),
        user_id: user(user_id),
        quantity,
        items: vec![stockade_core::Item {
            sku: stockade_core::SkuId::default_sku(),
            quantity,
        }],
        tier: None,
        idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
        status,
        created_at: Utc::now(),
        expires_at: None,
        epoch: Epoch::FIRST,
    }
}

impl Harness {
    pub(super) fn clock_now(&self) -> chrono::DateTime<Utc> {
        use stockade_core::Clock;
        self.clock.now()
    }
}
