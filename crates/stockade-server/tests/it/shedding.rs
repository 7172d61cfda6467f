//! Load shedding (issue 9, item 4): beyond `--max-purchases-in-flight` a
//! purchase is answered at once with 503 `overloaded` and `Retry-After: 1`,
//! and nothing is sold for it; rejections the instance answers itself do
//! not count against the bound. The commit path is held up by holding the
//! sale's row lock in the real PostgreSQL store.

use crate::instances;

use std::sync::Arc;
use std::time::{Duration, Instant};

use instances::{Backends, Instance};
use serde_json::json;
use sqlx::Connection;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_purchase_over_the_bound_is_shed_at_once_and_buys_nothing() {
    let backends = Backends::start(false).await;
    let instance = Arc::new(
        Instance::start(&backends, |c| {
            c.purchases.max_purchases_in_flight = Some(1);
            c.purchases.commit_deadline_ms = Some(3_000);
        })
        .await,
    );
    for (sale, stock) in [("busy", 10), ("gone", 1)] {
        let (status, _) = instance
            .create_sale(json!({"id": sale, "stock": stock}))
            .await;
        assert_eq!(status, 201);
    }
    // Both sales are known to this instance, and "gone" is sold out.
    let (status, _) = instance.buy("busy", "warm-up", None).await;
    assert_eq!(status, 201);
    let (status, _) = instance.buy("gone", "warm-up", None).await;
    assert_eq!(status, 201);
    let (status, _) = instance.buy("gone", "learner", None).await;
    assert_eq!(status, 409);

    // The test holds the sale's row lock in the store: the next purchase is
    // decided by Redis and then waits for its commit (which must take that
    // lock), holding the one place in flight.
    let mut blocker = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut blocker).await.unwrap();
    sqlx::query("SELECT id FROM sales WHERE id = 'busy' FOR UPDATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    let held = {
        let instance = Arc::clone(&instance);
        tokio::spawn(async move { instance.buy("busy", "patient", None).await })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while instance.state.shedder().in_flight() < 1 {
        assert!(
            Instant::now() < deadline,
            "the first purchase never got in flight"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let asked = Instant::now();
    let (status, body, retry_after) = instance.buy_with_headers("busy", "impatient", None).await;
    let answered_in = asked.elapsed();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "overloaded");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(
        answered_in < Duration::from_millis(500),
        "the shed purchase waited {answered_in:?}"
    );
    // A rejection this instance answers itself is free: not shed.
    let (status, body) = instance.buy("gone", "still-trying", None).await;
    assert_eq!((status, &body["error"]["code"]), (409, &json!("sold_out")));
    assert!(!held.is_finished(), "the first purchase was not held up");

    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    let (status, body) = held.await.unwrap();
    assert!(status == 201 || status == 202, "{status}: {body}");
    assert_eq!(instance.metric("stockade_purchases_shed_total").await, 1.0);

    // Once committed: the patient buyer's order, none for the shed one.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let orders = instance.orders("busy").await;
        let buyers: Vec<&str> = orders
            .iter()
            .map(|o| o["user_id"].as_str().unwrap())
            .collect();
        assert!(
            !buyers.contains(&"impatient"),
            "the shed purchase sold: {buyers:?}"
        );
        if buyers.contains(&"patient") {
            assert_eq!(buyers.len(), 2, "{buyers:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the held purchase never committed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, sale) = instance.get("/v1/sales/busy").await;
    assert_eq!(sale["remaining"], 8, "{sale}");
    // And with the place free again, purchases go through.
    let (status, body) = instance.buy("busy", "impatient", None).await;
    assert_eq!(status, 201, "{body}");
}
