//! Property test of sales with several SKUs: random bundles (one to three
//! SKUs, one or two of each) and releases, each step a batch run
//! concurrently, checked against a model after every step.
//!
//! The model demands exact accounting per SKU (each SKU's remaining stock
//! is its stock minus the items of live orders, so a bundle that took part
//! of its items would show), every buyer's holding, the per-user limit and
//! the per-SKU limit. A step of one operation is also predicted exactly:
//! the engine's answer must be the one the model gives.

use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use stockade_core::{
    Engine, Epoch, OrderId, Purchase, PurchaseOutcome, ReleaseOutcome, SaleId, SaleSpec, SkuId,
    SkuSpec, UserId, WantedItem,
};

use crate::harness::Harness;

const BUYERS: u8 = 3;
const SKUS: [&str; 3] = ["s-a", "s-b", "s-c"];

#[derive(Debug, Clone)]
enum Op {
    /// Items as (SKU position, quantity), each SKU once.
    Buy {
        user: u8,
        items: Vec<(usize, u32)>,
    },
    Release {
        pick: usize,
    },
}

fn bundle() -> impl Strategy<Value = Vec<(usize, u32)>> {
    proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3)
        .prop_flat_map(|skus| {
            let n = skus.len();
            (Just(skus), proptest::collection::vec(1..=2u32, n))
        })
        .prop_map(|(skus, quantities)| skus.into_iter().zip(quantities).collect())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..BUYERS, bundle()).prop_map(|(user, items)| Op::Buy { user, items }),
        1 => any::<usize>().prop_map(|pick| Op::Release { pick }),
    ]
}

/// A case: each SKU's stock, the per-user limit, the per-SKU limit, and
/// the steps.
#[derive(Debug, Clone)]
struct Case {
    stock: [u32; 3],
    limit: u32,
    sku_limit: Option<u32>,
    steps: Vec<Vec<Op>>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        [1..=5u32, 1..=5u32, 1..=5u32],
        1..=8u32,
        proptest::option::of(1..=3u32),
        proptest::collection::vec(proptest::collection::vec(op(), 1..=4), 1..=16),
    )
        .prop_map(|(stock, limit, sku_limit, steps)| Case {
            stock,
            limit,
            sku_limit,
            steps,
        })
}

/// An order as the model knows it: (order, buyer, items, live).
type ModelOrder = (OrderId, u8, Vec<(usize, u32)>, bool);

#[derive(Debug, Default)]
struct Model {
    orders: Vec<ModelOrder>,
}

impl Model {
    fn sold(&self, sku: usize) -> u32 {
        self.live()
            .flat_map(|o| &o.2)
            .filter(|(s, _)| *s == sku)
            .map(|(_, q)| q)
            .sum()
    }
    fn held(&self, user: u8) -> u32 {
        self.live()
            .filter(|o| o.1 == user)
            .flat_map(|o| &o.2)
            .map(|(_, q)| q)
            .sum()
    }
    fn held_of(&self, user: u8, sku: usize) -> u32 {
        self.live()
            .filter(|o| o.1 == user)
            .flat_map(|o| &o.2)
            .filter(|(s, _)| *s == sku)
            .map(|(_, q)| q)
            .sum()
    }
    fn live(&self) -> impl Iterator<Item = &ModelOrder> {
        self.orders.iter().filter(|o| o.3)
    }

    /// What a purchase alone must be answered, by the rule: limits, then
    /// each item's stock in order; sold out when every SKU is.
    fn predict(&self, case: &Case, user: u8, items: &[(usize, u32)]) -> PurchaseOutcome {
        let quantity: u32 = items.iter().map(|(_, q)| q).sum();
        let already = self.held(user);
        if already + quantity > case.limit {
            return PurchaseOutcome::LimitExceeded { already, sku: None };
        }
        if let Some(cap) = case.sku_limit {
            for &(sku, q) in items {
                let already = self.held_of(user, sku);
                if already + q > cap {
                    return PurchaseOutcome::LimitExceeded {
                        already,
                        sku: Some(sku_id(sku)),
                    };
                }
            }
        }
        let left = |sku: usize| case.stock[sku] - self.sold(sku);
        for &(sku, q) in items {
            if left(sku) < q {
                return if (0..3).all(|s| left(s) == 0) {
                    PurchaseOutcome::SoldOut
                } else {
                    PurchaseOutcome::InsufficientStock {
                        sku: sku_id(sku),
                        remaining: left(sku),
                    }
                };
            }
        }
        let after: u32 = (0..3).map(left).sum::<u32>() - quantity;
        PurchaseOutcome::Purchased {
            order_id: OrderId::generate(),
            remaining: after,
        }
    }
}

