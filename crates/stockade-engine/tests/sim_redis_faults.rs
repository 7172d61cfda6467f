//! The Redis engine on the simulator's in-process Redis, reached through
//! a `Connector`, under the faults `redis_faults.rs` puts a real server
//! through (scripts flushed, a restart that loses the data, a server that
//! stops answering) and those only the simulation makes exact: replies
//! lost after the command ran, and a failover to a replica that lags.
//! One thread, paused time: timeouts pass as soon as nothing else can run.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use stockade_core::{
    Clock, Engine, EngineError, Epoch, ManualClock, Order, OrderStatus, Purchase, PurchaseOutcome,
    SaleId, SaleSpec,
};
use stockade_engine::{Connector, RedisEngine, RedisEngineConfig};
use stockade_sim::redis::{Primary, Reply, SimRedis};

fn clock() -> ManualClock {
    ManualClock::new(Utc.timestamp_millis_opt(1_800_000_000_000).unwrap())
}

async fn engine(connector: Arc<dyn Connector>, clock: &ManualClock) -> RedisEngine {
    let mut config = RedisEngineConfig::connected(connector);
    config.response_timeout = Duration::from_millis(500);
    RedisEngine::connect(&config, Arc::new(clock.clone()))
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

/// Buys until an answer comes (a retryable error means the connection is
/// being replaced), at most `tries` times.
async fn buy_until_answered(engine: &RedisEngine, sale: &str, user: &str) -> PurchaseOutcome {
    for _ in 0..20 {
        match buy(engine, sale, user).await {
            Ok(outcome) => return outcome,
            Err(e) if e.is_retryable() => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("not recovered: {e}"),
        }
    }
    panic!("no answer after 20 tries");
}

fn remaining(server: &SimRedis, sale: &str) -> Reply {
    let key = format!("stockade:{{{sale}}}:sale");
    server.execute(&[b"HGET", key.as_bytes(), b"remaining"])
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn flushed_scripts_and_functions_are_reloaded_transparently() {
    let clock = clock();
    let server = SimRedis::new("flush", Arc::new(clock.clone()));
    let engine = engine(Arc::new(server.clone()), &clock).await;
    engine.create_sale(&spec("flush", 10)).await.unwrap();
    assert!(matches!(
        buy(&engine, "flush", "a").await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));
    server.flush_scripts();
    assert_eq!(server.execute(&[b"FUNCTION", b"FLUSH"]), Reply::ok());
    assert!(matches!(
        buy(&engine, "flush", "b").await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 8, .. }
    ));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_restart_loses_the_sale_the_run_id_changes_and_a_rebuild_restores_it() {
    let clock = clock();
    let server = SimRedis::new("restart", Arc::new(clock.clone()));
    let engine = engine(Arc::new(server.clone()), &clock).await;
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
            created_at: clock.now(),
            expires_at: None,
            epoch: Epoch::FIRST,
        });
    }
    let run_id = engine.server_run_id().await.unwrap();
    assert_eq!(run_id, server.run_id());
    server.restart_empty();

    // The open connection broke: the engine opens another by itself.
    assert_eq!(
        buy_until_answered(&engine, "restart", "d").await,
        PurchaseOutcome::UnknownSale
    );
    assert_ne!(engine.server_run_id().await.unwrap(), run_id);
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

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_frozen_server_gives_a_retryable_timeout_and_answers_once_thawed() {
    let clock = clock();
    let server = SimRedis::new("frozen", Arc::new(clock.clone()));
    let engine = engine(Arc::new(server.clone()), &clock).await;
    engine.create_sale(&spec("frozen", 5)).await.unwrap();
    server.freeze();
    let started = tokio::time::Instant::now();
    let error = buy(&engine, "frozen", "a").await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(500),
        "the response timeout"
    );
    // Nothing ran while frozen.
    assert_eq!(remaining(&server, "frozen"), Reply::bulk("5"));
    server.thaw();
    assert!(matches!(
        buy_until_answered(&engine, "frozen", "b").await,
        PurchaseOutcome::Purchased { .. }
    ));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_lost_reply_is_a_timeout_the_purchase_ran_and_a_retry_does_not_sell_twice() {
    let clock = clock();
    let server = SimRedis::new("lost", Arc::new(clock.clone()));
    let engine = engine(Arc::new(server.clone()), &clock).await;
    engine.create_sale(&spec("lost", 5)).await.unwrap();
    server.drop_replies(1);
    let error = buy(&engine, "lost", "a").await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    // The purchase was applied although its answer never came.
    assert_eq!(remaining(&server, "lost"), Reply::bulk("4"));
    // The hung connection is replaced; the buyer already holds the item.
    assert_eq!(
        buy_until_answered(&engine, "lost", "a").await,
        PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        }
    );
    assert_eq!(remaining(&server, "lost"), Reply::bulk("4"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failover_to_a_lagging_replica_changes_the_run_id_and_loses_the_last_writes() {
    let clock = clock();
    let old = SimRedis::new("primary", Arc::new(clock.clone()));
    let primary = Primary::new(old.clone());
    let engine = engine(Arc::new(primary.clone()), &clock).await;
    engine.create_sale(&spec("failover", 5)).await.unwrap();
    assert!(matches!(
        buy(&engine, "failover", "a").await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));
    let before_b = old.writes();
    assert!(matches!(
        buy(&engine, "failover", "b").await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));
    let run_id = engine.server_run_id().await.unwrap();

    // The replica missed b's purchase (every write effect of it).
    let replica = old.replica_lagging(old.writes() - before_b);
    assert_eq!(remaining(&replica, "failover"), Reply::bulk("4"));
    primary.promote(replica.clone());
    old.restart_empty();

    let b_again = buy_until_answered(&engine, "failover", "b").await;
    assert!(
        matches!(b_again, PurchaseOutcome::Purchased { remaining: 3, .. }),
        "{b_again:?}"
    );
    let new_run_id = engine.server_run_id().await.unwrap();
    assert_ne!(new_run_id, run_id);
    assert_eq!(new_run_id, replica.run_id());
    assert_eq!(
        buy(&engine, "failover", "a").await.unwrap(),
        PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        }
    );
    let sale = SaleId::new("failover").unwrap();
    assert_eq!(engine.snapshot(&sale).await.unwrap().unwrap().remaining, 3);
}
