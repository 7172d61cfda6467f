//! One buyer, one id (issue 35 item 11): a buyer id is compared in its
//! canonical form (Unicode NFC), so the composed and decomposed spellings
//! of one name are one buyer for the per-user limit, a draw entry, a queue
//! ticket and a signed-in buyer's own orders; an id with leading or
//! trailing whitespace is refused with 422 and changes nothing; case is
//! kept (`Ann` and `ann` are two buyers).

use crate::common;

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer, Timing, split};
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};
use stockade_core::SystemClock;

/// "José" with a precomposed é (NFC) and with e + combining acute (NFD).
const COMPOSED: &str = "Jos\u{e9}";
const DECOMPOSED: &str = "Jose\u{301}";
const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let request = server.client.post(server.at(path)).json(&body);
    split(request.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_buyer_spelled_two_ways_is_one_buyer_on_every_path() {
    let server = TestServer::start(Setup::Embedded).await;
    let (status, body) = server
        .create_sale(json!({"id": "one-each", "stock": 10, "per_user_limit": 1}))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, first) = server.buy("one-each", COMPOSED, 1, None).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["user_id"], COMPOSED);
    let (status, again) = server.buy("one-each", DECOMPOSED, 1, None).await;
    assert_eq!(status, 409, "the NFD spelling is the same buyer: {again}");
    assert_eq!(again["error"]["code"], "limit_exceeded", "{again}");
    // Case is kept: another buyer.
    let (status, body) = server.buy("one-each", "JOS\u{c9}", 1, None).await;
    assert_eq!(status, 201, "{body}");
    // Surrounding whitespace is refused, and sells nothing.
    for padded in [" ann", "ann ", "ann\u{3000}", "\u{a0}ann"] {
        let (status, body) = server.buy("one-each", padded, 1, None).await;
        assert_eq!(status, 422, "{padded:?}: {body}");
        assert_eq!(body["error"]["field"], "user_id", "{padded:?}: {body}");
    }
    let (_, sale) = server.get("/v1/sales/one-each").await;
    assert_eq!(sale["remaining"], 8, "{sale}");

    // A draw entry: the second spelling finds the first entry.
    let now = Utc::now();
    let (status, body) = server
        .create_sale(json!({
            "id": "drawn", "stock": 5, "allocation": "draw",
            "entries_open_at": now - TimeDelta::seconds(1),
            "entries_close_at": now + TimeDelta::hours(1),
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    let entries = "/v1/sales/drawn/entries";
    let (status, entry) = post(&server, entries, json!({"user_id": COMPOSED})).await;
    assert_eq!(status, 201, "{entry}");
    let (status, again) = post(&server, entries, json!({"user_id": DECOMPOSED})).await;
    assert_eq!(status, 200, "the same entry: {again}");
    let (status, mine) = server
        .get("/v1/sales/drawn/entries/me?user_id=Jose%CC%81")
        .await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["user_id"], COMPOSED, "{mine}");

    // A queue: the second spelling gets the first ticket.
    let (status, body) = server
        .create_sale(json!({"id": "queued", "stock": 5,
            "waiting_room": {"admit_per_second": 5, "admission_ttl_seconds": 120}}))
        .await;
    assert_eq!(status, 201, "{body}");
    let queue = "/v1/sales/queued/queue";
    let (status, ticket) = post(&server, queue, json!({"user_id": COMPOSED})).await;
    assert_eq!(status, 201, "{ticket}");
    let (status, again) = post(&server, queue, json!({"user_id": DECOMPOSED})).await;
    assert_eq!(status, 200, "the same ticket: {again}");
    assert_eq!(again["ticket"], ticket["ticket"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signed_in_buyer_is_their_sub_in_its_canonical_form() {
    let server = TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(SystemClock),
        |c| c.identity.jwt_secret = Some(SECRET.into()),
    )
    .await;
    let (status, body) = server
        .create_sale(json!({"id": "signed", "stock": 10}))
        .await;
    assert_eq!(status, 201, "{body}");
    let exp = Utc::now().timestamp() + 3_600;
    let token = |sub: &str| {
        encode(
            &Header::default(),
            &json!({"sub": sub, "exp": exp}),
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    };
    let (nfc, nfd) = (token(COMPOSED), token(DECOMPOSED));
    // The body may name the buyer in the other spelling.
    let request = server
        .client
        .post(server.at("/v1/sales/signed/purchases"))
        .bearer_auth(&nfd)
        .json(&json!({"user_id": COMPOSED}));
    let (status, order) = split(request.send().await.unwrap()).await;
    assert_eq!(status, 201, "{order}");
    assert_eq!(order["user_id"], COMPOSED, "{order}");
    // Either spelling's token reads the order.
    for token in [&nfc, &nfd] {
        let request = server
            .client
            .get(server.at(&format!(
                "/v1/orders/{}",
                order["order_id"].as_str().unwrap()
            )))
            .bearer_auth(token);
        let (status, read) = split(request.send().await.unwrap()).await;
        assert_eq!(status, 200, "{read}");
    }
}
