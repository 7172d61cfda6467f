//! Issue 18, item 4: releases off the request path. Cancels, confirms and
//! the hold sweeper record what the engine owes and return; a background
//! applier gives the items back sale by sale, in batches, behind the
//! breaker. Real Redis (frozen with SIGSTOP) and PostgreSQL.

use crate::instances;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use futures::StreamExt;
use instances::{Backends, Instance};
use serde_json::json;
use sqlx::Connection;
use stockade_core::{ManualClock, OrderId, SaleId};
use stockade_server::holds::EXPIRY_BOUND;

async fn count(backends: &Backends, sql: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    let (n,): (i64,) = sqlx::query_as(sql).fetch_one(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    n
}

async fn engine_remaining(instance: &Instance, sale: &str) -> u32 {
    let engine = instance.state.engine();
    let snapshot = engine.snapshot(&SaleId::new(sale).unwrap()).await.unwrap();
    snapshot.unwrap().remaining
}

/// Waits until the engine offers `want` of `sale`; the time it took.
async fn until_engine_offers(
    instance: &Instance,
    sale: &str,
    want: u32,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let remaining = engine_remaining(instance, sale).await;
        if remaining == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "the engine offers {remaining} of {sale}, not {want}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// 2,000 holds fall due while Redis is frozen: the store expires every one
/// within the documented bound (the sweeper never waits on the engine),
/// and the engine has the stock back soon after Redis is resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_expire_within_the_bound_while_redis_is_frozen() {
    const HOLDS: usize = 2_000;
    let backends = Backends::start(false).await;
    let clock = ManualClock::new(Utc::now());
    let server = Instance::start_with_clock(&backends, Arc::new(clock.clone()), |_| {}).await;
    let (status, body) = server
        .create_sale(json!({"id": "held", "stock": HOLDS, "per_user_limit": 1, "hold_seconds": 60}))
        .await;
    assert_eq!(status, 201, "{body}");
    let answers: Vec<(u16, serde_json::Value)> = futures::stream::iter(0..HOLDS)
        .map(|i| {
            let server = &server;
            async move { server.buy("held", &format!("buyer-{i}"), None).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for (status, body) in &answers {
        assert_eq!((*status, &body["status"]), (201, &json!("held")), "{body}");
    }
    assert_eq!(engine_remaining(&server, "held").await, 0);

    let mut watcher = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    backends.redis.pause();
    clock.advance(TimeDelta::seconds(61));
    let due = Instant::now();
    let expired_sql = "SELECT count(*) FROM orders WHERE status = 'expired'";
    let late = loop {
        let (expired,): (i64,) = sqlx::query_as(expired_sql)
            .fetch_one(&mut watcher)
            .await
            .unwrap();
        if expired == HOLDS as i64 {
            break due.elapsed();
        }
        if due.elapsed() > Duration::from_secs(20) {
            backends.redis.resume();
            panic!("{expired} of {HOLDS} holds expired 20 s after they fell due, Redis frozen");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("{HOLDS} holds expired {late:?} after they fell due, Redis frozen");
    // The releases are owed, none applied yet.
    let owed = count(&backends, "SELECT count(*) FROM pending_releases").await;
    backends.redis.resume();
    assert!(
        late <= EXPIRY_BOUND,
        "the last of {HOLDS} holds expired {late:?} after its deadline (bound {EXPIRY_BOUND:?})"
    );
    assert_eq!(owed, HOLDS as i64);

    // Redis answers again: the stock is back in the engine promptly.
    let took = until_engine_offers(&server, "held", HOLDS as u32, Duration::from_secs(15)).await;
    eprintln!("the engine had the {HOLDS} items back {took:?} after Redis was resumed");
    // ...and the releases are settled (just after the engine call).
    let deadline = Instant::now() + Duration::from_secs(5);
    while count(&backends, "SELECT count(*) FROM pending_releases").await > 0 {
        assert!(
            Instant::now() < deadline,
            "releases applied but never settled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sale "stuck" owes 2,000 releases the engine keeps refusing (recorded
/// under an epoch it does not hold), older than anything else; sale
/// "flowing"'s cancels are given back to its engine within the bound all
/// the same: one stuck sale never delays another.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stuck_sale_never_delays_another_sales_releases() {
    let backends = Backends::start(false).await;
    let server = Instance::start(&backends, |_| {}).await;
    for sale in ["stuck", "flowing"] {
        let (status, body) = server.create_sale(json!({"id": sale, "stock": 10})).await;
        assert_eq!(status, 201, "{body}");
    }
    let mut conn = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    let long_ago = Utc::now().timestamp_millis() - 60_000;
    for _ in 0..2_000 {
        sqlx::query(
            "INSERT INTO pending_releases (order_id, sale_id, epoch, created_at_ms)
             VALUES ($1, 'stuck', 99, $2)",
        )
        .bind(OrderId::generate().to_string())
        .bind(long_ago)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    conn.close().await.unwrap();

    let mut orders = Vec::new();
    for i in 0..5 {
        let (status, body) = server.buy("flowing", &format!("b{i}"), None).await;
        assert_eq!(status, 201, "{body}");
        orders.push(body["order_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(engine_remaining(&server, "flowing").await, 5);
    for order in &orders {
        let (status, body) = server.cancel(order).await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("cancelled")),
            "{body}"
        );
    }
    let took = until_engine_offers(&server, "flowing", 10, EXPIRY_BOUND * 3).await;
    eprintln!("the flowing sale's releases were applied {took:?} after the cancels");
    let stuck = "SELECT count(*) FROM pending_releases WHERE sale_id = 'stuck'";
    assert_eq!(count(&backends, stuck).await, 2_000, "still owed");
    let flowing = "SELECT count(*) FROM pending_releases WHERE sale_id = 'flowing'";
    let deadline = Instant::now() + Duration::from_secs(5);
    while count(&backends, flowing).await > 0 {
        assert!(
            Instant::now() < deadline,
            "releases applied but never settled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
