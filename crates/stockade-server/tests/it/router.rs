//! Handler tests through the router itself (`tower::ServiceExt::oneshot`),
//! no listener: the embedded default with a SQLite store in a temp dir.

use crate::common;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use stockade_server::Service;
use tower::ServiceExt;

async fn service() -> (Service, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(
        common::Setup::Embedded,
        dir.path(),
        None,
        None,
        common::Timing::default(),
    );
    (Service::start(&config).await.unwrap(), dir)
}

async fn call(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn post(uri: &str, body: Value, admin: bool) -> Request<Body> {
    let mut request = Request::post(uri).header(header::CONTENT_TYPE, "application/json");
    if admin {
        request = request.header(header::AUTHORIZATION, format!("Bearer {}", common::TOKEN));
    }
    request.body(Body::from(body.to_string())).unwrap()
}

#[tokio::test]
async fn a_purchase_through_the_router() {
    let (service, _dir) = service().await;
    let router = service.router();
    let (status, sale) = call(
        &router,
        post("/v1/sales", json!({"id": "r", "stock": 2}), true),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["status"], "open");

    let (status, order) = call(
        &router,
        post("/v1/sales/r/purchases", json!({"user_id": "u"}), false),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    assert_eq!(order["quantity"], 1);
    assert_eq!(order["remaining"], 1);
    // 201 means committed: the store has it.
    let id: stockade_core::OrderId = order["order_id"].as_str().unwrap().parse().unwrap();
    let stored = service.state().store().order(id).await.unwrap().unwrap();
    assert_eq!(stored.user_id.as_str(), "u");

    let (status, body) = call(
        &router,
        post("/v1/sales/r/purchases", json!({"user_id": "u"}), false),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "limit_exceeded");
    let (status, body) = call(
        &router,
        Request::get(format!("/v1/orders/{id}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "confirmed");
    drop(router);
    service.stop().await;
}

#[tokio::test]
async fn rejections_through_the_router_change_nothing() {
    let (service, _dir) = service().await;
    let router = service.router();
    call(
        &router,
        post("/v1/sales", json!({"id": "r", "stock": 1}), true),
    )
    .await;
    let (status, body) = call(
        &router,
        post("/v1/sales", json!({"id": "x", "stock": 1}), false),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = call(
        &router,
        post(
            "/v1/sales/r/purchases",
            json!({"user_id": "u", "quantity": 0}),
            false,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["field"], "quantity");
    let bad_json = Request::post("/v1/sales/r/purchases")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{nope"))
        .unwrap();
    assert_eq!(call(&router, bad_json).await.0, StatusCode::BAD_REQUEST);
    let no_type = Request::post("/v1/sales/r/purchases")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        call(&router, no_type).await.0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let (status, body) = call(
        &router,
        Request::get("/nowhere").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
    let (_, sale) = call(
        &router,
        Request::get("/v1/sales/r").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(sale["remaining"], 1);
    let (status, _) = call(
        &router,
        Request::get("/v1/sales/x").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    drop(router);
    service.stop().await;
}
