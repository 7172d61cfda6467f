//! The Admission-Token door: purchases need a valid token, and an admission
//! buys exactly once.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common;
use crate::waiting_room_http::front::{Front, code};

pub(crate) async fn purchases_need_a_valid_admission_token(front: Front) {
    let room = json!({ "admit_per_second": 50, "admission_ttl_seconds": 30 });
    let (status, sale) = front
        .create_sale(json!({ "id": "door", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 201, "{sale}");
    assert_eq!(
        sale["waiting_room"],
        json!({ "admit_per_second": 50, "admission_ttl_seconds": 30, "admission_factor": 1.5 })
    );
    let (status, other) = front
        .create_sale(json!({ "id": "door-2", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 201, "{other}");
    let (status, sale) = front.get(1, "/v1/sales/door").await;
    assert_eq!(status, 200);
    assert_eq!(sale["waiting_room"]["admit_per_second"], 50);

    // No token, or a made-up one: refused, nothing sold.
    for token in [None, Some("made-up"), Some("a.b")] {
        let (status, body) = front.buy(0, "door", "alice", token).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(code(&body), "admission_required");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("/v1/sales/door/queue"),
            "{body}"
        );
    }

    let (status, joined) = front.join(0, "door", "alice").await;
    assert_eq!(status, 201, "{joined}");
    assert_eq!(joined["sale_id"], "door");
    assert!(
        joined["status"] == "waiting" || joined["status"] == "admitted",
        "{joined}"
    );
    let ticket = joined["ticket"].as_str().unwrap().to_owned();
    let (status, again) = front.join(1, "door", "alice").await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["ticket"], ticket.as_str());
    let token = front.admitted(&ticket).await;
    let (_, polled) = front.poll(1, &ticket).await;
    assert_eq!(
        polled["admission_token"],
        token.as_str(),
        "every instance shows the same token"
    );
    assert!(polled["admission_expires_at"].is_string());

    // Bound to its buyer and its sale.
    let (status, body) = front.buy(0, "door", "bob", Some(&token)).await;
    assert_eq!((status, code(&body)), (403, "admission_required"), "{body}");
    let (status, body) = front.buy(1, "door-2", "alice", Some(&token)).await;
    assert_eq!((status, code(&body)), (403, "admission_required"), "{body}");
    // A tampered token.
    let mut tampered = token.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let (status, body) = front.buy(1, "door", "alice", Some(&tampered)).await;
    assert_eq!((status, code(&body)), (403, "admission_required"), "{body}");
    let (_, sale) = front.get(0, "/v1/sales/door").await;
    assert_eq!(sale["remaining"], 10, "refused purchases sell nothing");

    // The right buyer, on any instance: sold.
    let (status, order) = front.buy(1, "door", "alice", Some(&token)).await;
    assert_eq!(status, 201, "{order}");
    assert_eq!(order["user_id"], "alice");

    // An expired token is refused.
    let (status, _) = front
        .create_sale(json!({ "id": "door-short", "stock": 10,
            "waiting_room": { "admit_per_second": 50, "admission_ttl_seconds": 1 } }))
        .await;
    assert_eq!(status, 201);
    let (_, joined) = front.join(0, "door-short", "carol").await;
    let token = front.admitted(joined["ticket"].as_str().unwrap()).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (status, body) = front.buy(0, "door-short", "carol", Some(&token)).await;
    assert_eq!((status, code(&body)), (403, "admission_required"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    let (_, polled) = front.poll(1, joined["ticket"].as_str().unwrap()).await;
    assert_eq!(polled["status"], "closed");
    assert_eq!(polled["closed_reason"], "admission_expired");

    // A sale without a waiting room sells as before.
    let (status, _) = front
        .create_sale(json!({ "id": "plain", "stock": 1 }))
        .await;
    assert_eq!(status, 201);
    let (status, body) = front.buy(0, "plain", "dave", None).await;
    assert_eq!(status, 201, "{body}");
}

/// Issue 18, item 8: an admission token admits exactly one successful
/// purchase. A refused purchase leaves it unspent; of concurrent purchases
/// with one token (on both instances) exactly one succeeds and the others
/// are 403 `admission_spent`; a spent token stays spent, even after a
/// cancel; a replay of the spending purchase's Idempotency-Key still
/// answers its order.
pub(crate) async fn an_admission_buys_exactly_once(front: Front) {
    let (status, _) = front
        .create_sale(json!({ "id": "once", "stock": 20, "per_user_limit": 5,
            "waiting_room": { "admit_per_second": 50, "admission_ttl_seconds": 60 } }))
        .await;
    assert_eq!(status, 201);
    let (_, joined) = front.join(0, "once", "alice").await;
    let token = front.admitted(joined["ticket"].as_str().unwrap()).await;

    // Refused (over the per-user limit): nothing sold, the token unspent.
    let request = front
        .client
        .post(front.at(0, "/v1/sales/once/purchases"))
        .header("Admission-Token", &token)
        .json(&json!({ "user_id": "alice", "quantity": 6 }));
    let (status, body) = common::split(request.send().await.unwrap()).await;
    assert_eq!(status, 409, "{body}");

    // Eight purchases at once with the one token: exactly one order.
    let answers: Vec<(u16, Value)> = futures::stream::iter(0..8)
        .map(|n| front.buy(n, "once", "alice", Some(&token)))
        .buffer_unordered(8)
        .collect()
        .await;
    let sold: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(sold.len(), 1, "one admission, one purchase: {answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(
            (*status, code(body)),
            (403, "admission_spent"),
            "{answers:?}"
        );
    }
    let order = sold[0]["order_id"].as_str().unwrap().to_owned();
    let (_, sale) = front.get(1, "/v1/sales/once").await;
    assert_eq!(sale["remaining"], 19, "{sale}");

    // Spent for good: a cancel gives the item back, not the admission.
    let cancel = front
        .client
        .post(front.at(1, &format!("/v1/orders/{order}/cancel")));
    let (status, body) = common::split(cancel.send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = front.buy(1, "once", "alice", Some(&token)).await;
    assert_eq!((status, code(&body)), (403, "admission_spent"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/sales/once/queue"),
        "says how to get another: {body}"
    );

    // A keyed purchase spends the admission; its replay still answers the
    // order, another key does not buy again.
    let (_, joined) = front.join(1, "once", "bob").await;
    let token = front.admitted(joined["ticket"].as_str().unwrap()).await;
    let keyed = |n: usize, key: &str| {
        front
            .client
            .post(front.at(n, "/v1/sales/once/purchases"))
            .header("Admission-Token", &token)
            .header("Idempotency-Key", key)
            .json(&json!({ "user_id": "bob", "quantity": 1 }))
    };
    let (status, first) = common::split(keyed(0, "bob-1").send().await.unwrap()).await;
    assert_eq!(status, 201, "{first}");
    let (status, replay) = common::split(keyed(1, "bob-1").send().await.unwrap()).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["order_id"], first["order_id"]);
    let (status, body) = common::split(keyed(0, "bob-2").send().await.unwrap()).await;
    assert_eq!((status, code(&body)), (403, "admission_spent"), "{body}");
    let (_, sale) = front.get(0, "/v1/sales/once").await;
    assert_eq!(
        sale["remaining"], 19,
        "alice's item came back, bob's sold: {sale}"
    );
}
