//! Identity settings of issue 18, item 8: a JWT's `nbf` is checked with
//! the same leeway as `exp`, and the HS256 secret may come from a file
//! (`--jwt-secret-file`, `STOCKADE_JWT_SECRET_FILE`), as secrets kept out
//! of `ps` and the environment usually are.

use crate::common;

use std::sync::Arc;

use common::{Setup, TestServer, split};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use stockade_core::SystemClock;
use stockade_server::identity::LEEWAY_SECONDS;

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn hs256(claims: &Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

async fn buy_as(server: &TestServer, sale: &str, token: &str) -> (u16, Value) {
    let request = server
        .client
        .post(server.at(&format!("/v1/sales/{sale}/purchases")))
        .bearer_auth(token)
        .json(&json!({}));
    split(request.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_not_valid_yet_is_refused() {
    let server = TestServer::start_with_env(Setup::Embedded, Arc::new(SystemClock), &[], |c| {
        c.identity.jwt_secret = Some(SECRET.into());
    })
    .await;
    let (status, _) = server
        .create_sale(json!({"id": "early", "stock": 10, "per_user_limit": 10}))
        .await;
    assert_eq!(status, 201);
    let leeway = LEEWAY_SECONDS as i64;
    let future = json!({"sub": "eve", "exp": now() + 7200, "nbf": now() + 3600});
    let (status, body) = buy_as(&server, "early", &hs256(&future, SECRET)).await;
    assert_eq!(status, 401, "a token valid only in an hour: {body}");
    assert_eq!(body["error"]["code"], "unauthenticated");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("nbf"),
        "{body}"
    );
    let just_beyond = json!({"sub": "eve", "exp": now() + 7200, "nbf": now() + leeway + 60});
    let (status, body) = buy_as(&server, "early", &hs256(&just_beyond, SECRET)).await;
    assert_eq!(status, 401, "beyond the leeway: {body}");
    let (_, sale) = server.get("/v1/sales/early").await;
    assert_eq!(sale["remaining"], 10, "nothing sold: {sale}");

    // Within the leeway (a clock a little ahead), or already valid: sold.
    for nbf in [now() + leeway / 2, now() - 60] {
        let claims = json!({"sub": "eve", "exp": now() + 3600, "nbf": nbf});
        let (status, body) = buy_as(&server, "early", &hs256(&claims, SECRET)).await;
        assert_eq!(status, 201, "nbf {nbf}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jwt_secret_may_come_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jwt-secret");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let server = TestServer::start_with_env(
        Setup::Embedded,
        Arc::new(SystemClock),
        &[("STOCKADE_JWT_SECRET_FILE", file.to_str().unwrap())],
        |_| {},
    )
    .await;
    let (status, _) = server
        .create_sale(json!({"id": "filed", "stock": 10}))
        .await;
    assert_eq!(status, 201);
    let claims = json!({"sub": "frank", "exp": now() + 3600});
    // The buyer is the token's sub: identity is on, with the file's secret
    // (its trailing newline dropped).
    let (status, order) = buy_as(&server, "filed", &hs256(&claims, SECRET)).await;
    assert_eq!(status, 201, "{order}");
    assert_eq!(order["user_id"], "frank");
    let forged = hs256(&claims, "another-secret-of-at-least-32-bytes!!");
    let (status, body) = buy_as(&server, "filed", &forged).await;
    assert_eq!(status, 401, "{body}");
}
