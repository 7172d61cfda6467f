//! The Redis engine under the faults of docs/design.md: script cache flushed,
//! server restarted with its data lost, server unresponsive (Sentinel and
//! Cluster: `redis_ha.rs`). Each test runs its own throwaway redis-server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use redis::AsyncCommands;
use stockade_core::{
    Engine, EngineError, Epoch, Order, OrderStatus, Purchase, PurchaseOutcome, SaleId, SaleSpec,
    SystemClock,
};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_test_support::RedisServer;

async fn engine(server: &RedisServer) -> RedisEngine {
    let mut config = RedisEngineConfig::new(server.url());
    config.response_timeout = Duration::from_millis(500);
    RedisEngine::connect(&config, Arc::new(SystemClock))
        .await
        .unwrap()
}

fn spec(id: &str, stock: u32) -> SaleSpec {
    SaleSpec::builder(id, stock).unwrap().build().unwrap()
}

async fn buy(engine: &RedisEngine, sale: &str, user: &str) -> Result<PurchaseOutcome, EngineError> {
    engine
        .purchase(&Purchase::new(sale, user, 1).unwrap())
        .await
}

#[tokio::test]
async fn script_flush_is_reloaded_transparently() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("flush", 10)).await.unwrap();
    assert!(matches!(
        buy(&engine, "flush", "a").await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));
    // Both caches: EVALSHA's scripts and the Functions library (the
    // engine's way on the Redis 7 the tests start).
    assert!(server.command(&["SCRIPT", "FLUSH"]).unwrap().contains("OK"));
    assert!(
        server
            .command(&["FUNCTION", "FLUSH"])
            .unwrap()
            .contains("OK")
    );
    assert!(matches!(
        buy(&engine, "flush", "b").await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 8, .. }
    ));
    assert!(
        engine
            .release(
                &SaleId::new("flush").unwrap(),
                stockade_core::OrderId::generate(),
                Epoch::FIRST,
            )
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn restart_loses_the_sale_and_rebuild_restores_it_from_the_store() {
    let mut server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    let sale_spec = spec("restart", 10);
    engine.create_sale(&sale_spec).await.unwrap();
    let mut committed = Vec::new();
    for user in ["a", "b", "c"] {
        let PurchaseOutcome::Purchased { order_id, .. } =
            buy(&engine, "restart", user).await.unwrap()
        else {
            panic!("purchase must succeed");
        };
        committed.push(Order {
            id: order_id,
            sale_id: sale_spec.id().clone(),
            user_id: stockade_core::UserId::new(user).unwrap(),
            quantity: 1,
            items: vec![stockade_core::Item {
                sku: stockade_core::SkuId::default_sku(),
                quantity: 1,
            }],
            tier: None,
            idempotency_key: None,
            status: OrderStatus::Confirmed,
            created_at: Utc::now(),
            expires_at: None,
            epoch: Epoch::FIRST,
        });
    }
    let run_id = engine.server_run_id().await.unwrap();
    server.restart().unwrap();

    // The engine reconnects by itself; until then calls fail as retryable.
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        match buy(&engine, "restart", "d").await {
            Ok(outcome) => break outcome,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("not recovered: {e}"),
        }
    };
    // The data is gone: the engine must not invent a sale (it would sell
    // the full stock again). The caller rebuilds from the store.
    assert_eq!(outcome, PurchaseOutcome::UnknownSale);
    assert_ne!(
        engine.server_run_id().await.unwrap(),
        run_id,
        "a restart changes the run id"
    );
    assert!(engine.snapshot(sale_spec.id()).await.unwrap().is_none());

    let snapshot = engine
        .rebuild(&sale_spec, Epoch::FIRST, &committed)
        .await
        .unwrap();
    assert_eq!(snapshot.remaining, 7);
    assert_eq!(
        buy(&engine, "restart", "a").await.unwrap(),
        PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        }
    );
    assert!(matches!(
        buy(&engine, "restart", "d").await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 6, .. }
    ));
}

#[tokio::test]
async fn an_unresponsive_server_gives_retryable_errors_and_nothing_is_sold_twice() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("paused", 5)).await.unwrap();
    server.pause();
    let started = Instant::now();
    let err = buy(&engine, "paused", "a").await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the response timeout"
    );
    server.resume();

    // The call that timed out may or may not have run on the server; either
    // way the buyer holds at most one item and the stock adds up.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match buy(&engine, "paused", "a").await {
            Ok(
                PurchaseOutcome::Purchased { .. }
                | PurchaseOutcome::LimitExceeded {
                    already: 1,
                    sku: None,
                },
            ) => break,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("not recovered: {e}"),
        }
    }
    let snapshot = engine
        .snapshot(&SaleId::new("paused").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.remaining, 4);
}

#[tokio::test]
async fn an_unreachable_server_is_reported_as_unavailable() {
    let mut server = RedisServer::start().unwrap();
    let url = server.url();
    server.kill();
    let mut config = RedisEngineConfig::new(url);
    config.connection_timeout = Duration::from_millis(300);
    let err = RedisEngine::connect(&config, Arc::new(SystemClock))
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
}

#[tokio::test]
async fn every_accepted_order_is_in_the_outbox_stream() {
    let server = RedisServer::start().unwrap();
    let engine = engine(&server).await;
    engine.create_sale(&spec("outbox", 3)).await.unwrap();
    let mut accepted = Vec::new();
    for user in ["a", "b", "c", "d", "e"] {
        if let PurchaseOutcome::Purchased { order_id, .. } =
            buy(&engine, "outbox", user).await.unwrap()
        {
            accepted.push(order_id.to_string());
        }
    }
    assert_eq!(accepted.len(), 3);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let outbox = engine.keys(&SaleId::new("outbox").unwrap()).outbox;
    let entries: redis::streams::StreamRangeReply = conn.xrange_all(&outbox).await.unwrap();
    // One purchase at a time: one batch, so one entry, per accepted order;
    // none for refusals.
    let ids: Vec<String> = entries
        .ids
        .iter()
        .map(|entry| {
            let orders: Vec<&String> = entry
                .map
                .keys()
                .filter(|field| !matches!(field.as_str(), "epoch" | "at"))
                .collect();
            assert_eq!(orders.len(), 1, "{entry:?}");
            orders[0].clone()
        })
        .collect();
    assert_eq!(ids, accepted, "in order");
    let first = &entries.ids[0];
    // user, quantity, key (none): a sale created with `stock` alone
    // records its orders as before SKUs.
    assert_eq!(first.get::<String>(&accepted[0]).unwrap(), "a\n1\n");
    assert_eq!(first.get::<u64>("epoch").unwrap(), 1);
}
