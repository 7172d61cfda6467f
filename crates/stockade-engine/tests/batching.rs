//! Micro-batching on the engines that batch (Redis, PostgreSQL): a batch of
//! purchases decided in one call answers exactly as the same purchases made
//! one at a time on the memory engine, and a crowd shares calls. Real
//! throwaway servers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use sqlx::Row;
use stockade_core::{Engine, OrderId, Purchase, PurchaseOutcome, SaleSpec, SystemClock};
use stockade_engine::{MemoryEngine, PostgresEngine, RedisEngine, RedisEngineConfig};
use stockade_test_support::{PostgresServer, RedisServer};

fn spec(id: &str, stock: u32, limit: u32) -> SaleSpec {
    SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap()
}

/// What an outcome says, with order ids replaced by the index of the
/// purchase that made the order, so two engines' answers can be compared.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    Purchased { remaining: u32 },
    Duplicate { of: usize },
    Other(PurchaseOutcome),
}

fn shapes(outcomes: &[PurchaseOutcome]) -> Vec<Shape> {
    let made: Vec<Option<OrderId>> = outcomes
        .iter()
        .map(|outcome| match outcome {
            PurchaseOutcome::Purchased { order_id, .. } => Some(*order_id),
            _ => None,
        })
        .collect();
    outcomes
        .iter()
        .map(|outcome| match outcome {
            PurchaseOutcome::Purchased { remaining, .. } => Shape::Purchased {
                remaining: *remaining,
            },
            PurchaseOutcome::Duplicate { order_id } => Shape::Duplicate {
                of: made
                    .iter()
                    .position(|id| *id == Some(*order_id))
                    .expect("a duplicate names an order of the batch"),
            },
            other => Shape::Other(*other),
        })
        .collect()
}

/// Random batches (few buyers, few keys, quantities 1 to 3, a limit of 3,
/// little stock). On a current-thread runtime `join_all` queues every
/// purchase before the batch's call starts, so each case is ONE call.
fn batches_decide_exactly_as_one_at_a_time(
    runtime: &tokio::runtime::Runtime,
    batching: &dyn Engine,
    cases: u32,
) {
    let memory = MemoryEngine::new(Arc::new(SystemClock));
    let purchase = (0..4u8, 1..=3u32, proptest::option::of(0..3u8));
    let case = AtomicUsize::new(0);
    proptest!(ProptestConfig::with_cases(cases), |(batch in proptest::collection::vec(purchase, 1..40), stock in 1..12u32)| {
        let id = format!("p{}", case.fetch_add(1, Ordering::Relaxed));
        let purchases: Vec<Purchase> = batch
            .iter()
            .map(|(user, quantity, key)| {
                let p = Purchase::new(id.as_str(), format!("u{user}"), *quantity).unwrap();
                match key {
                    Some(key) => p.with_idempotency_key(format!("k{key}")).unwrap(),
                    None => p,
                }
            })
            .collect();
        let (batched, one_by_one) = runtime.block_on(async {
            batching.create_sale(&spec(&id, stock, 3)).await.unwrap();
            memory.create_sale(&spec(&id, stock, 3)).await.unwrap();
            let batched: Vec<PurchaseOutcome> =
                futures::future::join_all(purchases.iter().map(|p| batching.purchase(p)))
                    .await
                    .into_iter()
                    .map(Result::unwrap)
                    .collect();
            let mut one_by_one = Vec::new();
            for p in &purchases {
                one_by_one.push(memory.purchase(p).await.unwrap());
            }
            (batched, one_by_one)
        });
        prop_assert_eq!(shapes(&batched), shapes(&one_by_one));
    });
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn redis_batches_decide_exactly_as_one_at_a_time() {
    let server = RedisServer::start().unwrap();
    let runtime = current_thread();
    let redis = runtime
        .block_on(RedisEngine::connect(
            &RedisEngineConfig::new(server.url()),
            Arc::new(SystemClock),
        ))
        .unwrap();
    batches_decide_exactly_as_one_at_a_time(&runtime, &redis, 40);
}

#[test]
fn postgres_batches_decide_exactly_as_one_at_a_time() {
    let server = PostgresServer::start().unwrap();
    let runtime = current_thread();
    let postgres = runtime.block_on(async {
        let url = server.fresh_database().await.unwrap();
        PostgresEngine::connect(&url, 4, Arc::new(SystemClock))
            .await
            .unwrap()
    });
    batches_decide_exactly_as_one_at_a_time(&runtime, &postgres, 20);
}

async fn commits(engine: &PostgresEngine) -> i64 {
    sqlx::query(
        "SELECT xact_commit::bigint AS commits FROM pg_stat_database \
          WHERE datname = current_database()",
    )
    .fetch_one(engine.pool())
    .await
    .unwrap()
    .get("commits")
}

/// A crowd's purchases share transactions: far fewer commits than
/// purchases, and exactly the stock sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_crowd_shares_transactions() {
    let server = PostgresServer::start().unwrap();
    let url = server.fresh_database().await.unwrap();
    let engine = Arc::new(
        PostgresEngine::connect(&url, 8, Arc::new(SystemClock))
            .await
            .unwrap(),
    );
    engine.create_sale(&spec("crowd", 300, 1)).await.unwrap();
    // Statistics are flushed to the view when a backend goes idle; force it.
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(engine.pool())
        .await
        .unwrap();
    let before = commits(&engine).await;
    let tasks: Vec<_> = (0..1_000)
        .map(|i| {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                engine
                    .purchase(&Purchase::new("crowd", format!("u{i}"), 1).unwrap())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut sold = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), PurchaseOutcome::Purchased { .. }) {
            sold += 1;
        }
    }
    assert_eq!(sold, 300);
    // Idle backends report their counts within a second.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(engine.pool())
        .await
        .unwrap();
    let made = commits(&engine).await - before;
    assert!(
        made < 500,
        "1,000 purchases should share transactions, made {made} commits"
    );
}
