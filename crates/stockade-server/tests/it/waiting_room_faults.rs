//! A waiting room through Redis faults (issue 18, item 3): Redis restarted
//! empty (a failover to a replica that had not caught up loses the same
//! keys), then frozen longer than the fallback's quiet period. Every ticket
//! keeps its place in the queue, the room is listed again for the ticker
//! and admits again from its front, and it closes as sold out only when
//! the store says the sale is sold out. (While Redis is frozen the room
//! answers 503: its queue and admission records live in Redis, so no
//! purchase passes the door and the sale does not move to the fallback.)

use crate::common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Setup, TestServer};

const SALE: &str = "room-faults";
/// Buyers in the queue.
const BUYERS: usize = 20;
/// The stock, and (admission factor 1) the most admissions outstanding at
/// once: the other buyers wait, in order.
const STOCK: usize = 3;

async fn join(server: &TestServer, user: &str) -> (u16, Value) {
    let request = server
        .client
        .post(server.at(&format!("/v1/sales/{SALE}/queue")))
        .json(&json!({ "user_id": user }));
    common::split(request.send().await.unwrap()).await
}

async fn poll(server: &TestServer, ticket: &str) -> (u16, Value) {
    common::split(
        server
            .client
            .get(server.at(&format!("/v1/queue/{ticket}")))
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn buy(server: &TestServer, user: &str, token: &str) -> (u16, Value) {
    let request = server
        .client
        .post(server.at(&format!("/v1/sales/{SALE}/purchases")))
        .header("Admission-Token", token)
        .json(&json!({ "user_id": user, "quantity": 1 }));
    common::split(request.send().await.unwrap()).await
}

/// Every ticket's answer, in join order, retried while the queue answers
/// 503 (Redis just came back).
async fn poll_all(server: &TestServer, tickets: &[String]) -> Vec<Value> {
    let mut answers = Vec::new();
    for ticket in tickets {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, body) = poll(server, ticket).await;
            if status == 200 {
                answers.push(body);
                break;
            }
            assert_eq!(status, 503, "the ticket {ticket} was lost: {body}");
            assert!(
                Instant::now() < deadline,
                "the queue never came back: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    answers
}

/// The queue as the buyers see it: everyone admitted comes before everyone
/// waiting (in join order), positions grow in join order, and nobody's
/// ticket is closed (stock remains).
fn assert_in_order(answers: &[Value], when: &str) -> usize {
    let mut admitted = 0;
    let mut last_position = 0;
    for (n, answer) in answers.iter().enumerate() {
        match answer["status"].as_str() {
            Some("admitted") => {
                assert_eq!(
                    last_position, 0,
                    "{when}: buyer {n} admitted behind a waiting one: {answers:?}"
                );
                admitted += 1;
            }
            Some("waiting") => {
                let position = answer["position"].as_u64().unwrap();
                assert!(
                    position > last_position,
                    "{when}: buyer {n} at position {position}, not behind the one before ({last_position}): {answers:?}"
                );
                last_position = position;
            }
            _ => panic!("{when}: buyer {n}'s ticket is {answer}: {answers:?}"),
        }
    }
    admitted
}

/// Every ticket answered as admitted or waiting: none lost, none closed.
fn assert_all_present(answers: &[Value], when: &str) {
    for (n, answer) in answers.iter().enumerate() {
        match answer["status"].as_str() {
            Some("admitted") => {}
            Some("waiting") => assert!(
                answer["position"].as_u64().unwrap() >= 1,
                "{when}: buyer {n} has no position: {answers:?}"
            ),
            _ => panic!("{when}: buyer {n}'s ticket is {answer}: {answers:?}"),
        }
    }
}

async fn admitted_token(server: &TestServer, ticket: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = poll(server, ticket).await;
        if status == 200 && body["status"] == "admitted" {
            return body["admission_token"].as_str().unwrap().to_owned();
        }
        assert!(
            status == 503 || body["status"] == "waiting",
            "{status} {body}"
        );
        assert!(Instant::now() < deadline, "never admitted: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn buy_retrying(server: &TestServer, user: &str, token: &str) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = buy(server, user, token).await;
        if answer.0 != 503 || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_room_keeps_every_place_through_a_redis_restart_and_a_freeze() {
    let mut server = TestServer::start(Setup::RedisPostgresFallback).await;
    let mut redis = server.redis.take().unwrap();
    let (status, body) = server
        .create_sale(json!({ "id": SALE, "stock": STOCK,
            "waiting_room": { "admit_per_second": 50, "admission_ttl_seconds": 600, "admission_factor": 1.0 } }))
        .await;
    assert_eq!(status, 201, "{body}");
    let mut tickets = Vec::new();
    for n in 0..BUYERS {
        let (status, body) = join(&server, &format!("buyer-{n}")).await;
        assert_eq!(status, 201, "{body}");
        tickets.push(body["ticket"].as_str().unwrap().to_owned());
    }
    // The first STOCK buyers are admitted; the others wait behind them.
    admitted_token(&server, &tickets[STOCK - 1]).await;
    let before = poll_all(&server, &tickets).await;
    assert_eq!(assert_in_order(&before, "before the faults"), STOCK);

    // Redis loses every key: the queue, the room's listing, the sale.
    redis.restart().unwrap();
    // Each poll puts its lost ticket back at its own place, and the ticker
    // admits the front again meanwhile: positions seen one poll after
    // another are of a moving queue, so only "nobody lost, nobody closed"
    // holds here; the order is checked once the front is admitted again.
    let after_restart = poll_all(&server, &tickets).await;
    assert_all_present(&after_restart, "after Redis restarted empty");
    // The room is listed and ticked again: the front of the queue is
    // admitted again (their admissions were lost with the keys), in order,
    // and the first buyer buys with the admission it had before.
    admitted_token(&server, &tickets[STOCK - 1]).await;
    let readmitted = poll_all(&server, &tickets).await;
    assert_eq!(assert_in_order(&readmitted, "once ticked again"), STOCK);
    let token = before[0]["admission_token"].as_str().unwrap();
    let (status, order) = buy_retrying(&server, "buyer-0", token).await;
    assert_eq!(status, 201, "{order}");

    // Frozen longer than the fallback's quiet period: the queue (in Redis)
    // waits it out, nobody's place changes, and the rebuilt engine's zero
    // stock while it is rebuilt closes nothing.
    redis.pause();
    tokio::time::sleep(Duration::from_secs(6)).await;
    redis.resume();
    let after_freeze = poll_all(&server, &tickets).await;
    assert_in_order(&after_freeze, "after Redis was frozen");

    // The rest of the stock sells through the queue, in order; only then,
    // with the store sold out, does the queue close.
    for (n, ticket) in tickets.iter().enumerate().take(STOCK).skip(1) {
        let token = admitted_token(&server, ticket).await;
        let (status, order) = buy_retrying(&server, &format!("buyer-{n}"), &token).await;
        assert_eq!(status, 201, "{order}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = poll(&server, &tickets[BUYERS - 1]).await;
        if status == 200 && body["status"] == "closed" {
            assert_eq!(body["closed_reason"], "sold_out", "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sold-out queue never closed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(server.all_orders(SALE).await.len(), STOCK);
}

/// A room's sale that the store holds and the engine does not (being
/// created: saved, not yet in Redis; or lost) is ticked without a rebuild:
/// a ticker cannot tell the two apart, and rebuilding a sale being created
/// answers its first buyers 503 `rebuilding`. A client's read still finds
/// a lost sale and rebuilds it. Deterministic: the sale is saved in the
/// store alone, and the ticker lists it again from the store within a
/// second (on the old code it rebuilt it every time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticker_never_rebuilds_a_sale_the_engine_does_not_hold_yet() {
    use stockade_core::SaleSpec;
    use stockade_core::room::RoomConfig;
    let server = TestServer::start(Setup::RedisPostgres).await;
    let state = server.state();
    let spec = SaleSpec::builder("not-yet", 5).unwrap().build().unwrap();
    let room = RoomConfig {
        admit_per_second: 50,
        admission_ttl: Duration::from_secs(30),
        admission_factor_milli: RoomConfig::DEFAULT_FACTOR_MILLI,
    };
    state
        .store()
        .save_sale_with_room(&spec, Some(&room), None, chrono::Utc::now())
        .await
        .unwrap();
    // The relister runs once a second: give it three, and the ticks after.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let text = server.metrics_text().await;
    assert!(
        state
            .waiting_rooms()
            .backend()
            .rooms()
            .await
            .unwrap()
            .iter()
            .any(|s| s.as_str() == "not-yet"),
        "the ticker listed the room again from the store"
    );
    assert_eq!(
        common::metric_sum(&text, "stockade_rebuilds_total"),
        0.0,
        "a ticker rebuilt a sale the engine did not hold"
    );
    // A client's read is what finds a lost sale.
    let (status, _) = server.get("/v1/sales/not-yet").await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::metric_sum(&server.metrics_text().await, "stockade_rebuilds_total") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the read did not rebuild the sale"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
