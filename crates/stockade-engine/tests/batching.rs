//! Micro-batching on the Redis engine: a batch of purchases decided in one
//! script call answers exactly as the same purchases made one at a time on
//! the memory engine, and a crowd shares calls. A batch leaves one outbox
//! entry that the engine deletes once every order in it is decided. Real
//! throwaway servers.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use redis::AsyncCommands;
use stockade_core::{
    Engine, OrderId, Purchase, PurchaseOutcome, ReleaseOutcome, SaleId, SaleSpec, SystemClock,
};
use stockade_engine::{MemoryEngine, RedisEngine, RedisEngineConfig};
use stockade_test_support::RedisServer;

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
            other => Shape::Other(other.clone()),
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

async fn engine(server: &RedisServer) -> Arc<RedisEngine> {
    Arc::new(
        RedisEngine::connect(&RedisEngineConfig::new(server.url()), Arc::new(SystemClock))
            .await
            .unwrap(),
    )
}

fn sale(id: &str) -> SaleId {
    SaleId::new(id).unwrap()
}

/// How many purchase script calls Redis has run (FCALL, the engine's way on
/// Redis 7; EVALSHA and EVAL).
fn script_calls(server: &RedisServer) -> u64 {
    let stats = server.command(&["INFO", "commandstats"]).unwrap();
    stats
        .lines()
        .filter(|line| {
            ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                .iter()
                .any(|command| line.starts_with(command))
        })
        .filter_map(|line| {
            let calls = line.split("calls=").nth(1)?.split(',').next()?;
            calls.parse::<u64>().ok()
        })
        .sum()
}

async fn outbox_len(server: &RedisServer, engine: &RedisEngine, id: &str) -> usize {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    conn.xlen(engine.keys(&sale(id)).outbox).await.unwrap()
}

