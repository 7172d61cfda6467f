//! A batch judged in one bulk commit exactly like its orders one by one, on
//! random batches.

use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stockade_core::{Epoch, IdempotencyKey, Order, OrderId, OrderStatus, SaleId, UserId};
use stockade_store::OrderStore;
use stockade_store::arbiter::{Verdict, VoidReason};

use crate::helpers::{each_store_with_pool, sale};

/// One order of a random commit plan, in terms both namespaces share.
#[derive(Clone, Debug)]
struct PlannedOrder {
    /// Orders with one slot share their id (a replay).
    slot: usize,
    /// An index into the plan's sales; `sales.len()` names a sale the store
    /// does not have.
    sale: usize,
    user: usize,
    quantity: u32,
    key: Option<usize>,
    epoch: u64,
}

/// A random case: sales, orders committed before, and the batch.
#[derive(Debug)]
struct Plan {
    /// (stock, per-buyer limit) of each sale.
    sales: Vec<(u32, u32)>,
    earlier: Vec<PlannedOrder>,
    batch: Vec<PlannedOrder>,
}

impl Plan {
    fn random(rng: &mut StdRng) -> Self {
        let sales: Vec<(u32, u32)> = (0..rng.random_range(1..=3))
            .map(|_| (rng.random_range(1..=8), rng.random_range(1..=3)))
            .collect();
        let mut slots = 0;
        let mut fresh = |rng: &mut StdRng| {
            slots += 1;
            PlannedOrder {
                slot: slots - 1,
                // Now and then a sale the store does not have.
                sale: rng.random_range(0..sales.len() * 8 + 1) / 8,
                user: rng.random_range(0..4),
                quantity: rng.random_range(1..=3),
                key: rng.random_bool(0.5).then(|| rng.random_range(0..3)),
                // Sales are at epoch 1: epoch 2 orders are stale.
                epoch: if rng.random_bool(0.1) { 2 } else { 1 },
            }
        };
        let earlier: Vec<PlannedOrder> = (0..rng.random_range(0..4)).map(|_| fresh(rng)).collect();
        let mut batch: Vec<PlannedOrder> = Vec::new();
        for _ in 0..rng.random_range(1..=24) {
            let replayable: Vec<&PlannedOrder> = earlier.iter().chain(&batch).collect();
            let planned = if !replayable.is_empty() && rng.random_bool(0.15) {
                replayable[rng.random_range(0..replayable.len())].clone()
            } else {
                fresh(rng)
            };
            batch.push(planned);
        }
        Self {
            sales,
            earlier,
            batch,
        }
    }
}

