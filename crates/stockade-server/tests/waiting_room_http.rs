//! The waiting room over HTTP (issue 11, item 3), on the embedded default
//! and on two instances sharing one Redis and one PostgreSQL (and one
//! admission secret): the Admission-Token door, joins and polls, the
//! admission rate in real time, and a sell-out with 10,000 queued buyers.

mod common;
mod instances;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use common::{Setup, TOKEN, TestServer};
use instances::{Backends, Instance};

const SECRET: &str = "shared-admission-secret-0123456789abcdef";

/// One or more instances of one deployment; requests go round-robin.
struct Front {
    urls: Vec<String>,
    client: reqwest::Client,
    _embedded: Option<TestServer>,
    _instances: Vec<Instance>,
    _backends: Option<Backends>,
}

impl Front {
    async fn embedded() -> Self {
        let server = TestServer::start(Setup::Embedded).await;
        Self {
            urls: vec![server.url.clone()],
            client: client(),
            _embedded: Some(server),
            _instances: Vec::new(),
            _backends: None,
        }
    }

    /// Two instances on one Redis and one PostgreSQL, with one admission secret.
    async fn two_on_redis() -> Self {
        let backends = Backends::start(false).await;
        let mut instances = Vec::new();
        for _ in 0..2 {
            instances.push(
                Instance::start(&backends, |config| {
                    config.access.admission_secret = Some(SECRET.into());
                })
                .await,
            );
        }
        Self {
            urls: instances.iter().map(|i| i.url.clone()).collect(),
            client: client(),
            _embedded: None,
            _instances: instances,
            _backends: Some(backends),
        }
    }

    fn at(&self, n: usize, path: &str) -> String {
        format!("{}{path}", self.urls[n % self.urls.len()])
    }

    async fn create_sale(&self, body: Value) -> (u16, Value) {
        let request = self
            .client
            .post(self.at(0, "/v1/sales"))
            .bearer_auth(TOKEN)
            .json(&body);
        common::split(request.send().await.unwrap()).await
    }

    async fn join(&self, n: usize, sale: &str, user: &str) -> (u16, Value) {
        let request = self
            .client
            .post(self.at(n, &format!("/v1/sales/{sale}/queue")))
            .json(&json!({ "user_id": user }));
        common::split(request.send().await.unwrap()).await
    }

    async fn poll(&self, n: usize, ticket: &str) -> (u16, Value) {
        let request = self.client.get(self.at(n, &format!("/v1/queue/{ticket}")));
        common::split(request.send().await.unwrap()).await
    }

    async fn get(&self, n: usize, path: &str) -> (u16, Value) {
        common::split(self.client.get(self.at(n, path)).send().await.unwrap()).await
    }

    async fn buy(&self, n: usize, sale: &str, user: &str, token: Option<&str>) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.at(n, &format!("/v1/sales/{sale}/purchases")))
            .json(&json!({ "user_id": user, "quantity": 1 }));
        if let Some(token) = token {
            request = request.header("Admission-Token", token);
        }
        common::split(request.send().await.unwrap()).await
    }

    /// [`Front::buy`] as a careful client does it: a 503 (the sale being
    /// rebuilt on an instance that just learned of it, say) is retried
    /// after a pause, with the same admission, for up to 20 s.
    async fn buy_retrying(
        &self,
        n: usize,
        sale: &str,
        user: &str,
        token: Option<&str>,
    ) -> (u16, Value) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answer = self.buy(n, sale, user, token).await;
            if answer.0 != 503 || Instant::now() > deadline {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls until the ticket is admitted; its admission token.
    async fn admitted(&self, ticket: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        for n in 0.. {
            let (status, body) = self.poll(n, ticket).await;
            assert_eq!(status, 200, "{body}");
            if body["status"] == "admitted" {
                return body["admission_token"].as_str().unwrap().to_owned();
            }
            assert_eq!(body["status"], "waiting", "{body}");
            assert!(Instant::now() < deadline, "never admitted: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(128)
        .build()
        .unwrap()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    crate::$scenario(crate::Front::embedded().await).await;
                }
            )*
        }
        mod two_instances_on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    crate::$scenario(crate::Front::two_on_redis().await).await;
                }
            )*
        }
    };
}

on_both!(
    purchases_need_a_valid_admission_token,
    queue_routes_refuse_bad_input_and_change_nothing,
    the_admission_rate_is_kept_within_20_percent,
    a_sell_out_with_10000_queued_buyers_closes_the_queue,
    stock_that_comes_back_reopens_the_queue_and_admits_more,
    expired_holds_reopen_the_queue_and_admit_more,
    an_admission_buys_exactly_once,
);