/// On a current-thread runtime, `join_all` queues every purchase before the
/// batch's drain task first runs: they all go in ONE script call, in the
/// order given.
#[tokio::test(flavor = "current_thread")]
async fn one_batch_decides_each_purchase_in_order_as_if_one_at_a_time() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("mixed", 4, 2)).await.unwrap();
    // Load the script first, so the count below is of purchase calls only.
    engine.create_sale(&spec("warm-up", 1, 1)).await.unwrap();
    engine
        .purchase(&Purchase::new("warm-up", "w", 1).unwrap())
        .await
        .unwrap();
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    let purchases = [
        Purchase::new("mixed", "ann", 2).unwrap(),
        // Over ann's limit of 2 by the first purchase of this very batch.
        Purchase::new("mixed", "ann", 1).unwrap(),
        Purchase::new("mixed", "bob", 1)
            .unwrap()
            .with_idempotency_key("k1")
            .unwrap(),
        // The same key again: the order the batch just made.
        Purchase::new("mixed", "bob", 1)
            .unwrap()
            .with_idempotency_key("k1")
            .unwrap(),
        // Only one item left for two.
        Purchase::new("mixed", "cat", 2).unwrap(),
        Purchase::new("mixed", "dan", 1).unwrap(),
        Purchase::new("mixed", "eve", 1).unwrap(),
    ];
    let outcomes = futures::future::join_all(purchases.iter().map(|p| engine.purchase(p))).await;
    let outcomes: Vec<PurchaseOutcome> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(script_calls(&server), 1, "one script call for the batch");

    let PurchaseOutcome::Purchased {
        order_id: bob_order,
        remaining: 1,
    } = outcomes[2]
    else {
        panic!("bob buys: {outcomes:?}");
    };
    assert!(matches!(
        outcomes[0],
        PurchaseOutcome::Purchased { remaining: 2, .. }
    ));
    assert_eq!(
        outcomes[1],
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: None
        }
    );
    assert_eq!(
        outcomes[3],
        PurchaseOutcome::Duplicate {
            order_id: bob_order
        }
    );
    assert_eq!(
        outcomes[4],
        PurchaseOutcome::InsufficientStock {
            sku: stockade_core::SkuId::default_sku(),
            remaining: 1
        }
    );
    assert!(matches!(
        outcomes[5],
        PurchaseOutcome::Purchased { remaining: 0, .. }
    ));
    assert_eq!(outcomes[6], PurchaseOutcome::SoldOut);

    // One outbox entry for the three orders.
    assert_eq!(outbox_len(&server, &engine, "mixed").await, 1);
    let outbox = engine.outbox(&sale("mixed")).await.unwrap();
    assert_eq!(outbox.len(), 3);
    assert!(outbox.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
    assert_eq!(
        engine
            .snapshot(&sale("mixed"))
            .await
            .unwrap()
            .unwrap()
            .remaining,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_shares_script_calls_and_sells_exactly_the_stock() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("crowd", 500, 1)).await.unwrap();
    server.command(&["CONFIG", "RESETSTAT"]).unwrap();
    let tasks: Vec<_> = (0..2_000)
        .map(|i| {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                // Every buyer taps twice.
                let purchase = Purchase::new("crowd", format!("u{}", i % 1_000), 1).unwrap();
                engine.purchase(&purchase).await.unwrap()
            })
        })
        .collect();
    let mut sold = HashSet::new();
    let mut buyers = HashSet::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if let PurchaseOutcome::Purchased { order_id, .. } = task.await.unwrap() {
            assert!(sold.insert(order_id));
            assert!(buyers.insert(i % 1_000), "buyer {} served twice", i % 1_000);
        }
    }
    assert_eq!(sold.len(), 500);
    let calls = script_calls(&server);
    assert!(
        calls < 1_000,
        "2,000 purchases should share script calls, made {calls}"
    );

    // Every accepted order is in the outbox once; acknowledging them all
    // empties the stream.
    let outbox: Vec<OrderId> = engine
        .outbox(&sale("crowd"))
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(outbox.iter().copied().collect::<HashSet<_>>(), sold);
    assert_eq!(outbox.len(), 500);
    engine.acknowledge(&sale("crowd"), &outbox).await.unwrap();
    assert_eq!(outbox_len(&server, &engine, "crowd").await, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_batch_entry_goes_only_once_every_order_in_it_is_decided_or_released() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("entry", 10, 1)).await.unwrap();
    let purchases: Vec<Purchase> = ["a", "b", "c"]
        .iter()
        .map(|u| Purchase::new("entry", *u, 1).unwrap())
        .collect();
    let ids: Vec<OrderId> = futures::future::join_all(purchases.iter().map(|p| engine.purchase(p)))
        .await
        .into_iter()
        .map(|outcome| match outcome.unwrap() {
            PurchaseOutcome::Purchased { order_id, .. } => order_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(outbox_len(&server, &engine, "entry").await, 1);

    engine.acknowledge(&sale("entry"), &ids[..1]).await.unwrap();
    // Acknowledging twice counts once.
    engine.acknowledge(&sale("entry"), &ids[..1]).await.unwrap();
    assert_eq!(
        outbox_len(&server, &engine, "entry").await,
        1,
        "b and c undecided"
    );

    // A released order is left out of the outbox read (never to be
    // committed) and counts as decided.
    assert!(matches!(
        engine
            .release(&sale("entry"), ids[1], stockade_core::Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::Released { .. }
    ));
    let left: Vec<OrderId> = engine
        .outbox(&sale("entry"))
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(left, vec![ids[2]]);
    engine.acknowledge(&sale("entry"), &ids[2..]).await.unwrap();
    assert_eq!(outbox_len(&server, &engine, "entry").await, 0);
}

/// Another process (a restarted instance, another instance's recovery)
/// knows the entries only from reading the outbox; that is enough to delete
/// them once it acknowledges what it read.
#[tokio::test(flavor = "current_thread")]
async fn an_engine_that_did_not_write_an_entry_deletes_it_after_reading_it() {
    let server = RedisServer::start().unwrap();
    let writer = engine(&server).await;
    writer.create_sale(&spec("other", 10, 1)).await.unwrap();
    let purchases: Vec<Purchase> = ["a", "b"]
        .iter()
        .map(|u| Purchase::new("other", *u, 1).unwrap())
        .collect();
    futures::future::join_all(purchases.iter().map(|p| writer.purchase(p))).await;

    let recovering = engine(&server).await;
    // Acknowledging an order it has not read is a no-op, not a wrong delete.
    recovering
        .acknowledge(&sale("other"), &[OrderId::generate()])
        .await
        .unwrap();
    let read: Vec<OrderId> = recovering
        .outbox(&sale("other"))
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(read.len(), 2);
    recovering.acknowledge(&sale("other"), &read).await.unwrap();
    assert_eq!(outbox_len(&server, &recovering, "other").await, 0);
    // The writer acknowledging later changes nothing.
    writer.acknowledge(&sale("other"), &read).await.unwrap();
}

/// Entries written one order each, before batching, are still read and
/// deleted: an upgrade never strands an order in the outbox.
#[tokio::test]
async fn entries_of_the_one_order_layout_are_still_read() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("legacy", 10, 1)).await.unwrap();
    let order = OrderId::generate();
    let outbox = engine.keys(&sale("legacy")).outbox;
    server
        .command(&[
            "XADD",
            &outbox,
            "*",
            "order_id",
            &order.to_string(),
            "user_id",
            "old",
            "quantity",
            "2",
            "idempotency_key",
            "k",
            "created_at_ms",
            "1700000000000",
            "epoch",
            "1",
        ])
        .unwrap();
    let read = engine.outbox(&sale("legacy")).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].id, order);
    assert_eq!(read[0].user_id.as_str(), "old");
    assert_eq!(read[0].quantity, 2);
    assert_eq!(read[0].idempotency_key.as_ref().unwrap().as_str(), "k");
    engine.acknowledge(&sale("legacy"), &[order]).await.unwrap();
    assert_eq!(outbox_len(&server, &engine, "legacy").await, 0);
}
