//! The service under the faults of DESIGN.md: Redis restarted with its data
//! lost mid-sale, PostgreSQL (the store) stopped mid-sale.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Setup, TestServer, Timing};
use serde_json::{Value, json};

/// Buyers `first..first+count` each try once (retrying 503s for a while),
/// `concurrency` at a time. Returns every answer.
async fn buyers(
    server: &Arc<TestServer>,
    sale: &str,
    first: usize,
    count: usize,
    concurrency: usize,
) -> Vec<(u16, Value)> {
    let next = Arc::new(AtomicUsize::new(first));
    let end = first + count;
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let server = Arc::clone(server);
            let next = Arc::clone(&next);
            let sale = sale.to_owned();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return answers;
                    }
                    let user = format!("buyer-{i}");
                    let key = format!("key-{i}");
                    let deadline = Instant::now() + Duration::from_secs(20);
                    // A careful client: retry 503s with the same key.
                    let answer = loop {
                        let answer = server.buy(&sale, &user, 1, Some(&key)).await;
                        if answer.0 != 503 || Instant::now() > deadline {
                            break answer;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    };
                    answers.push(answer);
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for worker in workers {
        answers.extend(worker.await.unwrap());
    }
    answers
}

fn acknowledged(answers: &[(u16, Value)]) -> HashSet<String> {
    answers
        .iter()
        .filter(|(status, _)| *status == 201 || *status == 200)
        .map(|(_, body)| body["order_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until the sale's remaining stock equals stock − committed, and
/// returns the committed order ids.
async fn settled(server: &TestServer, sale: &str, stock: u64) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let orders = server.all_orders(sale).await;
        let live: u64 = orders
            .iter()
            .filter(|o| o["status"] == "confirmed")
            .map(|o| o["quantity"].as_u64().unwrap())
            .sum();
        let (status, snapshot) = server.get(&format!("/v1/sales/{sale}")).await;
        assert!(live <= stock, "oversold: {live} of {stock}");
        if status == 200 && snapshot["remaining"].as_u64() == Some(stock - live) {
            return orders
                .iter()
                .map(|o| o["order_id"].as_str().unwrap().to_owned())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "never settled: remaining {snapshot} vs stock {stock} - committed {live}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_mid_sale_is_rebuilt_from_the_store() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let mut redis = server.redis.take().unwrap();
    let (status, _) = server
        .create_sale(json!({"id": "restart", "stock": 500}))
        .await;
    assert_eq!(status, 201);
    let server = Arc::new(server);
    let before = buyers(&server, "restart", 0, 300, 32).await;
    assert_eq!(acknowledged(&before).len(), 300);

    let recoveries_before = metric(&server, "stockade_rebuilds_total").await;
    // Redis dies and comes back empty on the same port.
    redis.restart().unwrap();
    // Everyone after the restart: only 200 items are left, whatever Redis
    // forgot.
    let after = buyers(&server, "restart", 300, 400, 32).await;
    let sold_after = acknowledged(&after).len();
    assert_eq!(
        sold_after, 200,
        "exactly the rest is sold after the rebuild"
    );
    let sold_out = after
        .iter()
        .filter(|(s, b)| *s == 409 && b["error"]["code"] == "sold_out")
        .count();
    assert_eq!(sold_out, 200);

    let committed = settled(&server, "restart", 500).await;
    let all_acknowledged: HashSet<String> = acknowledged(&before)
        .union(&acknowledged(&after))
        .cloned()
        .collect();
    assert_eq!(
        committed, all_acknowledged,
        "no lost acknowledgement, no extra order"
    );
    assert!(metric(&server, "stockade_rebuilds_total").await > recoveries_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn store_down_mid_sale_acknowledges_nothing_uncommitted() {
    let timing = Timing {
        commit_deadline_ms: 1_000,
        outbox_grace_ms: 2_000,
    };
    let mut server = TestServer::start_with(Setup::RedisPostgres, timing).await;
    let mut postgres = server.postgres.take().unwrap();
    let server = Arc::new(server);
    server
        .create_sale(json!({"id": "store-down", "stock": 300}))
        .await;
    let first = buyers(&server, "store-down", 0, 100, 16).await;
    assert_eq!(acknowledged(&first).len(), 100);

    // Stop PostgreSQL while a crowd is buying; bring it back 3 s later.
    let crowd = {
        let server = Arc::clone(&server);
        tokio::spawn(async move { buyers(&server, "store-down", 100, 400, 16).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    postgres.stop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    postgres.start_again().unwrap();
    let during = crowd.await.unwrap();

    for (status, body) in &during {
        assert!(
            [201, 200, 202, 409, 503].contains(status),
            "unexpected {status}: {body}"
        );
    }
    let mut by_status = std::collections::BTreeMap::new();
    for (status, _) in &during {
        *by_status.entry(*status).or_insert(0) += 1;
    }
    eprintln!("answers while the store was down and after: {by_status:?}");
    // Every buyer has a key of their own, so a 200 is a replay after a 503:
    // like 202 and 503, a sign the outage was felt.
    let delayed = during
        .iter()
        .filter(|(s, _)| [200, 202, 503].contains(s))
        .count();
    assert!(delayed > 0, "the outage was never felt: {by_status:?}");
    let committed = settled(&server, "store-down", 300).await;
    // Every success the clients heard of is committed.
    let heard: HashSet<String> = acknowledged(&first)
        .union(&acknowledged(&during))
        .cloned()
        .collect();
    assert!(
        heard.is_subset(&committed),
        "lost: {:?}",
        heard.difference(&committed).collect::<Vec<_>>()
    );
    assert!(committed.len() <= 300);
}

async fn metric(server: &TestServer, name: &str) -> f64 {
    let text = server.metrics_text().await;
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unresponsive_redis_gives_503_and_nothing_is_sold_twice() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let redis = server.redis.take().unwrap();
    server
        .create_sale(json!({"id": "frozen", "stock": 50}))
        .await;
    assert_eq!(
        server.buy("frozen", "before", 1, Some("k-before")).await.0,
        201
    );

    redis.pause();
    let started = Instant::now();
    let (status, body) = server.buy("frozen", "during", 1, Some("k-during")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "engine_unavailable");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Two more timeouts open the circuit: then buyers hear 503 at once
    // instead of waiting for Redis's timeout each.
    for i in 0..2 {
        let (status, _) = server.buy("frozen", &format!("waiting-{i}"), 1, None).await;
        assert_eq!(status, 503);
    }
    let started = Instant::now();
    let (status, body) = server.buy("frozen", "fast", 1, None).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "an open circuit answers without waiting for Redis ({:?})",
        started.elapsed()
    );
    let metrics = metric(&server, "stockade_circuit_opened_total").await;
    assert!(metrics >= 1.0, "the opening is counted");
    redis.resume();

    // The same request again, once Redis answers: at most one order.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (status, body) = loop {
        let answer = server.buy("frozen", "during", 1, Some("k-during")).await;
        if answer.0 != 503 || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!([200, 201, 202].contains(&status), "{status} {body}");
    let server = Arc::new(server);
    settled(&server, "frozen", 50).await;
    // A request that timed out may still have run once Redis woke up (its
    // 503 says so): each buyer has at most one order, and the buyer the
    // open circuit turned away has none.
    let orders = server.all_orders("frozen").await;
    let buyers: HashSet<&str> = orders
        .iter()
        .map(|o| o["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        buyers.len(),
        orders.len(),
        "one order per buyer, however often they asked"
    );
    assert!(buyers.contains("before") && buyers.contains("during"));
    assert!(
        !buyers.contains("fast"),
        "refused by the open circuit, never sent to Redis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_answers_and_commits_every_purchase_in_flight() {
    let mut server = TestServer::start(Setup::Embedded).await;
    server
        .create_sale(json!({"id": "closing", "stock": 1000}))
        .await;
    let client = server.client.clone();
    let url = server.at("/v1/sales/closing/purchases");
    let crowd: Vec<_> = (0..300)
        .map(|i| {
            let client = client.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let response = client
                    .post(url)
                    .json(&json!({"user_id": format!("buyer-{i}")}))
                    .send()
                    .await;
                match response {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        Some((status, body))
                    }
                    // Refused after the listener closed: never accepted.
                    Err(_) => None,
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    server.stop().await;
    let mut answers = Vec::new();
    for task in crowd {
        if let Some(answer) = task.await.unwrap() {
            answers.push(answer);
        }
    }
    server.restart().await;
    let committed = settled(&server, "closing", 1000).await;
    assert!(
        acknowledged(&answers).is_subset(&committed),
        "an answered purchase was lost"
    );
    eprintln!(
        "{} of 300 answered before shutdown, {} committed",
        answers.len(),
        committed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_while_redis_is_frozen_returns_the_stock_once_it_is_back() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let redis = server.redis.take().unwrap();
    server
        .create_sale(json!({"id": "cancel-frozen", "stock": 5}))
        .await;
    let (status, order) = server.buy("cancel-frozen", "alice", 1, None).await;
    assert_eq!(status, 201, "{order}");
    let id = order["order_id"].as_str().unwrap().to_owned();

    // The store (the truth) cancels at once; the engine cannot hear of it.
    redis.pause();
    let (status, cancelled) = server.post(&format!("/v1/orders/{id}/cancel")).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    redis.resume();

    // The reconciler retries the release: the item comes back, once.
    let server = Arc::new(server);
    let committed = settled(&server, "cancel-frozen", 5).await;
    assert_eq!(committed.len(), 1);
    let (_, sale) = server.get("/v1/sales/cancel-frozen").await;
    assert_eq!(sale["remaining"], 5, "{sale}");
    let (status, _) = server.buy("cancel-frozen", "alice", 1, None).await;
    assert_eq!(status, 201, "alice's allowance came back too");
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_holding_an_old_copy_of_the_stock_sells_nothing_twice_and_is_rebuilt() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let redis = server.redis.take().unwrap();
    server
        .create_sale(json!({"id": "stale", "stock": 10}))
        .await;
    let server = Arc::new(server);
    assert_eq!(
        acknowledged(&buyers(&server, "stale", 0, 10, 4).await).len(),
        10
    );
    // Redis now holds an old copy of the sale, from before anything sold,
    // under the same epoch and run id (as a restored snapshot would, had
    // the restart gone unnoticed).
    let reply = redis
        .command(&["HSET", "stockade:{stale}:sale", "remaining", "10"])
        .unwrap();
    assert!(reply.starts_with(':'), "{reply}");
    let late = buyers(&server, "stale", 10, 30, 8).await;
    let sold_again = acknowledged(&late);
    assert!(
        sold_again.is_empty(),
        "the store had nothing left to sell, yet {} more were acknowledged",
        sold_again.len()
    );
    // The reconciler sees the engine offer more than the store has left
    // and rebuilds it: the sale reads sold out again.
    let committed = settled(&server, "stale", 10).await;
    assert_eq!(committed.len(), 10);
    let (_, sale) = server.get("/v1/sales/stale").await;
    assert_eq!(sale["remaining"], 0, "{sale}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancels_racing_a_rebuild_are_never_undone() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let mut redis = server.redis.take().unwrap();
    let server = Arc::new(server);
    for round in 0..3 {
        let sale = format!("race-{round}");
        server.create_sale(json!({"id": sale, "stock": 60})).await;
        let sold = acknowledged(&buyers(&server, &sale, 0, 60, 16).await);
        assert_eq!(sold.len(), 60);
        // Redis loses everything; the next touch rebuilds the sale from
        // the store while half of the orders are being cancelled.
        redis.restart().unwrap();
        let cancels: Vec<_> = sold
            .iter()
            .take(30)
            .map(|id| {
                let server = Arc::clone(&server);
                let id = id.clone();
                tokio::spawn(async move {
                    let deadline = Instant::now() + Duration::from_secs(20);
                    loop {
                        let (status, body) = server.post(&format!("/v1/orders/{id}/cancel")).await;
                        if status == 200 || Instant::now() > deadline {
                            return (status, body);
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
            })
            .collect();
        let (status, _) = server.buy(&sale, "trigger", 1, None).await;
        assert!([503, 201, 409].contains(&status));
        for cancel in cancels {
            let (status, body) = cancel.await.unwrap();
            assert_eq!(status, 200, "{body}");
        }
        // Every cancelled item is back: the rest sells exactly.
        let committed = settled(&server, &sale, 60).await;
        let live = server
            .all_orders(&sale)
            .await
            .iter()
            .filter(|o| o["status"] == "confirmed")
            .count();
        assert_eq!(
            live + 30,
            60 + usize::from(status == 201),
            "round {round}: {committed:?}"
        );
        let rest = acknowledged(&buyers(&server, &sale, 100, 60, 16).await);
        assert_eq!(
            live + rest.len(),
            60,
            "round {round}: the sale ends exactly sold out"
        );
    }
}

/// Orders named to buyers while the store was down (503 `store_unavailable`
/// with the order id, or 202 `pending`) are committed by the instance that
/// took them as soon as the store answers again, not only by a reconciler
/// after the outbox grace period: a Redis that then loses its data does not
/// take them with it, and each buyer's keyed retry gets the same order.
/// Two rounds, so a lucky ordering cannot pass it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orders_named_during_a_store_outage_survive_a_redis_that_then_loses_its_data() {
    let timing = Timing {
        commit_deadline_ms: 500,
        // Far longer than the test: no reconciler rescues the orders.
        outbox_grace_ms: 120_000,
    };
    let mut server = TestServer::start_with(Setup::RedisPostgres, timing).await;
    let mut redis = server.redis.take().unwrap();
    let mut postgres = server.postgres.take().unwrap();
    for round in 1..=2 {
        let sale = format!("outage-then-loss-{round}");
        let (status, _) = server.create_sale(json!({"id": sale, "stock": 50})).await;
        assert_eq!(status, 201);
        let (status, body) = server.buy(&sale, "warm", 1, Some("warm")).await;
        assert_eq!(status, 201, "{body}");

        postgres.stop();
        let mut named = Vec::new();
        for i in 0..10 {
            let (user, key) = (format!("b{i}"), format!("k{i}"));
            let (status, body) = server.buy(&sale, &user, 1, Some(&key)).await;
            let id = body["order_id"]
                .as_str()
                .or(body["error"]["order_id"].as_str())
                .unwrap_or_else(|| panic!("round {round}: {status} names no order: {body}"))
                .to_owned();
            assert!(
                status == 202 || (status == 503 && body["error"]["code"] == "store_unavailable"),
                "round {round}: {status} {body}"
            );
            named.push((user, key, id));
        }
        postgres.start_again().unwrap();

        // The instance commits them itself, well before the grace period.
        let deadline = Instant::now() + Duration::from_secs(20);
        for (_, _, id) in &named {
            loop {
                let (status, body) = server.get(&format!("/v1/orders/{id}")).await;
                if status == 200 && body["status"] == "confirmed" {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: order {id} is still not committed: {status} {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }

        // Redis loses everything; retries after the rebuild name the same
        // orders, and nothing else was sold.
        redis.restart().unwrap();
        for (user, key, id) in &named {
            let deadline = Instant::now() + Duration::from_secs(20);
            let (status, body) = loop {
                let answer = server.buy(&sale, user, 1, Some(key)).await;
                if answer.0 != 503 || Instant::now() > deadline {
                    break answer;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert_eq!(
                (status, body["order_id"].as_str()),
                (200, Some(id.as_str())),
                "round {round}: the retry of {key} named another order: {body}"
            );
        }
        let committed = settled(&server, &sale, 50).await;
        assert_eq!(committed.len(), 11, "round {round}: {committed:?}");
    }
}

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