async fn purchases_need_a_valid_admission_token(front: Front) {
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

async fn queue_routes_refuse_bad_input_and_change_nothing(front: Front) {
    let room =
        json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 2.0 });
    for (bad, field) in [
        (
            json!({ "admit_per_second": 0, "admission_ttl_seconds": 30 }),
            "admit_per_second",
        ),
        (
            json!({ "admit_per_second": 100001, "admission_ttl_seconds": 30 }),
            "admit_per_second",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 0 }),
            "admission_ttl_seconds",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 3601 }),
            "admission_ttl_seconds",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 0.5 }),
            "admission_factor",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 11 }),
            "admission_factor",
        ),
        (json!({ "admit_per_second": 5 }), "admission_ttl_seconds"),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "colour": 1 }),
            "colour",
        ),
    ] {
        let (status, body) = front
            .create_sale(json!({ "id": "bad-room", "stock": 10, "waiting_room": bad }))
            .await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{bad}: {body}"
        );
    }
    let (status, _) = front.get(0, "/v1/sales/bad-room").await;
    assert_eq!(status, 404, "a refused sale is not created");

    let (status, created) = front
        .create_sale(json!({ "id": "q", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, _) = front
        .create_sale(json!({ "id": "q", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 200, "the identical sale again");
    for other in [
        json!({ "id": "q", "stock": 10 }),
        json!({ "id": "q", "stock": 10, "waiting_room": { "admit_per_second": 6, "admission_ttl_seconds": 30, "admission_factor": 2.0 } }),
    ] {
        let (status, body) = front.create_sale(other).await;
        assert_eq!((status, code(&body)), (409, "sale_conflict"), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("waiting room"),
            "{body}"
        );
    }
    let (status, _) = front
        .create_sale(json!({ "id": "no-room", "stock": 10 }))
        .await;
    assert_eq!(status, 201);

    for (sale, body, status, expected) in [
        ("q", json!({}), 422, "user_id"),
        ("q", json!({ "user_id": "" }), 422, "user_id"),
        ("q", json!({ "user_id": "u", "extra": 1 }), 422, "extra"),
        ("no-room", json!({ "user_id": "u" }), 409, "no_waiting_room"),
        ("nope", json!({ "user_id": "u" }), 404, "unknown_sale"),
        ("bad id!", json!({ "user_id": "u" }), 422, "sale_id"),
    ] {
        let request = front
            .client
            .post(front.at(0, &format!("/v1/sales/{}/queue", sale.replace(' ', "%20"))))
            .json(&body);
        let (got, answer) = common::split(request.send().await.unwrap()).await;
        assert_eq!(got, status, "{sale} {body}: {answer}");
        assert!(
            answer.to_string().contains(expected),
            "{sale} {body}: {answer}"
        );
    }
    let request = front
        .client
        .post(front.at(0, "/v1/sales/q/queue"))
        .body("user_id=u");
    let (status, _) = common::split(request.send().await.unwrap()).await;
    assert_eq!(status, 415);

    for (ticket, status, expected) in [
        ("nonsense", 422, "ticket"),
        ("q.0123", 422, "ticket"),
        // The form of the tickets before they carried their place.
        ("q.0123456789abcdef0123456789abcdef", 422, "ticket"),
        // Well formed, but not minted by this service (a forged place or
        // buyer): unknown, and never put in the queue.
        (
            "q.0000000000000001.Zmlyc3Q.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
        (
            "nope.0000000000000001.Zmlyc3Q.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
        // Well formed, with a buyer part that is not even UTF-8.
        (
            "q.0000000000000001.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
    ] {
        let (got, answer) = front.poll(1, ticket).await;
        assert_eq!(got, status, "{ticket}: {answer}");
        assert!(answer.to_string().contains(expected), "{ticket}: {answer}");
    }
    // Nothing above joined anyone: the first buyer is first.
    let (status, joined) = front.join(1, "q", "first").await;
    assert_eq!(status, 201);
    assert_eq!(joined["position"], 1, "{joined}");
    assert!(joined["estimated_wait_seconds"].is_u64(), "{joined}");

    // The page.
    let response = front
        .client
        .get(front.at(0, "/queue/q"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = response.text().await.unwrap();
    assert!(page.contains(r#"data-sale="q""#) && page.contains(r#"<label for="user-id">"#));
    let (status, _) = front.get(0, "/queue/bad%20id").await;
    assert_eq!(status, 422);
    for asset in ["/assets/queue.js", "/assets/queue.css"] {
        let response = front.client.get(front.at(1, asset)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{asset}");
    }

    // The OpenAPI document describes the routes and the header.
    let (status, doc) = front.get(0, "/openapi.json").await;
    assert_eq!(status, 200);
    let paths = &doc["paths"];
    for (path, method, statuses) in [
        (
            "/v1/sales/{id}/queue",
            "post",
            &["200", "201", "404", "409", "422", "503"][..],
        ),
        (
            "/v1/queue/{ticket}",
            "get",
            &["200", "404", "422", "503"][..],
        ),
        ("/queue/{id}", "get", &["200", "422"][..]),
        ("/v1/sales/{id}/purchases", "post", &["403"][..]),
    ] {
        let responses = &paths[path][method]["responses"];
        for status in statuses {
            assert!(
                responses[status].is_object(),
                "{method} {path} lacks {status}: {responses}"
            );
        }
    }
    let parameters = paths["/v1/sales/{id}/purchases"]["post"]["parameters"]
        .as_array()
        .unwrap();
    assert!(
        parameters
            .iter()
            .any(|p| p["name"] == "Admission-Token" && p["in"] == "header"),
        "{parameters:?}"
    );
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["CreateSale"]["properties"]["waiting_room"].is_object(),
        "{}",
        schemas["CreateSale"]
    );
    assert!(schemas["QueueTicket"]["properties"]["admission_token"].is_object());
}

/// Admissions at 20 per second, measured over three seconds of real time
/// by the place of the last buyer in the queue.
async fn the_admission_rate_is_kept_within_20_percent(front: Front) {
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
async fn a_sell_out_with_10000_queued_buyers_closes_the_queue(front: Front) {
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
async fn stock_that_comes_back_reopens_the_queue_and_admits_more(front: Front) {
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
async fn expired_holds_reopen_the_queue_and_admit_more(front: Front) {
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

/// Issue 18, item 8: an admission token admits exactly one successful
/// purchase. A refused purchase leaves it unspent; of concurrent purchases
/// with one token (on both instances) exactly one succeeds and the others
/// are 403 `admission_spent`; a spent token stays spent, even after a
/// cancel; a replay of the spending purchase's Idempotency-Key still
/// answers its order.
async fn an_admission_buys_exactly_once(front: Front) {
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
