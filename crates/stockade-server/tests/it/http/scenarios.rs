//! The scenarios, each given a fresh running server.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::common::{TOKEN, TestServer};

async fn crowd(server: &Arc<TestServer>, sale: &str, buyers: usize) -> Vec<(u16, Value)> {
    let tasks: Vec<_> = (0..buyers)
        .map(|i| {
            let server = Arc::clone(server);
            let sale = sale.to_owned();
            tokio::spawn(async move { server.buy(&sale, &format!("buyer-{i}"), 1, None).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

fn count(answers: &[(u16, Value)], status: u16) -> usize {
    answers.iter().filter(|(s, _)| *s == status).count()
}

async fn seed(server: TestServer, buyers: usize, stock: u32) {
    let server = Arc::new(server);
    let (status, sale) = server
        .create_sale(json!({"id": "seed", "stock": stock}))
        .await;
    assert_eq!(status, 201, "{sale}");
    assert_eq!(sale["remaining"], stock);
    let answers = crowd(&server, "seed", buyers).await;
    let sold = buyers.min(stock as usize);
    assert_eq!(count(&answers, 201), sold, "{answers:?}");
    assert_eq!(count(&answers, 409), buyers - sold);
    for (status, body) in &answers {
        if *status == 409 {
            assert_eq!(body["error"]["code"], "sold_out");
        }
    }
    let acknowledged: HashSet<String> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b["order_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(acknowledged.len(), sold);

    let (_, sale) = server.get("/v1/sales/seed").await;
    assert_eq!(sale["remaining"], 0);
    assert_eq!(sale["sold"], stock.min(buyers as u32));
    let orders = server.all_orders("seed").await;
    let committed: HashSet<String> = orders
        .iter()
        .map(|o| o["order_id"].as_str().unwrap().to_owned())
        .collect();
    // No lost acknowledgement: every 201 is a committed order, and no more.
    assert_eq!(committed, acknowledged);
    let buyers: HashSet<&str> = orders
        .iter()
        .map(|o| o["user_id"].as_str().unwrap())
        .collect();
    assert_eq!(buyers.len(), orders.len(), "no buyer twice");
    assert!(orders.iter().all(|o| o["status"] == "confirmed"));
}

pub async fn seed_100_buyers_for_100_items(server: TestServer) {
    seed(server, 100, 100).await;
}

pub async fn seed_150_buyers_for_100_items(server: TestServer) {
    seed(server, 150, 100).await;
}

pub async fn idempotent_replays(server: TestServer) {
    server
        .create_sale(json!({"id": "idem", "stock": 10, "per_user_limit": 3}))
        .await;
    let (status, first) = server.buy("idem", "alice", 2, Some("tap-1")).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["status"], "confirmed");
    assert_eq!(first["remaining"], 8);
    assert_eq!(first["quantity"], 2);
    let (status, replay) = server.buy("idem", "alice", 2, Some("tap-1")).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["order_id"], first["order_id"]);
    let (status, reused) = server.buy("idem", "alice", 1, Some("tap-1")).await;
    assert_eq!(status, 422, "{reused}");
    assert_eq!(reused["error"]["code"], "idempotency_key_reused");
    // Keys are scoped to their buyer: Bob's "tap-1" is his own.
    let (status, bobs) = server.buy("idem", "bob", 2, Some("tap-1")).await;
    assert_eq!(status, 201, "{bobs}");
    assert_ne!(bobs["order_id"], first["order_id"]);
    let (status, replay) = server.buy("idem", "bob", 2, Some("tap-1")).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["order_id"], bobs["order_id"]);

    // Twenty concurrent replays of a new key make one order.
    let server = Arc::new(server);
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let server = Arc::clone(&server);
            tokio::spawn(async move { server.buy("idem", "carol", 1, Some("tap-2")).await })
        })
        .collect();
    let mut ids = HashSet::new();
    let mut created = 0;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert!([200, 201, 202].contains(&status), "{status} {body}");
        created += usize::from(status == 201);
        ids.insert(body["order_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(created, 1);
    assert_eq!(ids.len(), 1);
    let (_, sale) = server.get("/v1/sales/idem").await;
    assert_eq!(sale["remaining"], 5);
    assert_eq!(server.all_orders("idem").await.len(), 3);
}

pub async fn cancel_returns_stock_once(server: TestServer) {
    server
        .create_sale(json!({"id": "cancel", "stock": 1}))
        .await;
    let (_, order) = server.buy("cancel", "alice", 1, None).await;
    let id = order["order_id"].as_str().unwrap().to_owned();
    let (status, _) = server.buy("cancel", "bob", 1, None).await;
    assert_eq!(status, 409);

    let (status, cancelled) = server.post(&format!("/v1/orders/{id}/cancel")).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    let (_, sale) = server.get("/v1/sales/cancel").await;
    assert_eq!(sale["remaining"], 1);
    let (status, again) = server.post(&format!("/v1/orders/{id}/cancel")).await;
    assert_eq!(status, 200);
    assert_eq!(again["status"], "cancelled");
    let (_, sale) = server.get("/v1/sales/cancel").await;
    assert_eq!(sale["remaining"], 1, "a second cancel returns nothing");
    let (status, order) = server.get(&format!("/v1/orders/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(order["status"], "cancelled");

    // The stock and the buyer's allowance came back.
    let (status, rebought) = server.buy("cancel", "alice", 1, None).await;
    assert_eq!(status, 201, "{rebought}");
    let (status, _) = server.buy("cancel", "bob", 1, None).await;
    assert_eq!(status, 409);

    let unknown = uuid::Uuid::now_v7();
    let (status, body) = server.post(&format!("/v1/orders/{unknown}/cancel")).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "unknown_order");
    let (status, body) = server.get(&format!("/v1/orders/{unknown}")).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "unknown_order");
}

pub async fn sale_window(server: TestServer) {
    let now = Utc::now();
    let (status, upcoming) = server
        .create_sale(json!({
            "id": "later", "stock": 5,
            "starts_at": (now + TimeDelta::hours(1)).to_rfc3339(),
            "ends_at": (now + TimeDelta::hours(2)).to_rfc3339(),
        }))
        .await;
    assert_eq!(status, 201, "{upcoming}");
    assert_eq!(upcoming["status"], "upcoming");
    let (status, body) = server.buy("later", "u", 1, None).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"]["code"], "not_started");

    let (status, past) = server
        .create_sale(json!({
            "id": "past", "stock": 5,
            "starts_at": (now - TimeDelta::hours(2)).to_rfc3339(),
            "ends_at": (now - TimeDelta::hours(1)).to_rfc3339(),
        }))
        .await;
    assert_eq!(status, 201);
    assert_eq!(past["status"], "ended");
    let (status, body) = server.buy("past", "u", 1, None).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"]["code"], "ended");
    assert!(server.all_orders("later").await.is_empty());
    assert!(server.all_orders("past").await.is_empty());
}

async fn raw(server: &TestServer, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    crate::common::split(
        server
            .client
            .post(server.at(path))
            .bearer_auth(TOKEN)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

pub async fn bad_input_is_a_clear_4xx_and_changes_nothing(server: TestServer) {
    server
        .create_sale(json!({"id": "strict", "stock": 3, "per_user_limit": 3}))
        .await;
    server.buy("strict", "kept", 1, None).await;
    let path = "/v1/sales/strict/purchases";
    let json_body = |v: Value| serde_json::to_vec(&v).unwrap();
    let cases: Vec<(&str, u16, &str, (u16, Value))> = vec![
        ("malformed JSON", 400, "invalid_json", raw(&server, path, "application/json", b"{\"user_id\":".to_vec()).await),
        ("wrong content type", 415, "unsupported_media_type", raw(&server, path, "text/plain", json_body(json!({"user_id": "u"}))).await),
        ("body over 16 KiB", 413, "payload_too_large", raw(&server, path, "application/json", json_body(json!({"user_id": "u".repeat(20_000)}))).await),
        ("quantity 0", 422, "quantity", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "quantity": 0}))).await),
        ("negative quantity", 422, "quantity", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "quantity": -1}))).await),
        ("fractional quantity", 422, "quantity", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "quantity": 1.5}))).await),
        ("quantity beyond u32", 422, "quantity", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "quantity": 4_294_967_296u64}))).await),
        ("quantity as text", 422, "quantity", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "quantity": "1"}))).await),
        ("empty user id", 422, "user_id", raw(&server, path, "application/json", json_body(json!({"user_id": ""}))).await),
        ("over-long user id", 422, "user_id", raw(&server, path, "application/json", json_body(json!({"user_id": "x".repeat(129)}))).await),
        ("missing user id", 422, "user_id", raw(&server, path, "application/json", json_body(json!({"quantity": 1}))).await),
        ("unknown field", 422, "coupon", raw(&server, path, "application/json", json_body(json!({"user_id": "u", "coupon": "x"}))).await),
        ("body not an object", 422, "body", raw(&server, path, "application/json", json_body(json!([1, 2]))).await),
        ("over-long sale id", 422, "sale_id", raw(&server, &format!("/v1/sales/{}/purchases", "s".repeat(65)), "application/json", json_body(json!({"user_id": "u"}))).await),
        ("over the limit", 409, "limit_exceeded", server.buy("strict", "kept", 3, None).await),
        ("more than is left", 409, "insufficient_stock", server.buy("strict", "other", 3, None).await),
        ("unknown sale", 404, "unknown_sale", server.buy("nope", "u", 1, None).await),
        ("over-long idempotency key", 422, "Idempotency-Key", server.buy("strict", "u", 1, Some(&"k".repeat(129))).await),
        ("sale with stock 0", 422, "stock", server.create_sale(json!({"id": "z", "stock": 0})).await),
        ("sale with stock above 1e9", 422, "stock", server.create_sale(json!({"id": "z", "stock": 1_000_000_001})).await),
        ("sale with negative stock", 422, "stock", server.create_sale(json!({"id": "z", "stock": -5})).await),
        ("sale id with a space", 422, "id", server.create_sale(json!({"id": "a b", "stock": 1})).await),
        ("empty sale id", 422, "id", server.create_sale(json!({"id": "", "stock": 1})).await),
        ("limit 0", 422, "per_user_limit", server.create_sale(json!({"id": "z", "stock": 1, "per_user_limit": 0})).await),
        ("end before start", 422, "ends_at", server.create_sale(json!({"id": "z", "stock": 1, "starts_at": "2030-01-02T00:00:00Z", "ends_at": "2030-01-01T00:00:00Z"})).await),
        ("start not RFC 3339", 422, "starts_at", server.create_sale(json!({"id": "z", "stock": 1, "starts_at": "tomorrow"})).await),
        ("hold of 0 s", 422, "hold_seconds", server.create_sale(json!({"id": "z", "stock": 1, "hold_seconds": 0})).await),
        ("unknown sale field", 422, "colour", server.create_sale(json!({"id": "z", "stock": 1, "colour": "red"})).await),
        ("same id, other stock", 409, "sale_conflict", server.create_sale(json!({"id": "strict", "stock": 4, "per_user_limit": 3})).await),
        ("order id not a UUID", 422, "order_id", server.get("/v1/orders/not-a-uuid").await),
        ("cancel id not a UUID", 422, "order_id", server.post("/v1/orders/42/cancel").await),
        ("page size 0", 422, "limit", server.admin_get("/v1/sales/strict/orders?limit=0").await),
        ("page size as text", 422, "query", server.admin_get("/v1/sales/strict/orders?limit=many").await),
        ("page after a non-UUID", 422, "after", server.admin_get("/v1/sales/strict/orders?after=x").await),
        ("orders of an unknown sale", 404, "unknown_sale", server.admin_get("/v1/sales/nope/orders").await),
        ("unknown route", 404, "not_found", server.get("/v2/anything").await),
        ("wrong method", 405, "method_not_allowed", server.get("/v1/sales/strict/purchases").await),
    ];
    for (what, status, expected, (got_status, body)) in cases {
        assert_eq!(got_status, status, "{what}: {body}");
        let error = &body["error"];
        let code = error["code"].as_str().unwrap_or_default();
        if status == 422 && code == "invalid_request" {
            let message = error["message"].as_str().unwrap();
            assert!(
                message.contains(expected),
                "{what}: message {message:?} should name {expected}"
            );
        } else {
            assert_eq!(code, expected, "{what}: {body}");
        }
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        );
    }
    // Nothing changed: one order, two left, no sale "z".
    let (_, sale) = server.get("/v1/sales/strict").await;
    assert_eq!(sale["remaining"], 2);
    assert_eq!(sale["stock"], 3);
    assert_eq!(server.all_orders("strict").await.len(), 1);
    let (status, _) = server.get("/v1/sales/z").await;
    assert_eq!(status, 404);
}

