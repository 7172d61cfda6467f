//! Property test: random sequences of purchases and releases, each step a
//! batch run concurrently, checked against a model after every step.
//!
//! The model knows every order the engine accepted and every release it
//! confirmed, so it can demand exact accounting: remaining stock equals
//! total minus the items of live orders, every buyer's holding equals their
//! live orders and never exceeds the limit, and an idempotency key never
//! yields two orders.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use stockade_core::{
    Engine, Epoch, OrderId, Purchase, PurchaseOutcome, ReleaseOutcome, SaleId, SaleSpec, UserId,
};

use crate::harness::Harness;

const BUYERS: u8 = 4;

#[derive(Debug, Clone)]
enum Op {
    Buy {
        user: u8,
        quantity: u32,
        key: Option<u8>,
    },
    Release {
        pick: usize,
    },
    ReleaseUnknown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..BUYERS, 1..=3u32, proptest::option::of(0..4u8))
            .prop_map(|(user, quantity, key)| Op::Buy { user, quantity, key }),
        3 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        1 => Just(Op::ReleaseUnknown),
    ]
}

/// (total stock, per-user limit, steps of concurrent operations)
fn case() -> impl Strategy<Value = (u32, u32, Vec<Vec<Op>>)> {
    (
        1..=12u32,
        1..=4u32,
        proptest::collection::vec(proptest::collection::vec(op(), 1..=4), 1..=20),
    )
}

#[derive(Debug, Default)]
struct Model {
    /// order id -> (buyer, quantity, live)
    orders: Vec<(OrderId, u8, u32, bool)>,
    /// (buyer, key) -> order: keys are scoped to their buyer.
    keys: HashMap<(u8, u8), OrderId>,
}

impl Model {
    fn live_total(&self) -> u32 {
        self.orders.iter().filter(|o| o.3).map(|o| o.2).sum()
    }
    fn held_by(&self, user: u8) -> u32 {
        self.orders
            .iter()
            .filter(|o| o.3 && o.1 == user)
            .map(|o| o.2)
            .sum()
    }
}

enum Answer {
    Bought {
        user: u8,
        quantity: u32,
        key: Option<u8>,
        outcome: PurchaseOutcome,
    },
    Released {
        order: OrderId,
        known: bool,
        outcome: ReleaseOutcome,
    },
}

/// Runs the property test with `cases` random cases on one engine; each case
/// uses a sale of its own.
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
    let result = runner.run(&case(), |(total, limit, steps)| {
        let n = case_number.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sale = SaleId::new(format!("prop-{n}")).unwrap();
        runtime
            .block_on(run_case(&harness.engine, sale, total, limit, steps))
            .map_err(TestCaseError::fail)
    });
    if let Err(failure) = result {
        panic!("{} engine: {failure}", harness.engine.name());
    }
}

async fn run_case(
    engine: &Arc<dyn Engine>,
    sale: SaleId,
    total: u32,
    limit: u32,
    steps: Vec<Vec<Op>>,
) -> Result<(), String> {
    let spec = SaleSpec::builder(sale.as_str(), total)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap();
    engine.create_sale(&spec).await.map_err(|e| e.to_string())?;
    let mut model = Model::default();
    for (step, ops) in steps.into_iter().enumerate() {
        let tasks: Vec<_> = ops
            .into_iter()
            .map(|op| {
                let engine = Arc::clone(engine);
                let sale = sale.clone();
                let target = match op {
                    Op::Release { pick } if !model.orders.is_empty() => {
                        Some((model.orders[pick % model.orders.len()].0, true))
                    }
                    Op::Release { .. } | Op::ReleaseUnknown => Some((OrderId::generate(), false)),
                    Op::Buy { .. } => None,
                };
                tokio::spawn(async move {
                    match (op, target) {
                        (
                            Op::Buy {
                                user,
                                quantity,
                                key,
                            },
                            _,
                        ) => {
                            let mut purchase =
                                Purchase::new(sale.as_str(), format!("u{user}"), quantity).unwrap();
                            if let Some(k) = key {
                                purchase = purchase.with_idempotency_key(format!("k{k}")).unwrap();
                            }
                            let outcome = engine.purchase(&purchase).await.unwrap();
                            Answer::Bought {
                                user,
                                quantity,
                                key,
                                outcome,
                            }
                        }
                        (_, Some((order, known))) => {
                            let outcome = engine.release(&sale, order, Epoch::FIRST).await.unwrap();
                            Answer::Released {
                                order,
                                known,
                                outcome,
                            }
                        }
                        (_, None) => unreachable!("releases always have a target"),
                    }
                })
            })
            .collect();
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.map_err(|e| e.to_string())?);
        }
        apply(&mut model, answers, limit).map_err(|e| format!("step {step}: {e}"))?;
        check_invariants(engine, &sale, total, limit, &model)
            .await
            .map_err(|e| format!("after step {step}: {e}"))?;
    }
    Ok(())
}

