//! The engine against the store: a leftover engine copy, an engine behind
//! the store, two deployments sharing one Redis under their own prefixes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Setup, TestServer, Timing};

/// A sale created in a fresh store while Redis still holds one of that id
/// (a store restored from a backup, or another deployment on the same
/// Redis and prefix) is rebuilt from the store: the engine must not keep
/// the old copy's sold stock (an undersell that nothing would repair).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creating_a_sale_over_a_leftover_engine_copy_rebuilds_it_from_the_store() {
    let first = TestServer::start(Setup::RedisPostgres).await;
    first
        .create_sale(json!({"id": "reused", "stock": 10}))
        .await;
    for buyer in ["a", "b", "c", "d"] {
        let (status, body) = first.buy("reused", buyer, 1, None).await;
        assert_eq!(status, 201, "{body}");
    }
    let shared = first.redis.as_ref().unwrap().url();
    // A second deployment: a fresh store, the same Redis.
    let second = TestServer::start_adjusted(
        Setup::RedisPostgres,
        Timing::default(),
        Arc::new(stockade_core::SystemClock),
        move |config| config.redis.redis_url = Some(shared),
    )
    .await;
    second
        .create_sale(json!({"id": "reused", "stock": 10}))
        .await;
    let (status, sale) = second.get("/v1/sales/reused").await;
    assert_eq!(status, 200, "{sale}");
    assert_eq!(
        sale["remaining"], 10,
        "the new store has sold nothing; the engine must offer all of it: {sale}"
    );
    for i in 0..10 {
        let (status, body) = second.buy("reused", &format!("n{i}"), 1, None).await;
        assert_eq!(status, 201, "purchase {i} of 10: {body}");
    }
}

/// Redis offering less than the store has left (and no order in its outbox
/// to explain it) is out of line too: the reconciler rebuilds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_engine_behind_the_store_is_rebuilt() {
    let server = TestServer::start(Setup::RedisPostgres).await;
    server
        .create_sale(json!({"id": "behind", "stock": 10}))
        .await;
    let (status, body) = server.buy("behind", "a", 1, None).await;
    assert_eq!(status, 201, "{body}");
    // The engine loses 5 items behind everyone's back.
    let redis = server.redis.as_ref().unwrap();
    let reply = redis
        .command(&["HINCRBY", "stockade:{behind}:sale", "remaining", "-5"])
        .unwrap();
    assert!(reply.contains('4'), "remaining was 9, now 4: {reply}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, sale) = server.get("/v1/sales/behind").await;
        if sale["remaining"] == 9 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the engine was never rebuilt: {sale}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two deployments with their own `--redis-key-prefix` share one Redis:
/// each sells its own sale of the same id, exactly, and neither touches
/// the other's keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_deployments_with_their_own_key_prefix_share_one_redis() {
    let redis = stockade_test_support::RedisServer::start().unwrap();
    let mut deployments = Vec::new();
    for prefix in ["shop-a", "shop-b"] {
        let url = redis.url();
        deployments.push(
            TestServer::start_adjusted(
                Setup::RedisPostgres,
                Timing::default(),
                Arc::new(stockade_core::SystemClock),
                move |config| {
                    config.redis.redis_url = Some(url);
                    config.redis.redis_key_prefix = Some(prefix.into());
                },
            )
            .await,
        );
    }
    for server in &deployments {
        server.create_sale(json!({"id": "drop", "stock": 5})).await;
    }
    // Interleaved, so each deployment sells while the other does.
    for i in 0..5 {
        for (d, server) in deployments.iter().enumerate() {
            let (status, body) = server.buy("drop", &format!("d{d}-b{i}"), 1, None).await;
            assert_eq!(status, 201, "deployment {d}, buyer {i}: {body}");
        }
    }
    for (d, server) in deployments.iter().enumerate() {
        let (status, body) = server.buy("drop", &format!("d{d}-late"), 1, None).await;
        assert_eq!(status, 409, "deployment {d} sold out at exactly 5: {body}");
        let orders = server.all_orders("drop").await;
        assert_eq!(orders.len(), 5, "deployment {d}: {orders:?}");
        assert!(
            orders.iter().all(|o| o["user_id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("d{d}-"))),
            "deployment {d} committed another deployment's order: {orders:?}"
        );
    }
    for prefix in ["shop-a", "shop-b"] {
        let exists = redis
            .command(&["EXISTS", &format!("{prefix}:{{drop}}:sale")])
            .unwrap();
        assert!(
            exists.contains('1'),
            "{prefix}'s sale is in its own keys: {exists}"
        );
    }
    let unprefixed = redis.command(&["EXISTS", "stockade:{drop}:sale"]).unwrap();
    assert!(
        unprefixed.contains('0'),
        "nothing under the default prefix: {unprefixed}"
    );
}
