//! Reserves are judged at one instant (issue 35, item 9): Redis judges a
//! batch at its own reading of the clock, later than the instant the
//! purchase pipeline read; the order is made at the engine's instant, so
//! the store, which judges it again when it commits it, judges it at the
//! same one. Deterministic: Redis holds a first purchase script
//! (`CLIENT PAUSE WRITE`) while a second purchase reads the clock just
//! before `release_reserved_at`; the clock then moves just past it, and
//! the second purchase's batch runs after the first.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use serde_json::json;
use stockade_core::{Epoch, ManualClock, Purchase, PurchaseOutcome, SaleId, TierName};
use stockade_test_support::RedisServer;

/// Whether Redis holds a purchase script postponed by the pause.
fn script_held(redis: &RedisServer) -> bool {
    let clients = redis.command(&["CLIENT", "LIST"]).unwrap();
    clients.lines().any(|client| {
        let field = |name: &str| {
            client
                .split(' ')
                .find_map(|part| part.strip_prefix(name))
                .unwrap_or("")
        };
        field("flags=").contains('b') && field("cmd=") == "fcall"
    })
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_the_engine_judged_after_the_release_commits() {
    let release: DateTime<Utc> = "2030-01-01T12:00:00Z".parse().unwrap();
    let clock = ManualClock::new(release - TimeDelta::milliseconds(1));
    let server = Arc::new(
        TestServer::start_with_clock(
            Setup::RedisPostgres,
            Timing::default(),
            Arc::new(clock.clone()),
        )
        .await,
    );
    // All of `a` is kept for members until the release.
    let (status, body) = server
        .create_sale(json!({
            "id": "reserve",
            "skus": [{"id": "a", "stock": 10}],
            "per_user_limit": 5,
            "tiers": [{"name": "members", "reserved": {"a": 10}}],
            "release_reserved_at": release,
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server
        .buy_with(
            "reserve",
            json!({"user_id": "m1", "tier": "members", "sku": "a"}),
        )
        .await;
    assert_eq!(status, 201, "a member buys before the release: {body}");
    let (status, body) = server
        .buy_with("reserve", json!({"user_id": "early", "sku": "a"}))
        .await;
    assert_eq!(status, 409, "the others wait for the release: {body}");
    // The first order is committed and acknowledged: nothing of this
    // instance's writes is left for the pause to hold.
    let sale = SaleId::new("reserve").unwrap();
    let engine = Arc::clone(server.state().engine());
    wait_for("the outbox is empty", async || {
        engine.outbox(&sale).await.unwrap().is_empty()
    })
    .await;

    let redis = server.redis.as_ref().unwrap();
    redis
        .command(&["CLIENT", "PAUSE", "3000", "WRITE"])
        .unwrap();
    // A member's purchase reaches Redis and is held there.
    let first = {
        let engine = Arc::clone(&engine);
        let purchase = Purchase::new("reserve", "m2", 1)
            .unwrap()
            .with_tier(TierName::new("members").unwrap())
            .at_epoch(Epoch::new(1));
        tokio::spawn(async move { engine.purchase(&purchase).await })
    };
    wait_for("Redis holds the first purchase", async || {
        script_held(redis)
    })
    .await;
    // Another buyer's purchase reads the clock, just before the release,
    // and queues behind it.
    let second = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            server
                .buy_with("reserve", json!({"user_id": "late", "sku": "a"}))
                .await
        })
    };
    wait_for("the second purchase is in flight", async || {
        server.state().shedder().in_flight() == 1
    })
    .await;
    clock.set(release + TimeDelta::milliseconds(1));
    redis.command(&["CLIENT", "UNPAUSE"]).unwrap();

    let first = first.await.unwrap().unwrap();
    assert!(
        matches!(first, PurchaseOutcome::Purchased { .. }),
        "{first:?}"
    );
    let (status, order) = second.await.unwrap();
    assert_eq!(
        status, 201,
        "the engine judged it after the release; so must the store: {order}"
    );
    let (status, stored) = server
        .get(&format!(
            "/v1/orders/{}",
            order["order_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200, "{stored}");
    assert_ne!(stored["status"], "void", "{stored}");
    assert_eq!(
        stored["created_at"], order["created_at"],
        "one instant: {stored}"
    );
}
