//! Redis failing under a sale: restarted with its data lost, frozen,
//! holding an old copy of the stock, and cancels racing its rebuild.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Setup, TestServer};
use crate::faults::helpers::{acknowledged, buyers, metric, settled, until_not_503};

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

/// A Redis restart the reconciler sees while the store is down is still
/// acted on once the store answers again: every open sale is rebuilt, not
/// only those a purchase happens to find lost. No request touches the sale
/// here, so only the reconciler can bring it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_restart_seen_while_the_store_is_down_is_rebuilt_once_it_is_back() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let mut redis = server.redis.take().unwrap();
    let mut postgres = server.postgres.take().unwrap();
    let sale = "restart-in-outage";
    let (status, _) = server.create_sale(json!({"id": sale, "stock": 10})).await;
    assert_eq!(status, 201);
    let (status, body) = server.buy(sale, "first", 1, None).await;
    assert_eq!(status, 201, "{body}");
    let redis_url = redis.url();
    let in_redis = || async {
        let client = redis::Client::open(redis_url.as_str()).unwrap();
        let Ok(mut connection) = client.get_multiplexed_async_connection().await else {
            return false;
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{{{sale}}}:sale"))
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        !keys.is_empty()
    };
    assert!(in_redis().await, "the sale is in Redis before the restart");

    postgres.stop();
    redis.restart().unwrap();
    // Several passes see the restart and fail on the store.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!in_redis().await, "Redis came back empty");
    postgres.start_again().unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    while !in_redis().await {
        assert!(
            Instant::now() < deadline,
            "20 s after the store came back, the sale Redis lost is still not rebuilt"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And it sells what the store has left. The sale's hash is back from
    // the rebuild's first step, before its last: until then a purchase is
    // 503 `rebuilding` (nothing sold, retry), as a client retries (the
    // suite once bought in between).
    let (status, body) = until_not_503(
        deadline.saturating_duration_since(Instant::now()),
        async || server.buy(sale, "second", 1, None).await,
    )
    .await;
    assert!(status == 201 || status == 202, "{status} {body}");
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
