//! `--fallback postgres`: selling on while Redis is unreachable, and moving
//! back.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Setup, TestServer};
use crate::faults::helpers::{acknowledged, buyers, metric, settled};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_unreachable_with_the_postgres_fallback_keeps_selling_and_moves_back() {
    let mut server = TestServer::start(Setup::RedisPostgresFallback).await;
    let redis = server.redis.take().unwrap();
    server
        .create_sale(json!({"id": "fallback", "stock": 200}))
        .await;
    let server = Arc::new(server);
    let before = buyers(&server, "fallback", 0, 50, 16).await;
    assert_eq!(acknowledged(&before).len(), 50);

    redis.pause();
    let paused = Instant::now();
    // While Redis is frozen the sale moves to PostgreSQL and keeps selling.
    let during = buyers(&server, "fallback", 50, 60, 16).await;
    let sold_during = acknowledged(&during).len();
    redis.resume();
    eprintln!(
        "Redis frozen {:?}: {sold_during} of 60 sold meanwhile",
        paused.elapsed()
    );
    let statuses: Vec<u16> = during.iter().map(|(status, _)| *status).collect();
    assert!(
        sold_during >= 50,
        "the fallback sells while Redis is frozen: {statuses:?}"
    );
    assert!(metric(&server, "stockade_fallbacks_total").await >= 1.0);

    // Once Redis is healthy the sale moves back (rebuilt from the store).
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&server, "stockade_rebuilds_total{reason=\"fallback_over\"").await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the sale never moved back to Redis"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = buyers(&server, "fallback", 110, 200, 16).await;
    let committed = settled(&server, "fallback", 200).await;
    let all: HashSet<String> = [before, during, after]
        .iter()
        .flat_map(|answers| acknowledged(answers))
        .collect();
    assert!(all.is_subset(&committed), "an acknowledged order is lost");
    assert_eq!(committed.len(), 200, "the sale ends exactly sold out");
    let orders = server.all_orders("fallback").await;
    let buyers: HashSet<&str> = orders
        .iter()
        .map(|o| o["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(buyers.len(), orders.len(), "one order per buyer");
}

/// A rebuild that cannot reach Redis (restarted empty, then frozen before
/// the rebuild could run) must not keep the sale at 503 `rebuilding`: with
/// `--fallback postgres` the fallback sells it meanwhile, and the sale moves
/// back once Redis answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_that_cannot_reach_redis_falls_back() {
    let mut server = TestServer::start(Setup::RedisPostgresFallback).await;
    let mut redis = server.redis.take().unwrap();
    server
        .create_sale(json!({"id": "stuck-rebuild", "stock": 40}))
        .await;
    let server = Arc::new(server);
    let before = buyers(&server, "stuck-rebuild", 0, 10, 4).await;
    assert_eq!(acknowledged(&before).len(), 10);

    // Redis loses the sale; the next purchase finds it gone and starts a
    // rebuild, which Redis, frozen at once, never lets finish.
    redis.restart().unwrap();
    let (status, body) = server
        .buy("stuck-rebuild", "trigger", 1, Some("k-trigger"))
        .await;
    assert_eq!(status, 503, "a lost sale is rebuilt first: {body}");
    eprintln!("the purchase that found the sale lost: {body}");
    redis.pause();
    let frozen = Instant::now();
    // A careful client retries with its key; the fallback must sell.
    let (status, body) = loop {
        let answer = server
            .buy("stuck-rebuild", "patient", 1, Some("k-patient"))
            .await;
        if answer.0 != 503 || frozen.elapsed() > Duration::from_secs(15) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let waited = frozen.elapsed();
    assert_eq!(
        status, 201,
        "while the rebuild cannot reach Redis the fallback sells (answered after {waited:?}): {body}"
    );
    let during = buyers(&server, "stuck-rebuild", 10, 10, 4).await;
    assert_eq!(acknowledged(&during).len(), 10, "{during:?}");
    eprintln!("the fallback sold {waited:?} after Redis froze");
    redis.resume();

    let after = buyers(&server, "stuck-rebuild", 20, 19, 4).await;
    let committed = settled(&server, "stuck-rebuild", 40).await;
    let all: HashSet<String> = [before, during, after]
        .iter()
        .flat_map(|answers| acknowledged(answers))
        .collect();
    assert!(all.is_subset(&committed), "an acknowledged order is lost");
    assert!(committed.len() <= 40, "oversold: {}", committed.len());
}
