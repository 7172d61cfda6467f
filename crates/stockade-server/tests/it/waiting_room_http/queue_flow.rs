//! The queue moving: the admission rate, a sell-out with 10,000 queued
//! buyers closing it, and stock coming back (returned or expired holds)
//! reopening it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common;
use crate::waiting_room_http::front::{Front, code};

/// Admissions at 20 per second, measured over three seconds of real time
/// by the place of the last buyer in the queue.
pub(crate) async fn the_admission_rate_is_kept_within_20_percent(front: Front) {
    const RATE: f64 = 20.0;
    let (status, _) = front
        .create_sale(json!({ "id": "rate", "stock": 100000,
            "waiting_room": { "admit_per_second": 20, "admission_ttl_seconds": 600 } }))
        .await;
    assert_eq!(status, 201);
    let mut last = String::new();
    for i in 0..150 {
        let (status, joined) = front.join(i, "rate", &format!("buyer-{i}")).await;
        assert_eq!(status, 201, "{joined}");
        last = joined["ticket"].as_str().unwrap().to_owned();
    }
    let position = |body: &Value| {
        body["position"]
            .as_u64()
            .unwrap_or_else(|| panic!("{body}"))
    };
    let (_, first) = front.poll(0, &last).await;
    let (start, start_position) = (Instant::now(), position(&first));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, second) = front.poll(1, &last).await;
    let elapsed = start.elapsed().as_secs_f64();
    let admitted = (start_position - position(&second)) as f64;
    let rate = admitted / elapsed;
    assert!(
        (rate - RATE).abs() <= RATE * 0.2,
        "admitted {admitted} in {elapsed:.2} s: {rate:.1} per second, configured {RATE}"
    );
}

/// 10,000 buyers queue for 100 items. At most 150 are ever admitted (100
/// left x 1.5), every admitted buyer's purchase is answered (an order or
/// sold out), and once the items are gone every waiting ticket is closed.
pub(crate) async fn a_sell_out_with_10000_queued_buyers_closes_the_queue(front: Front) {
    const BUYERS: usize = 10_000;
    let (status, _) = front
        .create_sale(json!({ "id": "crowd", "stock": 100,
            "waiting_room": { "admit_per_second": 400, "admission_ttl_seconds": 600 } }))
        .await;
    assert_eq!(status, 201);
    let front = &front;
    let tickets: Vec<(String, String)> = futures::stream::iter(0..BUYERS)
        .map(|i| async move {
            let user = format!("buyer-{i}");
            let (status, joined) = front.join(i, "crowd", &user).await;
            assert_eq!(status, 201, "{joined}");
            (user, joined["ticket"].as_str().unwrap().to_owned())
        })
        .buffer_unordered(64)
        .collect()
        .await;

    // Buyers poll; each admitted one buys at once. Stop when nobody waits.
    let mut answers: HashMap<String, u16> = HashMap::new();
    let mut closed = 0;
    let mut waiting: Vec<(String, String)> = tickets;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !waiting.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} buyers still waiting",
            waiting.len()
        );
        let polled: Vec<((String, String), Value)> =
            futures::stream::iter(waiting.into_iter().enumerate())
                .map(|(n, buyer)| async move {
                    let (status, body) = front.poll(n, &buyer.1).await;
                    assert_eq!(status, 200, "{body}");
                    (buyer, body)
                })
                .buffer_unordered(64)
                .collect()
                .await;
        waiting = Vec::new();
        let mut admitted = Vec::new();
        for (buyer, body) in polled {
            match body["status"].as_str().unwrap() {
                "waiting" => waiting.push(buyer),
                "admitted" => {
                    admitted.push((buyer, body["admission_token"].as_str().unwrap().to_owned()))
                }
                "closed" => {
                    assert_eq!(body["closed_reason"], "sold_out", "{body}");
                    closed += 1;
                }
                other => panic!("{other}"),
            }
        }
        let bought: Vec<(String, u16, Value)> =
            futures::stream::iter(admitted.into_iter().enumerate())
                .map(|(n, ((user, _), token))| async move {
                    let (status, body) = front.buy(n, "crowd", &user, Some(&token)).await;
                    (user, status, body)
                })
                .buffer_unordered(32)
                .collect()
                .await;
        for (user, status, body) in bought {
            assert!(
                status == 201 || (status == 409 && code(&body) == "sold_out"),
                "an admitted buyer is answered with an order or sold out: {status} {body}"
            );
            assert!(answers.insert(user, status).is_none(), "admitted twice");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let orders = answers.values().filter(|&&s| s == 201).count();
    assert_eq!(orders, 100, "every item sold");
    assert!(
        answers.len() <= 150,
        "{} admitted for 100 items",
        answers.len()
    );
    assert_eq!(answers.len() + closed, BUYERS, "every buyer got an answer");
    let (status, body) = front.join(1, "crowd", "late-comer").await;
    assert_eq!((status, code(&body)), (409, "sold_out"), "{body}");
}