pub async fn admin_endpoints_need_the_token(server: TestServer) {
    let body = json!({"id": "guarded", "stock": 1});
    let no_token = crate::common::split(
        server
            .client
            .post(server.at("/v1/sales"))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(no_token.0, 401);
    assert_eq!(no_token.1["error"]["code"], "unauthorized");
    let wrong = crate::common::split(
        server
            .client
            .post(server.at("/v1/sales"))
            .bearer_auth("not-the-token-at-all")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(wrong.0, 401);
    let (status, _) = server.get("/v1/sales/guarded").await;
    assert_eq!(status, 404, "nothing was created");
    let (status, _) = server.create_sale(body.clone()).await;
    assert_eq!(status, 201);
    let (status, _) = server.create_sale(body).await;
    assert_eq!(status, 200, "the identical sale again");
    let (status, _) = server.get("/v1/sales/guarded/orders").await;
    assert_eq!(status, 401);
}

pub async fn operations_endpoints(server: TestServer) {
    server.create_sale(json!({"id": "ops", "stock": 2})).await;
    server.buy("ops", "u", 1, None).await;
    assert_eq!(server.get("/healthz").await.0, 200);
    let (status, ready) = server.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    let metrics = server.metrics_text().await;
    // With --engine postgres the purchase commits its own order: no writer.
    let group_commit = server.setup() != crate::common::Setup::Postgres;
    let writer = [
        "stockade_writer_batch_size",
        "stockade_store_commit_seconds",
    ];
    for series in [
        "stockade_purchases_total",
        "stockade_purchase_seconds",
        "stockade_engine_seconds",
        "stockade_sale_remaining",
        "stockade_rebuilds_total",
        "stockade_orders_voided_total",
    ]
    .into_iter()
    .chain(writer.into_iter().filter(|_| group_commit))
    {
        assert!(
            metrics.contains(series),
            "{series} missing from:\n{metrics}"
        );
    }
    let (status, doc) = server.get("/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/v1/sales",
        "/v1/sales/{id}",
        "/v1/sales/{id}/purchases",
        "/v1/sales/{id}/orders",
        "/v1/orders/{order_id}",
        "/v1/orders/{order_id}/cancel",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
}

pub async fn restart_rebuilds_the_engine_from_the_store(mut server: TestServer) {
    server
        .create_sale(json!({"id": "durable", "stock": 10, "per_user_limit": 2}))
        .await;
    for user in ["a", "b", "c"] {
        assert_eq!(server.buy("durable", user, 2, None).await.0, 201);
    }
    let (_, order) = server.buy("durable", "d", 1, None).await;
    server
        .post(&format!(
            "/v1/orders/{}/cancel",
            order["order_id"].as_str().unwrap()
        ))
        .await;
    server.restart().await;
    let (status, sale) = server.get("/v1/sales/durable").await;
    assert_eq!(status, 200, "{sale}");
    assert_eq!(sale["remaining"], 4);
    let (status, body) = server.buy("durable", "a", 1, None).await;
    assert_eq!(status, 409, "the rebuilt engine knows a's holding: {body}");
    assert_eq!(body["error"]["code"], "limit_exceeded");
    assert_eq!(server.buy("durable", "d", 2, None).await.0, 201);
}
