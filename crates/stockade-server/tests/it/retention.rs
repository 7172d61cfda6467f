//! Nothing grows without bound: an ended sale's engine state and waiting
//! room are let go `--ended-sale-retention-s` after its end (its Redis keys
//! get that time to live), while the store keeps every order.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Setup, TestServer, Timing};
use futures::StreamExt;
use serde_json::json;
use stockade_core::{Clock, ManualClock, SaleId};

const RETENTION: Duration = Duration::from_secs(1);

/// How long each sale is open on the server's clock, which moves only
/// when [`end_sales`] moves it: the buyers finish however slow the machine
/// is (on the wall clock, a loaded machine once ended a sale before its
/// last buyer).
const OPEN: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

async fn server(setup: Setup) -> (TestServer, ManualClock) {
    let clock = ManualClock::new(chrono::Utc::now());
    let server = TestServer::start_adjusted(
        setup,
        Timing::default(),
        Arc::new(clock.clone()),
        |config| {
            config.operations.ended_sale_retention_s = Some(RETENTION.as_secs());
        },
    )
    .await;
    (server, clock)
}

/// Moves the server's clock past the end of the sales opened last and
/// their retention: the next retirement pass lets them go.
fn end_sales(clock: &ManualClock) {
    clock.advance(
        OPEN + chrono::TimeDelta::from_std(RETENTION).unwrap() + chrono::TimeDelta::seconds(1),
    );
}

/// Creates two sales open for [`OPEN`]: one sold (half its stock), one
/// with a waiting room that 200 buyers join.
async fn busy_sales(server: &TestServer, clock: &ManualClock) {
    let ends_at = clock.now() + OPEN;
    server
        .create_sale(json!({"id": "brief", "stock": 400, "ends_at": ends_at}))
        .await;
    server
        .create_sale(json!({"id": "queued", "stock": 50, "ends_at": ends_at,
            "waiting_room": {"admit_per_second": 1, "admission_ttl_seconds": 60}}))
        .await;
    for i in 0..200 {
        let (status, body) = server.buy("brief", &format!("b{i}"), 1, None).await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = split(
            server
                .client
                .post(server.at("/v1/sales/queued/queue"))
                .json(&json!({"user_id": format!("q{i}")}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(status == 201 || status == 200, "{status} {body}");
    }
}

async fn split(response: reqwest::Response) -> (u16, serde_json::Value) {
    common::split(response).await
}

fn info_used_memory(redis: &stockade_test_support::RedisServer) -> u64 {
    info_memory_field(redis, "used_memory")
}

/// A number of `INFO memory`.
fn info_memory_field(redis: &stockade_test_support::RedisServer, field: &str) -> u64 {
    let info = redis.command(&["INFO", "memory"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in INFO memory: {info}"))
}

fn dbsize(redis: &stockade_test_support::RedisServer) -> u64 {
    let reply = redis.command(&["DBSIZE"]).unwrap();
    reply
        .trim()
        .trim_start_matches(':')
        .parse()
        .unwrap_or_else(|_| panic!("DBSIZE answered {reply:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ended_sale_leaves_redis_as_it_found_it() {
    let (server, clock) = server(Setup::RedisPostgres).await;
    let redis = server.redis.as_ref().unwrap();
    // A first sale loads the scripts and sets up what every sale shares.
    busy_sales(&server, &clock).await;
    end_sales(&clock);
    wait_until_gone(redis, 0).await;
    let (keys_before, memory_before) = (dbsize(redis), info_used_memory(redis));

    // The same again, under other ids: Redis must come back to the baseline.
    let ends_at = clock.now() + OPEN;
    server
        .create_sale(json!({"id": "brief-2", "stock": 1500, "ends_at": ends_at}))
        .await;
    let buyers: Vec<_> = (0..1_500)
        .map(|i| {
            let (client, url) = (
                server.client.clone(),
                server.at("/v1/sales/brief-2/purchases"),
            );
            async move {
                let response = client
                    .post(url)
                    .header("Idempotency-Key", format!("k{i}"))
                    .json(&json!({"user_id": format!("b{i}")}))
                    .send()
                    .await
                    .unwrap();
                response.status().as_u16()
            }
        })
        .collect();
    // 64 at a time: one client may hold 256 connections.
    let statuses: Vec<u16> = futures::stream::iter(buyers)
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let grown = info_used_memory(redis);
    assert!(
        grown > memory_before + 100 * 1024,
        "1,500 orders take room in Redis: {memory_before} before, {grown} with them"
    );
    assert!(
        dbsize(redis) > keys_before,
        "the sale has keys while it runs"
    );
    let ttl = redis.command(&["PTTL", "stockade:{brief-2}:sale"]).unwrap();
    assert!(
        ttl.contains("-1"),
        "no time to live while the sale runs: {ttl}"
    );
    end_sales(&clock);
    wait_until_gone(redis, keys_before).await;
    let memory_after = info_used_memory(redis);
    eprintln!("used_memory: {memory_before} before, {grown} with the sale, {memory_after} after");
    assert!(
        memory_after <= memory_before + 64 * 1024,
        "Redis memory back to its baseline: {memory_before} before, {memory_after} after"
    );
    // The store keeps every order; the ended sale still reads.
    assert_eq!(server.all_orders("brief-2").await.len(), 1_500);
    let (status, sale) = server.get("/v1/sales/brief-2").await;
    assert_eq!(status, 200, "{sale}");
    assert_eq!(sale["status"], "ended", "{sale}");
    assert_eq!(sale["sold"], 1_500, "{sale}");
    // Reading it did not bring its keys back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        dbsize(redis),
        keys_before,
        "a read of an ended sale rebuilt it"
    );
}

/// Waits until Redis holds at most `keys` keys (the ended sales' keys have
/// gone) and has freed them, for at most the sales' end plus retention
/// plus two passes. A key deleted by UNLINK leaves DBSIZE at once but its
/// memory only when Redis's background thread frees it: on a loaded
/// machine `used_memory` read just after still held the whole sale
/// (2,060,592 with it, 2,085,792 "after", with the keys gone).
async fn wait_until_gone(redis: &stockade_test_support::RedisServer, keys: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = dbsize(redis);
        let pending = info_memory_field(redis, "lazyfree_pending_objects");
        if left <= keys && pending == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Redis still holds {left} keys (expected {keys}) and {pending} objects to free: {}",
            redis.command(&["KEYS", "*"]).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_embedded_default_forgets_an_ended_sale_but_keeps_its_orders() {
    let (server, clock) = server(Setup::Embedded).await;
    busy_sales(&server, &clock).await;
    let engine = server.state().engine().clone();
    let brief = SaleId::new("brief").unwrap();
    assert!(engine.snapshot(&brief).await.unwrap().is_some());
    end_sales(&clock);
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.snapshot(&brief).await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "the memory engine still holds the ended sale"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let rooms = server
        .state()
        .waiting_rooms()
        .backend()
        .rooms()
        .await
        .unwrap();
    assert!(rooms.is_empty(), "rooms left: {rooms:?}");
    assert_eq!(server.all_orders("brief").await.len(), 200);
    let (status, sale) = server.get("/v1/sales/brief").await;
    assert_eq!(status, 200, "{sale}");
    assert_eq!(sale["sold"], 200, "{sale}");
}
