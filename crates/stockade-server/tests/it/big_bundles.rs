//! 250 buyers of a 20-item bundle at once on one instance on Redis (issue
//! 35, item 7): every answer is a 201 or a 409, and per SKU `remaining +
//! sold = stock`. Redis is held still (SIGSTOP) while the crowd queues, so
//! most of it reaches purchase.lua as one batch, larger than Lua 5.1 could
//! unpack into one call before. The batch built by hand, deterministic, is
//! in the engine's `tests/big_batches.rs`.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Setup, TestServer};
use serde_json::{Value, json};

const SKUS: usize = 20;
const BUYERS: usize = 250;

fn bundle(user: &str) -> Value {
    let items: Vec<Value> = (0..SKUS)
        .map(|i| json!({"sku": format!("s{i:02}"), "quantity": 1}))
        .collect();
    json!({"user_id": user, "items": items})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crowd_of_big_bundles_gets_201_or_409_and_loses_no_stock() {
    let server = Arc::new(TestServer::start(Setup::RedisPostgres).await);
    let skus: Vec<Value> = (0..SKUS)
        .map(|i| json!({"id": format!("s{i:02}"), "stock": BUYERS}))
        .collect();
    let (status, body) = server
        .create_sale(json!({
            "id": "bundles",
            "skus": skus,
            "per_user_limit": SKUS,
            "per_sku_limit": 1,
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    // One purchase first: the instance knows the sale's route and layout,
    // so the crowd needs nothing from Redis before the purchase script.
    let (status, body) = server.buy_with("bundles", bundle("first")).await;
    assert_eq!(status, 201, "{body}");

    let redis = server.redis.as_ref().unwrap();
    redis.pause();
    let crowd: Vec<_> = (0..BUYERS)
        .map(|i| {
            let server = Arc::clone(&server);
            tokio::spawn(async move {
                server
                    .buy_with("bundles", bundle(&format!("buyer-{i}")))
                    .await
            })
        })
        .collect();
    // Resume once the crowd is in flight (well within the engine's 2 s
    // response timeout).
    let deadline = Instant::now() + Duration::from_millis(1_200);
    while server.state().shedder().in_flight() < BUYERS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    redis.resume();

    let mut created = 0;
    for answer in crowd {
        let (status, body) = answer.await.unwrap();
        assert!(status == 201 || status == 409, "{status}: {body}");
        if status == 201 {
            created += 1;
        }
    }
    // The first buyer took one of each: BUYERS - 1 bundles were left.
    assert_eq!(created, BUYERS - 1, "every bundle left was sold");
    let sold = created + 1;
    let (status, sale) = server.get("/v1/sales/bundles").await;
    assert_eq!(status, 200, "{sale}");
    for sku in sale["skus"].as_array().unwrap() {
        assert_eq!(
            sku["remaining"].as_u64().unwrap() as usize + sold,
            BUYERS,
            "remaining + sold = stock: {sku}"
        );
    }
    let orders = server.all_orders("bundles").await;
    assert_eq!(orders.len(), sold, "every 201 is an order in the store");
}