/// A verdict with order ids replaced by plan slots.
#[derive(Debug, PartialEq)]
enum SlotVerdict {
    Committed,
    Void(&'static str),
    KeyTaken { original: usize },
}

/// Everything a case leaves in the store, in plan terms.
#[derive(Debug, PartialEq)]
struct CaseResult {
    verdicts: Vec<SlotVerdict>,
    sales: Vec<CaseSale>,
}

/// A sale after a case: its sold count, its (buyer, quantity) holdings, and
/// its orders, committed and void.
#[derive(Debug, PartialEq)]
struct CaseSale {
    sold: u32,
    holdings: Vec<(String, i64)>,
    orders: Vec<CaseOrder>,
}

/// An order row: (slot, buyer, quantity, key, status).
type CaseOrder = (usize, String, i64, Option<String>, String);

/// Applies `plan` to sales named after `prefix`: the earlier orders one by
/// one, then the batch in one commit (`batched`) or one by one.
async fn run_plan(
    store: &OrderStore,
    pool: &sqlx::AnyPool,
    plan: &Plan,
    prefix: &str,
    batched: bool,
) -> CaseResult {
    let mut sale_ids = Vec::new();
    for (n, (stock, limit)) in plan.sales.iter().enumerate() {
        sale_ids.push(sale(store, &format!("{prefix}-{n}"), *stock, *limit).await);
    }
    sale_ids.push(SaleId::new(format!("{prefix}-unknown")).unwrap());
    let mut ids: Vec<OrderId> = Vec::new();
    let mut build = |planned: &PlannedOrder| {
        while ids.len() <= planned.slot {
            ids.push(OrderId::generate());
        }
        Order {
            id: ids[planned.slot],
            sale_id: sale_ids[planned.sale].clone(),
            user_id: UserId::new(format!("u{}", planned.user)).unwrap(),
            quantity: planned.quantity,
            items: vec![stockade_core::Item {
                sku: stockade_core::SkuId::default_sku(),
                quantity: planned.quantity,
            }],
            tier: None,
            idempotency_key: planned
                .key
                .map(|k| IdempotencyKey::new(format!("k{k}")).unwrap()),
            status: OrderStatus::Confirmed,
            created_at: Utc::now(),
            expires_at: None,
            epoch: Epoch::new(planned.epoch),
        }
    };
    let earlier: Vec<Order> = plan.earlier.iter().map(&mut build).collect();
    let batch: Vec<Order> = plan.batch.iter().map(&mut build).collect();
    for order in &earlier {
        store.commit(std::slice::from_ref(order)).await.unwrap();
    }
    let verdicts = if batched {
        store.commit(&batch).await.unwrap()
    } else {
        let mut verdicts = Vec::new();
        for order in &batch {
            verdicts.extend(store.commit(std::slice::from_ref(order)).await.unwrap());
        }
        verdicts
    };
    let slot_of = |id: OrderId| ids.iter().position(|known| *known == id).unwrap();
    let verdicts = verdicts
        .into_iter()
        .map(|verdict| match verdict {
            Verdict::Committed => SlotVerdict::Committed,
            Verdict::Void(VoidReason::KeyTaken { original }) => SlotVerdict::KeyTaken {
                original: slot_of(original),
            },
            Verdict::Void(reason) => SlotVerdict::Void(reason.label()),
        })
        .collect();
    let mut sales = Vec::new();
    for sale in &sale_ids[..plan.sales.len()] {
        let sold = store.sale_state(sale).await.unwrap().unwrap().sold;
        let holdings = sqlx::query_as::<_, (String, i64)>(
            "SELECT user_id, quantity FROM holdings WHERE sale_id = $1 ORDER BY user_id",
        )
        .bind(sale.as_str())
        .fetch_all(pool)
        .await
        .unwrap();
        let mut orders: Vec<CaseOrder> =
            sqlx::query_as::<_, (String, String, i64, Option<String>, String)>(
                "SELECT id, user_id, quantity, idempotency_key, status FROM orders
                  WHERE sale_id = $1",
            )
            .bind(sale.as_str())
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .map(|(id, user, quantity, key, status)| {
                (slot_of(id.parse().unwrap()), user, quantity, key, status)
            })
            .collect();
        orders.sort();
        sales.push(CaseSale {
            sold,
            holdings,
            orders,
        });
    }
    CaseResult { verdicts, sales }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_judged_exactly_like_its_orders_one_by_one() {
    // Random batches mixing committed and void orders (oversold, over the
    // limit, stale, unknown sale, key taken, replays) of several sales: the
    // one-transaction bulk commit must give each order the verdict, and
    // leave the store with the rows, that committing them one at a time in
    // the same order does.
    const CASES: u64 = 40;
    each_store_with_pool(async |store, pool| {
        for case in 0..CASES {
            let plan = Plan::random(&mut StdRng::seed_from_u64(case));
            let batched = run_plan(store, pool, &plan, &format!("c{case}-batch"), true).await;
            let single = run_plan(store, pool, &plan, &format!("c{case}-single"), false).await;
            assert_eq!(
                batched,
                single,
                "case {case} on {:?}: {plan:#?}",
                store.kind()
            );
        }
    })
    .await;
}
