//! SKUs and bundles over HTTP on every engine (memory + SQLite, Redis +
//! PostgreSQL, the PostgreSQL engine): a sale of several SKUs shown per
//! SKU, bundles bought all or nothing with the short SKU named, the
//! per-SKU limit, cancels that give each item back, and every malformed
//! sale or purchase refused with a clear error and nothing changed.

use crate::common;

use common::{Setup, TestServer};
use serde_json::{Value, json};

const SETUPS: [Setup; 3] = [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres];

async fn shoes(server: &TestServer) {
    let (status, body) = server
        .create_sale(json!({
            "id": "shoes",
            "skus": [{"id": "us-9", "stock": 2}, {"id": "us-10", "stock": 3}],
            "per_user_limit": 4,
            "per_sku_limit": 2,
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["stock"], 5);
    assert_eq!(body["per_sku_limit"], 2);
    assert_eq!(body["skus"][1]["id"], "us-10");
}

async fn sku_left(server: &TestServer, sale: &str) -> Vec<u64> {
    let (status, body) = server.get(&format!("/v1/sales/{sale}")).await;
    assert_eq!(status, 200, "{body}");
    body["skus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sku| sku["remaining"].as_u64().unwrap())
        .collect()
}

fn error(body: &Value) -> &Value {
    &body["error"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bundles_are_bought_all_or_nothing_and_the_short_sku_is_named() {
    for setup in SETUPS {
        let server = TestServer::start(setup).await;
        shoes(&server).await;
        let (status, order) = server
            .buy_with(
                "shoes",
                json!({"user_id": "ann", "items": [{"sku": "us-9", "quantity": 1}, {"sku": "us-10"}]}),
            )
            .await;
        assert_eq!(status, 201, "{setup:?}: {order}");
        assert_eq!(order["quantity"], 2);
        assert_eq!(
            order["items"],
            json!([{"sku": "us-9", "quantity": 1}, {"sku": "us-10", "quantity": 1}])
        );
        assert_eq!(order["remaining"], 3);
        // One of us-9 is left: a bundle wanting two takes nothing.
        let (status, body) = server
            .buy_with(
                "shoes",
                json!({"user_id": "bob", "items": [{"sku": "us-10", "quantity": 1}, {"sku": "us-9", "quantity": 2}]}),
            )
            .await;
        assert_eq!(status, 409, "{setup:?}: {body}");
        assert_eq!(error(&body)["code"], "insufficient_stock");
        assert_eq!(error(&body)["sku"], "us-9");
        assert_eq!(error(&body)["remaining"], 1);
        assert_eq!(sku_left(&server, "shoes").await, [1, 2], "{setup:?}");
        // One item by sku and quantity.
        let (status, body) = server
            .buy_with("shoes", json!({"user_id": "bob", "sku": "us-9"}))
            .await;
        assert_eq!(status, 201, "{setup:?}: {body}");
        let (_, sale) = server.get("/v1/sales/shoes").await;
        assert_eq!(sale["skus"][0]["status"], "sold_out", "{sale}");
        assert_eq!(sale["status"], "open", "{sale}");
        // Reading the sale refreshes its stock gauges, per SKU too.
        let metrics = server.metrics_text().await;
        for line in [
            r#"stockade_sku_remaining{sale="shoes",sku="us-9"} 0"#,
            r#"stockade_sku_remaining{sale="shoes",sku="us-10"} 2"#,
            r#"stockade_sale_remaining{sale="shoes"} 2"#,
        ] {
            assert!(metrics.lines().any(|l| l == line), "{setup:?}: no {line}");
        }
        // The per-SKU limit, named.
        let (status, body) = server
            .buy_with(
                "shoes",
                json!({"user_id": "ann", "sku": "us-10", "quantity": 2}),
            )
            .await;
        assert_eq!(status, 409, "{setup:?}: {body}");
        assert_eq!(error(&body)["code"], "limit_exceeded");
        assert_eq!(error(&body)["sku"], "us-10");
        assert_eq!(error(&body)["already"], 1);
        // Cancelling the bundle gives both items back.
        let id = order["order_id"].as_str().unwrap();
        let (status, body) = server.post(&format!("/v1/orders/{id}/cancel")).await;
        assert_eq!(status, 200, "{setup:?}: {body}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while sku_left(&server, "shoes").await != [1, 3] && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(sku_left(&server, "shoes").await, [1, 3], "{setup:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_sales_and_purchases_are_refused_and_change_nothing() {
    for setup in SETUPS {
        let server = TestServer::start(setup).await;
        for (body, field) in [
            (
                json!({"id": "x", "stock": 3, "skus": [{"id": "a", "stock": 1}]}),
                "skus",
            ),
            (json!({"id": "x"}), "stock"),
            (json!({"id": "x", "skus": []}), "skus"),
            (
                json!({"id": "x", "skus": [{"id": "a", "stock": 1}, {"id": "a", "stock": 2}]}),
                "skus",
            ),
            (
                json!({"id": "x", "skus": [{"id": "a b", "stock": 1}]}),
                "sku",
            ),
            (
                json!({"id": "x", "skus": [{"id": "a", "stock": 0}]}),
                "skus",
            ),
            (
                json!({"id": "x", "stock": 3, "per_sku_limit": 0}),
                "per_sku_limit",
            ),
        ] {
            let (status, answer) = server.create_sale(body.clone()).await;
            assert_eq!(status, 422, "{setup:?} {body}: {answer}");
            assert_eq!(error(&answer)["code"], "invalid_request", "{answer}");
            assert_eq!(error(&answer)["field"], field, "{body}: {answer}");
        }
        assert_eq!(server.get("/v1/sales/x").await.0, 404, "{setup:?}");
        shoes(&server).await;
        for (body, status, code) in [
            (json!({"user_id": "u"}), 422, "sku_required"),
            (json!({"user_id": "u", "sku": "us-11"}), 404, "unknown_sku"),
            (
                json!({"user_id": "u", "items": [{"sku": "us-9"}, {"sku": "us-12"}]}),
                404,
                "unknown_sku",
            ),
            (
                json!({"user_id": "u", "sku": "us-9", "items": [{"sku": "us-9"}]}),
                422,
                "invalid_request",
            ),
            (json!({"user_id": "u", "items": []}), 422, "invalid_request"),
            (
                json!({"user_id": "u", "items": [{"sku": "us-9"}, {"sku": "us-9"}]}),
                422,
                "invalid_request",
            ),
            (
                json!({"user_id": "u", "items": [{"sku": "us-9", "quantity": 0}]}),
                422,
                "invalid_request",
            ),
            (
                json!({"user_id": "u", "sku": "no way"}),
                422,
                "invalid_request",
            ),
        ] {
            let (got, answer) = server.buy_with("shoes", body.clone()).await;
            assert_eq!(got, status, "{setup:?} {body}: {answer}");
            assert_eq!(error(&answer)["code"], code, "{setup:?} {body}: {answer}");
        }
        assert_eq!(sku_left(&server, "shoes").await, [2, 3], "{setup:?}");
        // A sale created with stock alone has one SKU, `default`, which a
        // purchase may name or leave out.
        let (status, body) = server
            .create_sale(json!({"id": "plain", "stock": 4, "per_user_limit": 4}))
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(
            body["skus"],
            json!([{"id": "default", "stock": 4, "remaining": 4, "sold": 0, "status": "open"}])
        );
        let (status, order) = server
            .buy_with(
                "plain",
                json!({"user_id": "u", "sku": "default", "quantity": 2}),
            )
            .await;
        assert_eq!(status, 201, "{order}");
        assert_eq!(order["items"], json!([{"sku": "default", "quantity": 2}]));
        let (status, order) = server.buy_with("plain", json!({"user_id": "u"})).await;
        assert_eq!(status, 201, "{order}");
        let (status, body) = server
            .buy_with("plain", json!({"user_id": "v", "quantity": 2}))
            .await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(error(&body)["code"], "insufficient_stock");
        assert_eq!(error(&body)["sku"], "default");
    }
}
