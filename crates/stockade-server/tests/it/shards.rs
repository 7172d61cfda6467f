//! Sharded sales over HTTP (issue 21, item 2): `"shards": N` on every
//! engine (only Redis splits the stock; the others keep one count and the
//! spec), a crowd that sells exactly the stock, cancels whose items any
//! buyer can take again, unpaid holds expiring back into their shards, a
//! Redis restart rebuilt into every shard, and every malformed `shards`
//! refused with nothing created.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use futures::future::join_all;
use serde_json::{Value, json};
use stockade_core::ManualClock;

const SETUPS: [Setup; 3] = [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres];

async fn sale(server: &TestServer, id: &str) -> Value {
    let (status, body) = server.get(&format!("/v1/sales/{id}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// `buyers` distinct buyers at once, one item each: the 201 bodies.
async fn crowd(server: &TestServer, id: &str, from: usize, buyers: usize) -> Vec<Value> {
    let answers = join_all(
        (from..from + buyers)
            .map(|n| async move { server.buy(id, &format!("buyer-{n}"), 1, None).await }),
    )
    .await;
    let mut orders = Vec::new();
    for (status, body) in answers {
        match status {
            201 => orders.push(body),
            409 => assert_eq!(body["error"]["code"], "sold_out", "{body}"),
            _ => panic!("{status} {body}"),
        }
    }
    orders
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_sale_sells_exactly_its_stock_and_cancels_come_back_to_any_buyer() {
    for setup in SETUPS {
        let server = TestServer::start(setup).await;
        let (status, body) = server
            .create_sale(json!({"id": "hot", "stock": 30, "shards": 3}))
            .await;
        assert_eq!(status, 201, "{setup:?}: {body}");
        assert_eq!(body["shards"], 3);
        let orders = crowd(&server, "hot", 0, 45).await;
        assert_eq!(orders.len(), 30, "{setup:?}");
        let body = sale(&server, "hot").await;
        assert_eq!(
            (body["remaining"].as_u64(), body["status"].as_str()),
            (Some(0), Some("sold_out"))
        );
        // Five cancels: their items go back to their buyers' shards, and
        // buyers of any shard take them.
        for order in &orders[..5] {
            let id = order["order_id"].as_str().unwrap();
            let (status, body) = server.post(&format!("/v1/orders/{id}/cancel")).await;
            assert_eq!(status, 200, "{setup:?}: {body}");
        }
        assert_eq!(sale(&server, "hot").await["remaining"], 5);
        // The sold-out answer is cached for half a second at most.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let again = crowd(&server, "hot", 100, 20).await;
        assert_eq!(again.len(), 5, "{setup:?}");
        let body = sale(&server, "hot").await;
        assert_eq!(
            (body["remaining"].as_u64(), body["sold"].as_u64()),
            (Some(0), Some(30))
        );
        let live = server
            .all_orders("hot")
            .await
            .iter()
            .filter(|o| o["status"] != "cancelled")
            .count();
        assert_eq!(live, 30, "{setup:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unpaid_holds_of_a_sharded_sale_expire_back_into_their_shards() {
    for setup in SETUPS {
        let clock = ManualClock::new(Utc::now());
        let server =
            TestServer::start_with_clock(setup, Timing::default(), Arc::new(clock.clone())).await;
        let (status, body) = server
            .create_sale(json!({"id": "held", "stock": 12, "shards": 3, "hold_seconds": 30}))
            .await;
        assert_eq!(status, 201, "{setup:?}: {body}");
        let held = crowd(&server, "held", 0, 12).await;
        assert_eq!(held.len(), 12, "{setup:?}");
        assert!(held.iter().all(|o| o["status"] == "held"), "{held:?}");
        // Three are paid; the other nine expire.
        for order in &held[..3] {
            let (status, body) = server.confirm(order["order_id"].as_str().unwrap()).await;
            assert_eq!(status, 200, "{setup:?}: {body}");
        }
        clock.advance(TimeDelta::seconds(31));
        stockade_server::holds::expire_due(server.state())
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while sale(&server, "held").await["remaining"] != 9 {
            assert!(
                Instant::now() < deadline,
                "{setup:?}: the expired items never came back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The sold-out answer is cached for half a second at most.
        tokio::time::sleep(Duration::from_millis(600)).await;
        // Buyers of any shard take the nine back, and no more.
        assert_eq!(crowd(&server, "held", 100, 20).await.len(), 9, "{setup:?}");
        assert_eq!(sale(&server, "held").await["remaining"], 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_restart_rebuilds_every_shard_from_the_store() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let mut redis = server.redis.take().unwrap();
    let (status, body) = server
        .create_sale(json!({"id": "rebuilt", "stock": 40, "shards": 4, "per_user_limit": 2}))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(crowd(&server, "rebuilt", 0, 10).await.len(), 10);
    redis.restart().unwrap();
    // The service notices, and rebuilds the sale from the store.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = server.buy("rebuilt", "buyer-0", 1, None).await;
        if status == 201 {
            break;
        }
        assert!(status == 503 || status == 409, "{status} {body}");
        assert!(Instant::now() < deadline, "never rebuilt: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // buyer-0's limit of 2 held across the rebuild (its first order came
    // back into its shard).
    let (status, body) = server.buy("rebuilt", "buyer-0", 1, None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("limit_exceeded")),
        "{body}"
    );
    assert_eq!(crowd(&server, "rebuilt", 10, 60).await.len(), 29);
    assert_eq!(sale(&server, "rebuilt").await["remaining"], 0);
    let orders = server.all_orders("rebuilt").await;
    assert_eq!(orders.len(), 40);
    server.redis = Some(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_shards_are_refused_and_nothing_is_created() {
    let server = TestServer::start(Setup::RedisPostgres).await;
    let cases = [
        (
            json!({"id": "bad", "stock": 10, "shards": 0}),
            "between 1 and 64",
        ),
        (
            json!({"id": "bad", "stock": 100, "shards": 65}),
            "between 1 and 64",
        ),
        (json!({"id": "bad", "stock": 2, "shards": 3}), "every shard"),
        (
            json!({"id": "bad", "skus": [{"id": "a", "stock": 5}, {"id": "b", "stock": 5}], "shards": 2}),
            "one SKU",
        ),
        (
            json!({"id": "bad", "stock": 10, "shards": 2,
                   "tiers": [{"name": "vip", "reserved": {"default": 2}}]}),
            "one SKU and no tiers",
        ),
    ];
    for (body, reason) in cases {
        let (status, answer) = server.create_sale(body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_request", "{answer}");
        let message = answer.to_string();
        assert!(message.contains(reason), "{body}: {message}");
    }
    for body in [
        json!({"id": "bad", "stock": 10, "shards": "3"}),
        json!({"id": "bad", "stock": 10, "shards": -1}),
    ] {
        let (status, answer) = server.create_sale(body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
    }
    let (status, _) = server.get("/v1/sales/bad").await;
    assert_eq!(status, 404);
}