fn sku_id(position: usize) -> SkuId {
    SkuId::new(SKUS[position]).unwrap()
}

/// Runs the property test on one engine; each case uses a sale of its own.
pub fn check<F, Fut>(make: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Harness>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let harness = runtime.block_on(make());
    let cases = match harness.engine.name() {
        "memory" => 256,
        "redis" => 64,
        _ => 32,
    };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let case_number = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&case(), |case| {
        let n = case_number.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sale = SaleId::new(format!("bundle-{n}")).unwrap();
        runtime
            .block_on(run_case(&harness.engine, sale, case))
            .map_err(TestCaseError::fail)
    });
    if let Err(failure) = result {
        panic!("{} engine: {failure}", harness.engine.name());
    }
}

async fn run_case(engine: &Arc<dyn Engine>, sale: SaleId, case: Case) -> Result<(), String> {
    let skus = (0..3)
        .map(|i| SkuSpec {
            id: sku_id(i),
            stock: case.stock[i],
        })
        .collect();
    let mut builder = SaleSpec::with_skus(sale.as_str(), skus)
        .unwrap()
        .per_user_limit(case.limit)
        .unwrap();
    if let Some(cap) = case.sku_limit {
        builder = builder.per_sku_limit(cap).unwrap();
    }
    let spec = builder.build().unwrap();
    engine.create_sale(&spec).await.map_err(|e| e.to_string())?;
    let mut model = Model::default();
    for (step, ops) in case.steps.iter().enumerate() {
        let alone = ops.len() == 1;
        let mut tasks = Vec::new();
        for op in ops.iter().cloned() {
            let engine = Arc::clone(engine);
            let sale = sale.clone();
            let target = match op {
                Op::Release { pick } if !model.orders.is_empty() => {
                    Some(model.orders[pick % model.orders.len()].0)
                }
                _ => None,
            };
            let expected = match &op {
                Op::Buy { user, items } if alone => Some(model.predict(&case, *user, items)),
                _ => None,
            };
            tasks.push(tokio::spawn(async move {
                match (op, target) {
                    (Op::Buy { user, items }, _) => {
                        let wanted = items
                            .iter()
                            .map(|&(sku, quantity)| WantedItem {
                                sku: Some(sku_id(sku)),
                                quantity,
                            })
                            .collect();
                        let purchase = Purchase::of_items(
                            sale.clone(),
                            UserId::new(format!("u{user}")).unwrap(),
                            wanted,
                        )
                        .unwrap();
                        let outcome = engine
                            .purchase(&purchase)
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok::<_, String>((Some((user, items, outcome, expected)), None))
                    }
                    (Op::Release { .. }, Some(order)) => {
                        let outcome = engine
                            .release(&sale, order, Epoch::FIRST)
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok((None, Some((order, outcome))))
                    }
                    (Op::Release { .. }, None) => Ok((None, None)),
                }
            }));
        }
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.map_err(|e| e.to_string())??);
        }
        // Releases that released first, so a second release of the same
        // order in the step finds it released.
        answers.sort_by_key(|(_, released)| {
            !matches!(released, Some((_, ReleaseOutcome::Released { .. })))
        });
        for (bought, released) in answers {
            if let Some((user, items, outcome, expected)) = bought {
                check_purchase(&mut model, &case, user, items, outcome, expected)
                    .map_err(|e| format!("step {step}: {e}"))?;
            }
            if let Some((order, outcome)) = released {
                check_release(&mut model, order, outcome)
                    .map_err(|e| format!("step {step}: {e}"))?;
            }
        }
        check_invariants(engine, &sale, &case, &model)
            .await
            .map_err(|e| format!("after step {step}: {e}"))?;
    }
    Ok(())
}