/// Admission factor 1: as many outstanding admissions as items left. Two
/// buyers buy both items (using their admissions up), the queue closes;
/// a cancel brings one back, the queue reopens and the next buyer is
/// admitted and buys it.
pub(crate) async fn stock_that_comes_back_reopens_the_queue_and_admits_more(front: Front) {
    let (status, _) = front
        .create_sale(json!({ "id": "back", "stock": 2,
            "waiting_room": { "admit_per_second": 50, "admission_ttl_seconds": 600, "admission_factor": 1.0 } }))
        .await;
    assert_eq!(status, 201);
    let mut orders = Vec::new();
    for (n, user) in ["ann", "ben"].into_iter().enumerate() {
        let (_, joined) = front.join(n, "back", user).await;
        let token = front.admitted(joined["ticket"].as_str().unwrap()).await;
        let (status, order) = front.buy(n, "back", user, Some(&token)).await;
        assert_eq!(status, 201, "{order}");
        orders.push(order["order_id"].as_str().unwrap().to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = front.join(1, "back", "cat").await;
        if status == 409 {
            assert_eq!(code(&body), "sold_out", "{body}");
            break;
        }
        // Joined before the ticker saw the sell-out: the ticket closes.
        assert!(status == 201 || status == 200, "{status} {body}");
        assert!(Instant::now() < deadline, "the queue never closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancel = front
        .client
        .post(front.at(0, &format!("/v1/orders/{}/cancel", orders[0])));
    let (status, body) = common::split(cancel.send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let ticket = loop {
        let (status, body) = front.join(1, "back", "cat").await;
        if status == 201 || status == 200 {
            break body["ticket"].as_str().unwrap().to_owned();
        }
        assert_eq!(code(&body), "sold_out", "{body}");
        assert!(Instant::now() < deadline, "the queue never reopened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let token = front.admitted(&ticket).await;
    let (status, order) = front.buy(0, "back", "cat", Some(&token)).await;
    assert_eq!(status, 201, "{order}");
}

/// As above, with 3-second payment holds nobody pays: the queue closes on
/// the sell-out, the sweeper expires both holds, the items come back, the
/// queue reopens and the next buyer is admitted and buys.
pub(crate) async fn expired_holds_reopen_the_queue_and_admit_more(front: Front) {
    let (status, _) = front
        .create_sale(json!({ "id": "unpaid", "stock": 2, "hold_seconds": 3,
            "waiting_room": { "admit_per_second": 50, "admission_ttl_seconds": 600, "admission_factor": 1.0 } }))
        .await;
    assert_eq!(status, 201);
    for (n, user) in ["ann", "ben"].into_iter().enumerate() {
        let (_, joined) = front.join(n, "unpaid", user).await;
        let token = front.admitted(joined["ticket"].as_str().unwrap()).await;
        let (status, order) = front.buy_retrying(n, "unpaid", user, Some(&token)).await;
        assert_eq!(
            (status, order["status"].as_str()),
            (201, Some("held")),
            "{order}"
        );
    }
    // Sold out (held): the queue closes.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, body) = front.join(1, "unpaid", "cat").await;
        if status == 409 {
            assert_eq!(code(&body), "sold_out", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "the queue never closed: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The holds expire: the queue reopens.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ticket = loop {
        let (status, body) = front.join(1, "unpaid", "cat").await;
        if status == 201 || status == 200 {
            break body["ticket"].as_str().unwrap().to_owned();
        }
        assert_eq!(code(&body), "sold_out", "{body}");
        assert!(
            Instant::now() < deadline,
            "the queue never reopened after the holds expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let token = front.admitted(&ticket).await;
    let (status, order) = front.buy_retrying(0, "unpaid", "cat", Some(&token)).await;
    assert_eq!(
        (status, order["status"].as_str()),
        (201, Some("held")),
        "{order}"
    );
}
