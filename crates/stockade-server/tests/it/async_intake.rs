//! `Prefer: respond-async`: 202 `pending` as soon as the engine accepted
//! the order; `GET /v1/orders/{id}` shows `pending` until the commit, and
//! `?wait=N` long-polls for it. Rejections stay synchronous.

use crate::common;
use crate::instances;

use std::time::{Duration, Instant};

use common::{Setup, TestServer};
use instances::{Backends, Instance};
use serde_json::{Value, json};
use sqlx::Connection;

async fn buy_async(
    client: &reqwest::Client,
    url: &str,
    sale: &str,
    user: &str,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = client
        .post(format!("{url}/v1/sales/{sale}/purchases"))
        .header("Prefer", "respond-async")
        .json(&json!({"user_id": user}))
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    let (status, body) = common::split(response).await;
    (status, body, headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_async_purchase_is_answered_pending_then_committed() {
    for setup in [Setup::Embedded, Setup::RedisPostgres] {
        let server = TestServer::start(setup).await;
        server
            .create_sale(json!({"id": "fast", "stock": 2, "hold_seconds": 600}))
            .await;
        let (status, body, headers) = buy_async(&server.client, &server.url, "fast", "ann").await;
        assert_eq!(status, 202, "{setup:?}: {body}");
        assert_eq!(body["status"], "pending");
        let id = body["order_id"].as_str().unwrap().to_owned();
        assert_eq!(headers["preference-applied"], "respond-async");
        assert_eq!(headers["location"], format!("/v1/orders/{id}").as_str());
        // Long poll: answered once committed, as held (the sale holds).
        let (status, order) = server.get(&format!("/v1/orders/{id}?wait=10")).await;
        assert_eq!(
            (status, &order["status"]),
            (200, &json!("held")),
            "{setup:?}"
        );
        assert!(order["expires_at"].is_string());
        // Plain polling sees the same.
        let (_, again) = server.get(&format!("/v1/orders/{id}")).await;
        assert_eq!(again["status"], "held");

        // Rejections are answered at once, synchronously.
        buy_async(&server.client, &server.url, "fast", "bob").await;
        let (status, body, _) = buy_async(&server.client, &server.url, "fast", "cat").await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("sold_out")),
            "{setup:?}"
        );
        let (status, body, _) = buy_async(&server.client, &server.url, "nope", "cat").await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!("unknown_sale"))
        );
        // Bad waits are refused.
        for bad in ["31", "-1", "soon"] {
            let (status, body) = server.get(&format!("/v1/orders/{id}?wait={bad}")).await;
            assert_eq!(status, 422, "wait={bad}: {body}");
        }
    }
}

/// With the commit held up (another transaction holds the sale's row), the
/// order is `pending` on the instance that took it (its commit queue), and
/// another instance, which cannot see it before the commit, answers 404
/// `unknown_order` with a hint to retry (the id is recent) rather than
/// scanning outboxes. A long poll on the taking instance reads the store
/// not once while it waits: the commit wakes it (issue 18, item 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_poll_is_woken_by_the_commit_and_reads_nothing_meanwhile() {
    const ORDER_BY_ID: &str = "%FROM orders WHERE id = $1%";
    let backends = Backends::start(true).await;
    let a = Instance::start(&backends, |_| {}).await;
    let b = Instance::start(&backends, |_| {}).await;
    a.create_sale(json!({"id": "slow", "stock": 5})).await;
    // Learn the route, so the held-up commit is the only store wait.
    let (status, _) = a.buy("slow", "warm-up", None).await;
    assert_eq!(status, 201);

    let mut blocker = sqlx::PgConnection::connect(&backends.database_url)
        .await
        .unwrap();
    let mut tx = blocker.begin().await.unwrap();
    sqlx::query("SELECT id FROM sales WHERE id = 'slow' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .unwrap();

    let (status, body, _) = buy_async(&a.client, &a.url, "slow", "ann").await;
    assert_eq!(status, 202, "{body}");
    let id = body["order_id"].as_str().unwrap().to_owned();
    let (status, order) = a.get(&format!("/v1/orders/{id}")).await;
    assert_eq!(
        (status, &order["status"]),
        (200, &json!("pending")),
        "{order}"
    );
    let response = b
        .client
        .get(b.at(&format!("/v1/orders/{id}")))
        .send()
        .await
        .unwrap();
    let retry_after = response.headers().get("retry-after").cloned();
    let (status, order) = common::split(response).await;
    assert_eq!(
        (status, &order["error"]["code"]),
        (404, &json!("unknown_order")),
        "{order}"
    );
    assert!(
        order["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry"),
        "{order}"
    );
    assert_eq!(retry_after.as_ref().map(|v| v.to_str().unwrap()), Some("1"));

    let poll = {
        let client = a.client.clone();
        let url = a.at(&format!("/v1/orders/{id}?wait=20"));
        tokio::spawn(async move {
            let response = client.get(url).send().await.unwrap();
            let answer = common::split(response).await;
            (answer, Instant::now())
        })
    };
    // Let the poll start waiting, then count its store reads for a while.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reads_before = backends.statements_like(ORDER_BY_ID).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let reads = backends.statements_like(ORDER_BY_ID).await - reads_before;
    assert!(
        !poll.is_finished(),
        "the long poll answered while the order was pending"
    );
    assert_eq!(reads, 0, "the long poll read the store while it waited");
    let committed_at = Instant::now();
    tx.commit().await.unwrap();
    let ((status, order), answered_at) = poll.await.unwrap();
    assert_eq!(
        (status, &order["status"]),
        (200, &json!("confirmed")),
        "{order}"
    );
    let gap = answered_at.saturating_duration_since(committed_at);
    eprintln!("the long poll answered {gap:?} after the blocking transaction ended");
    assert!(
        gap < Duration::from_secs(5),
        "the long poll took {gap:?} to see the commit"
    );
}
