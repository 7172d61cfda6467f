//! Verified buyers (issue 11, item 1): with `--jwt-secret` (HS256) or
//! `--jwt-public-key` (ES256 here, keys made in the test) purchases and
//! order routes need a buyer's JWT, the buyer is its `sub`, a body naming
//! someone else is 403, a bad token is 401 and changes nothing, and an
//! order is visible only to its buyer and the admin (404 to anyone else).
//! Also the door-keeping of item 6 that needs a running server.

use crate::common;

use std::sync::Arc;

use common::{Setup, TOKEN, TestServer, Timing, split};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Value, json};
use stockade_core::SystemClock;
use stockade_server::config::{RawConfig, ServerConfig};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
const ISSUER: &str = "https://id.example.test";
const AUDIENCE: &str = "stockade-test";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Valid claims for `sub`, expiring in an hour.
fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 3600})
}

fn hs256(claims: &Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

/// An EC P-256 key pair as (private PKCS#8 PEM, public PEM).
fn p256_pair() -> (String, String) {
    let key = loop {
        // Any 32 random bytes below the group order make a key.
        if let Ok(key) = p256::SecretKey::from_slice(&rand::random::<[u8; 32]>()) {
            break key;
        }
    };
    let private = key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string();
    let public = key.public_key().to_public_key_pem(LineEnding::LF).unwrap();
    (private, public)
}

fn es256(claims: &Value, private_pem: &str) -> String {
    encode(
        &Header::new(Algorithm::ES256),
        claims,
        &EncodingKey::from_ec_pem(private_pem.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// An embedded server verifying HS256 tokens of [`SECRET`].
async fn hs256_server() -> TestServer {
    TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(SystemClock),
        |c| {
            c.identity.jwt_secret = Some(SECRET.into());
            c.identity.jwt_issuer = Some(ISSUER.into());
            c.identity.jwt_audience = Some(AUDIENCE.into());
        },
    )
    .await
}

async fn buy_as(server: &TestServer, sale: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.at(&format!("/v1/sales/{sale}/purchases")))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    split(request.send().await.unwrap()).await
}

async fn get_as(server: &TestServer, path: &str, token: &str) -> (u16, Value) {
    call_as(server.client.get(server.at(path)), token).await
}

async fn post_as(server: &TestServer, path: &str, token: &str) -> (u16, Value) {
    call_as(server.client.post(server.at(path)), token).await
}

async fn call_as(request: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
    split(request.bearer_auth(token).send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buyer_is_the_tokens_sub_and_sees_only_their_own_orders() {
    let server = hs256_server().await;
    let (status, _) = server
        .create_sale(json!({"id": "drop", "stock": 10, "per_user_limit": 2}))
        .await;
    assert_eq!(status, 201);
    let alice = hs256(&claims("alice"), SECRET);
    let bob = hs256(&claims("bob"), SECRET);

    // No token: 401 with the RFC 6750 challenge, nothing sold.
    let response = server
        .client
        .post(server.at("/v1/sales/drop/purchases"))
        .json(&json!({"user_id": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers().get("www-authenticate").unwrap(),
        "Bearer error=\"invalid_token\""
    );
    let (status, body) = split(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{body}"
    );

    // The token names the buyer; the body may leave user_id out or repeat it.
    let (status, order) = buy_as(&server, "drop", Some(&alice), json!({})).await;
    assert_eq!(status, 201, "{order}");
    assert_eq!(order["user_id"], "alice");
    let (status, again) = buy_as(&server, "drop", Some(&alice), json!({"user_id": "alice"})).await;
    assert_eq!(status, 201, "{again}");
    // Naming someone else is refused, before anything is sold.
    let (status, body) = buy_as(&server, "drop", Some(&bob), json!({"user_id": "alice"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("user_mismatch")),
        "{body}"
    );
    let (_, sale) = server.get("/v1/sales/drop").await;
    assert_eq!(sale["sold"], 2, "{sale}");

    // Another buyer's order is exactly as missing as one that never was.
    let id = order["order_id"].as_str().unwrap();
    let path = format!("/v1/orders/{id}");
    let (status, body) = get_as(&server, &path, &bob).await;
    let (never_status, never) = get_as(
        &server,
        "/v1/orders/0193a5b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b",
        &bob,
    )
    .await;
    assert_eq!((status, never_status), (404, 404), "{body} {never}");
    assert_eq!(body["error"]["code"], never["error"]["code"]);
    let (status, body) = post_as(&server, &format!("{path}/cancel"), &bob).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_order")),
        "{body}"
    );
    // Without a token the order routes are 401.
    let (status, _) = server.get(&path).await;
    assert_eq!(status, 401);
    // Its buyer and the admin see it; bob's cancel changed nothing.
    let (status, seen) = get_as(&server, &path, &alice).await;
    assert_eq!(
        (status, seen["status"].as_str()),
        (200, Some("confirmed")),
        "{seen}"
    );
    let (status, seen) = get_as(&server, &path, TOKEN).await;
    assert_eq!(
        (status, seen["user_id"].as_str()),
        (200, Some("alice")),
        "{seen}"
    );
    // Its buyer cancels it.
    let (status, cancelled) = post_as(&server, &format!("{path}/cancel"), &alice).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled")),
        "{cancelled}"
    );
    // The admin token still buys for a named buyer (support staff).
    let (status, body) = buy_as(&server, "drop", Some(TOKEN), json!({"user_id": "carol"})).await;
    assert_eq!(
        (status, body["user_id"].as_str()),
        (201, Some("carol")),
        "{body}"
    );
}

/// A held order is confirmed (paid) by the payment service or the admin,
/// never by a buyer, not even its own (issue 18, item 2: a buyer who could
/// confirm would hold items without paying): 403, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_buyer_confirms_a_held_order_and_the_admin_does() {
    let server = hs256_server().await;
    let (status, _) = server
        .create_sale(json!({"id": "hold", "stock": 5, "per_user_limit": 2, "hold_seconds": 600}))
        .await;
    assert_eq!(status, 201);
    let alice = hs256(&claims("alice"), SECRET);
    let bob = hs256(&claims("bob"), SECRET);
    let mut held = Vec::new();
    for _ in 0..2 {
        let (status, order) = buy_as(&server, "hold", Some(&alice), json!({})).await;
        assert_eq!(
            (status, order["status"].as_str()),
            (201, Some("held")),
            "{order}"
        );
        held.push(format!(
            "/v1/orders/{}",
            order["order_id"].as_str().unwrap()
        ));
    }

    for buyer in [&bob, &alice] {
        let (status, body) = post_as(&server, &format!("{}/confirm", held[0]), buyer).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "{body}"
        );
    }
    let (_, seen) = get_as(&server, &held[0], &alice).await;
    assert_eq!(
        seen["status"], "held",
        "the buyers' confirms changed nothing: {seen}"
    );

    let (status, body) = post_as(&server, &format!("{}/confirm", held[1]), TOKEN).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("confirmed")),
        "{body}"
    );
    // Without a token: 401.
    let response = server
        .client
        .post(server.at(&format!("{}/confirm", held[0])))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_401_and_change_nothing() {
    let server = hs256_server().await;
    let (status, _) = server
        .create_sale(json!({"id": "guarded", "stock": 5}))
        .await;
    assert_eq!(status, 201);
    let expired = json!({"sub": "eve", "iss": ISSUER, "aud": AUDIENCE, "exp": now() - 3600});
    let wrong_audience =
        json!({"sub": "eve", "iss": ISSUER, "aud": "another-service", "exp": now() + 3600});
    let wrong_issuer =
        json!({"sub": "eve", "iss": "https://evil.test", "aud": AUDIENCE, "exp": now() + 3600});
    let no_expiry = json!({"sub": "eve", "iss": ISSUER, "aud": AUDIENCE});
    let no_subject = json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 3600});
    let blank_subject = json!({"sub": " ", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 3600});
    // `alg: none` with no signature: the classic forgery, on a valid
    // token's claims.
    let valid = hs256(&claims("eve"), SECRET);
    let parts: Vec<&str> = valid.split('.').collect();
    let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.", parts[1]);
    let none_capitalised = format!("eyJhbGciOiJOb25lIn0.{}.", parts[1]);
    // The right header and claims under a made-up signature.
    let forged_signature = format!("{}.{}.{}", parts[0], parts[1], "A".repeat(parts[2].len()));
    let (private, _) = p256_pair();
    let tokens: Vec<(&str, String)> = vec![
        ("expired", hs256(&expired, SECRET)),
        ("wrong audience", hs256(&wrong_audience, SECRET)),
        ("wrong issuer", hs256(&wrong_issuer, SECRET)),
        ("no exp", hs256(&no_expiry, SECRET)),
        ("no sub", hs256(&no_subject, SECRET)),
        ("blank sub", hs256(&blank_subject, SECRET)),
        (
            "another secret",
            hs256(&claims("eve"), "another-secret-of-at-least-32-bytes!"),
        ),
        ("alg none", none),
        ("alg None", none_capitalised),
        ("forged signature", forged_signature),
        ("another algorithm", es256(&claims("eve"), &private)),
        ("not a JWT", "garbage".to_owned()),
    ];
    for (what, token) in &tokens {
        let (status, body) =
            buy_as(&server, "guarded", Some(token), json!({"user_id": "eve"})).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["error"]["code"], "unauthenticated", "{what}: {body}");
    }
    // A scheme other than Bearer is 401 too.
    let response = server
        .client
        .post(server.at("/v1/sales/guarded/purchases"))
        .header("Authorization", format!("Basic {valid}"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // A bad token is refused before the body is read.
    let response = server
        .client
        .post(server.at("/v1/sales/guarded/purchases"))
        .bearer_auth("garbage")
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let (_, sale) = server.get("/v1/sales/guarded").await;
    assert_eq!(sale["sold"], 0, "{sale}");
    assert!(server.all_orders("guarded").await.is_empty());
    // The valid one works.
    let (status, body) = buy_as(&server, "guarded", Some(&valid), json!({})).await;
    assert_eq!(
        (status, body["user_id"].as_str()),
        (201, Some("eve")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn es256_tokens_are_checked_with_the_public_key_file() {
    let (private, public) = p256_pair();
    let (other_private, _) = p256_pair();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("buyers.pem");
    std::fs::write(&key_file, &public).unwrap();
    // Through the settings, as `--jwt-public-key FILE --jwt-issuer ...`.
    let mut given = RawConfig::default();
    given.identity.jwt_public_key = Some(key_file.clone());
    given.identity.jwt_issuer = Some(ISSUER.into());
    given.identity.jwt_audience = Some(AUDIENCE.into());
    let resolved = ServerConfig::resolve(given.clone(), RawConfig::default(), None).unwrap();
    let identity = resolved.identity().unwrap();
    assert_eq!(identity.algorithm(), "ES256");
    let server = TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(SystemClock),
        move |c| c.identity = given.identity,
    )
    .await;
    let (status, _) = server.create_sale(json!({"id": "ec", "stock": 3})).await;
    assert_eq!(status, 201);
    let (status, body) = buy_as(
        &server,
        "ec",
        Some(&es256(&claims("dana"), &private)),
        json!({}),
    )
    .await;
    assert_eq!(
        (status, body["user_id"].as_str()),
        (201, Some("dana")),
        "{body}"
    );
    // Signed by another key, or HS256 with the public key as the secret.
    for token in [
        es256(&claims("dana"), &other_private),
        hs256(&claims("dana"), &public),
    ] {
        let (status, body) = buy_as(&server, "ec", Some(&token), json!({})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthenticated")),
            "{body}"
        );
    }
    // A file that is not a key fails at start, naming the setting.
    std::fs::write(&key_file, "not a key").unwrap();
    let mut given = RawConfig::default();
    given.identity.jwt_public_key = Some(key_file);
    let error = ServerConfig::resolve(given, RawConfig::default(), None).unwrap_err();
    assert!(error.to_string().contains("--jwt-public-key"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_identity_the_body_names_the_buyer_and_anyone_reads_orders() {
    let server = TestServer::start(Setup::Embedded).await;
    let (status, _) = server.create_sale(json!({"id": "open", "stock": 3})).await;
    assert_eq!(status, 201);
    // No user_id: there is no one to buy for.
    let (status, body) = buy_as(&server, "open", None, json!({"quantity": 1})).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (422, Some("user_id")),
        "{body}"
    );
    // Blank, bidi-override and zero-width buyer ids are refused.
    for user in ["   ", "evil\u{202E}gnp", "ad\u{200B}min", "\u{FEFF}x"] {
        let (status, body) = buy_as(&server, "open", None, json!({"user_id": user})).await;
        assert_eq!(
            (status, body["error"]["field"].as_str()),
            (422, Some("user_id")),
            "{user:?}: {body}"
        );
    }
    let (status, order) = buy_as(&server, "open", None, json!({"user_id": "frank"})).await;
    assert_eq!(status, 201, "{order}");
    // An unverifiable Authorization header is ignored while identity is off.
    let path = format!("/v1/orders/{}", order["order_id"].as_str().unwrap());
    let (status, _) = get_as(&server, &path, "whatever").await;
    assert_eq!(status, 200);
    let (_, sale) = server.get("/v1/sales/open").await;
    assert_eq!(sale["sold"], 1, "{sale}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_check_the_token_before_the_body_and_paths_answer_in_json() {
    let server = TestServer::start(Setup::Embedded).await;
    // Without the token: 401, never a 422 that describes the schema.
    for body in ["{}", "{\"id\": 5}", "not json"] {
        let response = server
            .client
            .post(server.at("/v1/sales"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, answer) = split(response).await;
        assert_eq!(status, 401, "{body}: {answer}");
        assert!(!answer.to_string().contains("missing field"), "{answer}");
    }
    let response = server
        .client
        .get(server.at("/v1/sales/x/orders?limit=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // Invalid UTF-8 in a path: the JSON error shape, not text/plain.
    for path in [
        "/v1/sales/%FF",
        "/v1/sales/%FF/purchases",
        "/v1/orders/%C3%28",
        "/v1/sales/%FF/orders",
    ] {
        let request = if path.ends_with("purchases") {
            server
                .client
                .post(server.at(path))
                .json(&json!({"user_id": "u"}))
        } else {
            server.client.get(server.at(path)).bearer_auth(TOKEN)
        };
        let response = request.send().await.unwrap();
        assert_eq!(
            response.headers().get("content-type").unwrap(),
            "application/json",
            "{path}"
        );
        let (status, body) = split(response).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid_path")),
            "{path}: {body}"
        );
    }
}