fn apply(model: &mut Model, answers: Vec<Answer>, limit: u32) -> Result<(), String> {
    // Successes first, so that checks of duplicates and double releases in
    // the same batch see the order they refer to.
    let (firsts, rest): (Vec<_>, Vec<_>) = answers.into_iter().partition(|a| {
        matches!(
            a,
            Answer::Bought {
                outcome: PurchaseOutcome::Purchased { .. },
                ..
            } | Answer::Released {
                outcome: ReleaseOutcome::Released { .. },
                ..
            }
        )
    });
    for answer in firsts.into_iter().chain(rest) {
        match answer {
            Answer::Bought {
                user,
                quantity,
                key,
                outcome,
            } => match outcome {
                PurchaseOutcome::Purchased { order_id, .. } => {
                    if let Some(k) = key
                        && let Some(previous) = model.keys.insert((user, k), order_id)
                    {
                        return Err(format!(
                            "key k{k} of u{user} produced two orders: {previous} and {order_id}"
                        ));
                    }
                    model.orders.push((order_id, user, quantity, true));
                }
                PurchaseOutcome::Duplicate { order_id } => {
                    let k = key.ok_or("a purchase without key was called a duplicate")?;
                    if model.keys.get(&(user, k)) != Some(&order_id) {
                        return Err(format!(
                            "duplicate of k{k} of u{user} named {order_id}, model has {:?}",
                            model.keys.get(&(user, k))
                        ));
                    }
                }
                PurchaseOutcome::LimitExceeded { already, .. } => {
                    if already + quantity <= limit {
                        return Err(format!(
                            "limit exceeded with {already} held + {quantity} <= {limit}"
                        ));
                    }
                }
                PurchaseOutcome::InsufficientStock { remaining, .. } => {
                    if remaining == 0 || remaining >= quantity {
                        return Err(format!(
                            "insufficient stock with {remaining} for {quantity}"
                        ));
                    }
                }
                PurchaseOutcome::SoldOut => {}
                other => return Err(format!("unexpected purchase outcome {other:?}")),
            },
            Answer::Released {
                order,
                known,
                outcome,
            } => match outcome {
                ReleaseOutcome::Released { quantity, .. } => {
                    let entry = model
                        .orders
                        .iter_mut()
                        .find(|o| o.0 == order)
                        .ok_or_else(|| format!("released {order}, which was never sold"))?;
                    if !entry.3 || entry.2 != quantity {
                        return Err(format!(
                            "released {order} ({quantity}) but model has {entry:?}"
                        ));
                    }
                    entry.3 = false;
                }
                ReleaseOutcome::AlreadyReleased => {
                    let live = model.orders.iter().any(|o| o.0 == order && o.3);
                    if !known || live {
                        return Err(format!("{order} reported already released"));
                    }
                }
                ReleaseOutcome::UnknownOrder if !known => {}
                other => {
                    return Err(format!(
                        "unexpected release outcome {other:?} (known: {known})"
                    ));
                }
            },
        }
    }
    Ok(())
}

async fn check_invariants(
    engine: &Arc<dyn Engine>,
    sale: &SaleId,
    total: u32,
    limit: u32,
    model: &Model,
) -> Result<(), String> {
    let snapshot = engine
        .snapshot(sale)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("sale vanished")?;
    let live = model.live_total();
    if live > total {
        return Err(format!("oversold: {live} live items of {total}"));
    }
    if snapshot.remaining != total - live {
        return Err(format!(
            "remaining {} but total {total} - live {live} = {}",
            snapshot.remaining,
            total - live
        ));
    }
    for user in 0..BUYERS {
        let held = engine
            .purchased_by(sale, &UserId::new(format!("u{user}")).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        if held != model.held_by(user) || held > limit {
            return Err(format!(
                "u{user} holds {held}, model {} (limit {limit})",
                model.held_by(user)
            ));
        }
    }
    Ok(())
}