fn check_purchase(
    model: &mut Model,
    case: &Case,
    user: u8,
    items: Vec<(usize, u32)>,
    outcome: PurchaseOutcome,
    expected: Option<PurchaseOutcome>,
) -> Result<(), String> {
    if let Some(expected) = expected {
        let same = match (&outcome, &expected) {
            (
                PurchaseOutcome::Purchased { remaining: a, .. },
                PurchaseOutcome::Purchased { remaining: b, .. },
            ) => a == b,
            (a, b) => a == b,
        };
        if !same {
            return Err(format!(
                "u{user} buying {items:?} alone got {outcome:?}, the rule says {expected:?}"
            ));
        }
    }
    match outcome {
        PurchaseOutcome::Purchased { order_id, .. } => {
            model.orders.push((order_id, user, items, true));
        }
        PurchaseOutcome::InsufficientStock { sku, .. } => {
            if !items.iter().any(|&(s, _)| sku_id(s) == sku) {
                return Err(format!(
                    "{items:?} refused for SKU {sku}, which it did not ask for"
                ));
            }
        }
        PurchaseOutcome::LimitExceeded { sku: Some(sku), .. } if case.sku_limit.is_none() => {
            return Err(format!("a per-SKU limit on {sku} without one"));
        }
        PurchaseOutcome::LimitExceeded { .. } | PurchaseOutcome::SoldOut => {}
        other => return Err(format!("unexpected purchase outcome {other:?}")),
    }
    Ok(())
}

fn check_release(model: &mut Model, order: OrderId, outcome: ReleaseOutcome) -> Result<(), String> {
    let entry = model
        .orders
        .iter_mut()
        .find(|o| o.0 == order)
        .ok_or_else(|| format!("released {order}, which was never sold"))?;
    match outcome {
        ReleaseOutcome::Released { quantity, .. } => {
            let total: u32 = entry.2.iter().map(|(_, q)| q).sum();
            if !entry.3 || total != quantity {
                return Err(format!(
                    "released {order} ({quantity}) but model has {entry:?}"
                ));
            }
            entry.3 = false;
        }
        ReleaseOutcome::AlreadyReleased if !entry.3 => {}
        other => return Err(format!("release of {order} answered {other:?}")),
    }
    Ok(())
}

async fn check_invariants(
    engine: &Arc<dyn Engine>,
    sale: &SaleId,
    case: &Case,
    model: &Model,
) -> Result<(), String> {
    let snapshot = engine
        .snapshot(sale)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("sale vanished")?;
    for (i, sku) in snapshot.skus.iter().enumerate() {
        let sold = model.sold(i);
        if sold > case.stock[i] || sku.remaining != case.stock[i] - sold || sku.sold != sold {
            return Err(format!(
                "SKU {} shows {} left and {} sold, model sold {sold} of {}",
                sku.id, sku.remaining, sku.sold, case.stock[i]
            ));
        }
    }
    let total_sold: u32 = (0..3).map(|i| model.sold(i)).sum();
    if snapshot.sold != total_sold {
        return Err(format!("sale sold {}, model {total_sold}", snapshot.sold));
    }
    for user in 0..BUYERS {
        let held = engine
            .purchased_by(sale, &UserId::new(format!("u{user}")).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        if held != model.held(user) || held > case.limit {
            return Err(format!(
                "u{user} holds {held}, model {} (limit {})",
                model.held(user),
                case.limit
            ));
        }
        if let Some(cap) = case.sku_limit
            && let Some(sku) = (0..3).find(|&s| model.held_of(user, s) > cap)
        {
            return Err(format!("u{user} holds more than {cap} of {}", SKUS[sku]));
        }
    }
    Ok(())
}
