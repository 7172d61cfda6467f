//! Payments confirm, buyers do not (issue 18, item 2): `POST
//! /v1/orders/{id}/confirm` is the callback of the payment service. It
//! needs `Authorization: Bearer <payments token>` (`--payments-token`,
//! `STOCKADE_PAYMENTS_TOKEN`, `--payments-token-file`) or the admin token;
//! a buyer's own JWT is 403 `forbidden`, no credential 401
//! `unauthenticated`, and nothing changes. Without a payments token only
//! the admin confirms.

use crate::common;

use std::sync::Arc;

use common::{Setup, TOKEN, TestServer, split};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use stockade_core::SystemClock;

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
const PAYMENTS: &str = "payments-service-token-0123456789";

fn jwt(sub: &str) -> String {
    let claims = json!({"sub": sub, "exp": chrono::Utc::now().timestamp() + 3600});
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

/// A held order of `buyer` in a fresh sale `sale` (bought with `token`, or
/// naming the buyer when identity is off).
async fn held_order(server: &TestServer, sale: &str, buyer: &str, token: Option<&str>) -> String {
    let (status, body) = server
        .create_sale(json!({"id": sale, "stock": 5, "per_user_limit": 5, "hold_seconds": 600}))
        .await;
    assert_eq!(status, 201, "{body}");
    let mut request = server
        .client
        .post(server.at(&format!("/v1/sales/{sale}/purchases")))
        .json(&json!({"user_id": buyer}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let (status, order) = split(request.send().await.unwrap()).await;
    assert_eq!(
        (status, order["status"].as_str()),
        (201, Some("held")),
        "{order}"
    );
    order["order_id"].as_str().unwrap().to_owned()
}

async fn confirm(server: &TestServer, order: &str, bearer: Option<&str>) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.at(&format!("/v1/orders/{order}/confirm")));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    split(request.send().await.unwrap()).await
}

async fn status_of(server: &TestServer, order: &str) -> String {
    let (status, body) = server.admin_get(&format!("/v1/orders/{order}")).await;
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap().to_owned()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_cannot_confirm_their_own_hold_and_the_payment_service_can() {
    let server = TestServer::start_with_env(
        Setup::Embedded,
        Arc::new(SystemClock),
        &[("STOCKADE_PAYMENTS_TOKEN", PAYMENTS)],
        |c| c.identity.jwt_secret = Some(SECRET.into()),
    )
    .await;
    let alice = jwt("alice");
    let order = held_order(&server, "hold", "alice", Some(&alice)).await;

    // The buyer's own JWT: 403, nothing changes.
    let (status, body) = confirm(&server, &order, Some(&alice)).await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("payment"),
        "{body}"
    );
    assert_eq!(status_of(&server, &order).await, "held");
    // No credential, or one that is none of the three: 401.
    for bearer in [None, Some("not-a-token-we-know")] {
        let (status, body) = confirm(&server, &order, bearer).await;
        assert_eq!((status, code(&body)), (401, "unauthenticated"), "{body}");
    }
    assert_eq!(status_of(&server, &order).await, "held");

    // The payment service: confirmed; again: the same, nothing changes.
    let (status, body) = confirm(&server, &order, Some(PAYMENTS)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
    let (status, body) = confirm(&server, &order, Some(PAYMENTS)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
    // The admin token confirms too.
    let other = {
        let (status, order) = split(
            server
                .client
                .post(server.at("/v1/sales/hold/purchases"))
                .bearer_auth(&alice)
                .json(&json!({}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 201, "{order}");
        order["order_id"].as_str().unwrap().to_owned()
    };
    let (status, body) = confirm(&server, &other, Some(TOKEN)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
}

/// With identity off anyone could name any buyer: a confirm needs the
/// payments token all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_identity_off_a_confirm_still_needs_the_payments_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payments-token");
    std::fs::write(&file, format!("{PAYMENTS}\n")).unwrap();
    let server = TestServer::start_with_env(
        Setup::Embedded,
        Arc::new(SystemClock),
        &[("STOCKADE_PAYMENTS_TOKEN_FILE", file.to_str().unwrap())],
        |_| {},
    )
    .await;
    let order = held_order(&server, "open", "bob", None).await;
    let (status, body) = confirm(&server, &order, None).await;
    assert_eq!((status, code(&body)), (401, "unauthenticated"), "{body}");
    assert_eq!(status_of(&server, &order).await, "held");
    // The token read from the file (its trailing newline dropped).
    let (status, body) = confirm(&server, &order, Some(PAYMENTS)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
}

/// No payments token configured: only the admin confirms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_payments_token_only_the_admin_confirms() {
    let server = TestServer::start(Setup::Embedded).await;
    let order = held_order(&server, "admin-only", "carol", None).await;
    for bearer in [None, Some(PAYMENTS)] {
        let (status, body) = confirm(&server, &order, bearer).await;
        assert_eq!((status, code(&body)), (401, "unauthenticated"), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("STOCKADE_PAYMENTS_TOKEN"),
            "{body}"
        );
    }
    assert_eq!(status_of(&server, &order).await, "held");
    let (status, body) = confirm(&server, &order, Some(TOKEN)).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
}
