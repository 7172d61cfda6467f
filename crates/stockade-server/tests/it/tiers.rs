//! Buyer tiers over HTTP: a sale with a members' reserve, bought by a
//! trusted caller naming the tier (identity off, every engine) and by
//! buyers whose JWT carries the tier claim (`--jwt-tier-claim`), with a bad
//! claim refused; and tier specs that do not fit the sale refused at
//! creation with nothing created.

use crate::common;

use std::sync::Arc;

use common::{Setup, TestServer, Timing, split};
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};
use stockade_core::SystemClock;
use stockade_core::{Clock, ManualClock};

const SETUPS: [Setup; 3] = [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres];
const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

/// Shoes: `a` 10 (6 reserved for members), `b` 4; members may hold 5,
/// others 2.
fn members_sale(id: &str) -> Value {
    json!({
        "id": id,
        "skus": [{"id": "a", "stock": 10}, {"id": "b", "stock": 4}],
        "per_user_limit": 2,
        "tiers": [{"name": "members", "reserved": {"a": 6}, "per_user_limit": 5}],
    })
}

fn error(body: &Value) -> &Value {
    &body["error"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trusted_callers_tier_takes_the_reserve_others_cannot() {
    for setup in SETUPS {
        let server = TestServer::start(setup).await;
        let (status, sale) = server.create_sale(members_sale("tiered")).await;
        assert_eq!(status, 201, "{setup:?}: {sale}");
        assert_eq!(sale["tiers"][0]["name"], "members");
        assert_eq!(sale["tiers"][0]["reserved"], json!({"a": 6}));
        // Others share a's common stock of 4.
        for buyer in ["o1", "o2"] {
            let (status, body) = server
                .buy_with(
                    "tiered",
                    json!({"user_id": buyer, "sku": "a", "quantity": 2}),
                )
                .await;
            assert_eq!(status, 201, "{setup:?}: {body}");
        }
        let (status, body) = server
            .buy_with("tiered", json!({"user_id": "o3", "sku": "a"}))
            .await;
        assert_eq!(status, 409, "{setup:?}: {body}");
        assert_eq!(error(&body)["code"], "insufficient_stock");
        assert_eq!(error(&body)["remaining"], 0);
        // A member takes 5 of the reserve, past the others' limit of 2.
        let (status, order) = server
            .buy_with(
                "tiered",
                json!({"user_id": "m1", "tier": "members", "sku": "a", "quantity": 5}),
            )
            .await;
        assert_eq!(status, 201, "{setup:?}: {order}");
        assert_eq!(order["tier"], "members");
        // A tier the sale does not have is no tier: the others' limit.
        let (status, body) = server
            .buy_with(
                "tiered",
                json!({"user_id": "g1", "tier": "gold", "sku": "b", "quantity": 3}),
            )
            .await;
        assert_eq!(status, 409, "{setup:?}: {body}");
        assert_eq!(error(&body)["code"], "limit_exceeded");
        let (status, body) = server
            .buy_with(
                "tiered",
                json!({"user_id": "m2", "tier": "no such!", "sku": "a"}),
            )
            .await;
        assert_eq!(status, 422, "{setup:?}: {body}");
        assert_eq!(error(&body)["field"], "tier");
        let (_, sale) = server.get("/v1/sales/tiered").await;
        assert_eq!(sale["skus"][0]["remaining"], 1, "{setup:?}: {sale}");
    }
}

/// Issue 35 item 8: before the sale opens, a member inside their tier's
/// earlier window buys even after a non-member was refused `not_started`
/// (the instance's cached rejections judge the buyer's tier window, not
/// the sale's).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tiers_earlier_start_holds_after_a_non_member_was_refused() {
    let now = chrono::Utc::now();
    for setup in SETUPS {
        let server = TestServer::start(setup).await;
        let mut spec = members_sale("early");
        spec["starts_at"] = json!(now + chrono::TimeDelta::hours(1));
        spec["tiers"][0]["starts_at"] = json!(now - chrono::TimeDelta::minutes(1));
        let (status, sale) = server.create_sale(spec).await;
        assert_eq!(status, 201, "{setup:?}: {sale}");
        let member = |buyer: &str| json!({"user_id": buyer, "tier": "members", "sku": "a"});
        let (status, body) = server.buy_with("early", member("m1")).await;
        assert_eq!(status, 201, "{setup:?}: first member: {body}");
        let (status, body) = server
            .buy_with("early", json!({"user_id": "o1", "sku": "a"}))
            .await;
        assert_eq!(status, 409, "{setup:?}: non-member: {body}");
        assert_eq!(error(&body)["code"], "not_started", "{setup:?}");
        for buyer in ["m2", "m3"] {
            let (status, body) = server.buy_with("early", member(buyer)).await;
            assert_eq!(status, 201, "{setup:?}: member {buyer}: {body}");
        }
        let (_, sale) = server.get("/v1/sales/early").await;
        assert_eq!(sale["skus"][0]["sold"], 3, "{setup:?}: {sale}");
    }
}

/// With a waiting room too: before the sale opens, members buy in their
/// tier's earlier window (the room judges the buyer's tier window, not
/// the sale's) while a non-member is refused `not_started`; from the sale's
/// start everyone, members too, comes through the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tiers_earlier_start_holds_through_the_waiting_room() {
    for setup in SETUPS {
        let clock = ManualClock::new(chrono::Utc::now());
        let server =
            TestServer::start_with_clock(setup, Timing::default(), Arc::new(clock.clone())).await;
        let opens = clock.now() + chrono::TimeDelta::hours(1);
        let mut spec = members_sale("queued-early");
        spec["starts_at"] = json!(opens);
        spec["tiers"][0]["starts_at"] = json!(clock.now() - chrono::TimeDelta::minutes(1));
        spec["waiting_room"] = json!({"admit_per_second": 10, "admission_ttl_seconds": 60});
        let (status, sale) = server.create_sale(spec).await;
        assert_eq!(status, 201, "{setup:?}: {sale}");
        let member = |buyer: &str| json!({"user_id": buyer, "tier": "members", "sku": "a"});
        let (status, body) = server.buy_with("queued-early", member("m1")).await;
        assert_eq!(status, 201, "{setup:?}: first member: {body}");
        let (status, body) = server
            .buy_with("queued-early", json!({"user_id": "o1", "sku": "a"}))
            .await;
        assert_eq!(status, 409, "{setup:?}: non-member: {body}");
        assert_eq!(error(&body)["code"], "not_started", "{setup:?}");
        for buyer in ["m2", "m3"] {
            let (status, body) = server.buy_with("queued-early", member(buyer)).await;
            assert_eq!(status, 201, "{setup:?}: member {buyer}: {body}");
        }
        let (_, sale) = server.get("/v1/sales/queued-early").await;
        assert_eq!(sale["skus"][0]["sold"], 3, "{setup:?}: {sale}");
        // The sale opens: members queue with everyone.
        clock.set(opens);
        let (status, body) = server.buy_with("queued-early", member("m4")).await;
        assert_eq!(status, 403, "{setup:?}: member after the start: {body}");
        assert_eq!(error(&body)["code"], "admission_required", "{setup:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tiers_that_do_not_fit_the_sale_are_refused_at_creation() {
    let server = TestServer::start(Setup::Embedded).await;
    for (tiers, says) in [
        (
            json!([{"name": "m", "reserved": {"a": 11}}]),
            "more than its stock",
        ),
        (
            json!([{"name": "m", "reserved": {"z": 1}}]),
            "does not have",
        ),
        (json!([{"name": "m"}, {"name": "m"}]), "listed twice"),
        (json!([{"name": "bad name"}]), "tier"),
        (
            json!([{"name": "m", "reserved": {"a": 6}}, {"name": "v", "reserved": {"a": 6}}]),
            "more than its stock",
        ),
    ] {
        let body = json!({"id": "bad-tiers", "skus": [{"id": "a", "stock": 10}], "tiers": tiers});
        let (status, answer) = server.create_sale(body).await;
        assert_eq!(status, 422, "{tiers}: {answer}");
        assert!(
            error(&answer)["message"].as_str().unwrap().contains(says),
            "{tiers}: {answer}"
        );
    }
    let (status, answer) = server
        .create_sale(
            json!({"id": "bad-tiers", "stock": 5, "release_reserved_at": "2030-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(error(&answer)["field"], "release_reserved_at");
    assert_eq!(server.get("/v1/sales/bad-tiers").await.0, 404);
}

fn token(claims: Value) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

fn exp() -> i64 {
    chrono::Utc::now().timestamp() + 3_600
}

async fn buy_as(server: &TestServer, sale: &str, token: &str, body: Value) -> (u16, Value) {
    let request = server
        .client
        .post(server.at(&format!("/v1/sales/{sale}/purchases")))
        .bearer_auth(token)
        .json(&body);
    split(request.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_buyers_tier_comes_from_their_tokens_claim() {
    let server = TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(SystemClock),
        |c| {
            c.identity.jwt_secret = Some(SECRET.into());
            c.identity.jwt_tier_claim = Some("membership".into());
        },
    )
    .await;
    let (status, _) = server.create_sale(members_sale("claimed")).await;
    assert_eq!(status, 201);
    let member = token(json!({"sub": "m1", "exp": exp(), "membership": "members"}));
    let (status, order) = buy_as(
        &server,
        "claimed",
        &member,
        json!({"sku": "a", "quantity": 5}),
    )
    .await;
    assert_eq!(status, 201, "{order}");
    assert_eq!(order["tier"], "members");
    // The default claim name is not read when another is configured.
    let other = token(json!({"sub": "o1", "exp": exp(), "tier": "members"}));
    let (status, body) = buy_as(
        &server,
        "claimed",
        &other,
        json!({"sku": "a", "quantity": 3}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(error(&body)["code"], "limit_exceeded");
    // Naming a tier in the body beside a token is refused.
    let (status, body) = buy_as(
        &server,
        "claimed",
        &other,
        json!({"sku": "a", "tier": "members"}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(error(&body)["code"], "forbidden");
    // A claim that is not a tier name fails the token.
    for bad in [json!(7), json!("not a tier!")] {
        let broken = token(json!({"sub": "m2", "exp": exp(), "membership": bad}));
        let (status, body) = buy_as(&server, "claimed", &broken, json!({"sku": "a"})).await;
        assert_eq!(status, 401, "{body}");
        assert!(
            error(&body)["message"]
                .as_str()
                .unwrap()
                .contains("membership claim"),
            "{body}"
        );
    }
    let (_, sale) = server.get("/v1/sales/claimed").await;
    assert_eq!(sale["skus"][0]["sold"], 5, "{sale}");
}
