//! Rate limits (issue 11, item 2): a burst, then 429 `rate_limited` with
//! `Retry-After` and the IETF draft headers; recovery once the window has
//! passed (a manual clock, no sleeping); per client address with
//! `X-Forwarded-For` believed only from trusted proxies; shared by two
//! instances on one Redis; and a limited request costs no engine or store
//! work (Redis commands and PostgreSQL statements counted).

use crate::common;
use crate::instances;

use std::sync::Arc;
use std::time::Instant;

use chrono::{TimeDelta, Utc};
use common::{Setup, TOKEN, TestServer, Timing, split};
use instances::{Backends, Instance};
use serde_json::{Value, json};
use stockade_core::ManualClock;
use stockade_server::config::{RateLimitSettings, RawConfig};

/// Rate-limit settings from `(file key, text)` pairs. The tests' rates are
/// per minute: slow enough that a test never sees a limit replenish by
/// itself.
fn limits(pairs: &[(&str, &str)]) -> RateLimitSettings {
    RawConfig::from_pairs(pairs).unwrap().limits
}

struct Answer {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let headers = response.headers().clone();
    let (status, body) = split(response).await;
    Answer {
        status,
        body,
        headers,
    }
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header: {:?}", answer.headers))
        .to_str()
        .unwrap()
}

async fn purchase(url: &str, client: &reqwest::Client, sale: &str, user: &str) -> Answer {
    send(
        client
            .post(format!("{url}/v1/sales/{sale}/purchases"))
            .json(&json!({"user_id": user, "quantity": 1})),
    )
    .await
}

/// An embedded server on a manual clock with `limits`.
async fn embedded(clock: &ManualClock, limits: RateLimitSettings) -> TestServer {
    TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(clock.clone()),
        move |c: &mut RawConfig| c.limits = limits,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_gets_a_burst_then_429_and_more_once_the_window_passes() {
    let clock = ManualClock::new(Utc::now());
    let server = embedded(
        &clock,
        limits(&[("rate_limit_buyer", "6/m"), ("rate_limit_buyer_burst", "3")]),
    )
    .await;
    let (status, _) = server
        .create_sale(json!({"id": "limited", "stock": 100, "per_user_limit": 100}))
        .await;
    assert_eq!(status, 201);
    for i in 0..3 {
        let answer = purchase(&server.url, &server.client, "limited", "greedy").await;
        assert_eq!(answer.status, 201, "purchase {i}: {}", answer.body);
    }
    let engine_before = purchases_decided(&server).await;
    let limited = purchase(&server.url, &server.client, "limited", "greedy").await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(limited.body["error"]["code"], "rate_limited");
    // One request every 10 s: the next one in 10 s, the whole burst back in 30 s.
    assert_eq!(header(&limited, "retry-after"), "10");
    assert_eq!(header(&limited, "ratelimit-policy"), "\"buyer\";q=3;w=30");
    assert_eq!(header(&limited, "ratelimit"), "\"buyer\";r=0;t=30");
    // Limited requests never reach the purchase path.
    for _ in 0..20 {
        let answer = purchase(&server.url, &server.client, "limited", "greedy").await;
        assert_eq!(answer.status, 429);
    }
    assert_eq!(purchases_decided(&server).await, engine_before);
    let (_, sale) = server.get("/v1/sales/limited").await;
    assert_eq!(sale["sold"], 3, "{sale}");
    // Another buyer has their own allowance.
    let other = purchase(&server.url, &server.client, "limited", "patient").await;
    assert_eq!(other.status, 201, "{}", other.body);
    // Not yet...
    clock.advance(TimeDelta::seconds(9));
    let early = purchase(&server.url, &server.client, "limited", "greedy").await;
    assert_eq!((early.status, header(&early, "retry-after")), (429, "1"));
    // ...then one request's worth is back, and after the window the burst.
    clock.advance(TimeDelta::seconds(1));
    let again = purchase(&server.url, &server.client, "limited", "greedy").await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(
        purchase(&server.url, &server.client, "limited", "greedy")
            .await
            .status,
        429
    );
    clock.advance(TimeDelta::seconds(30));
    for i in 0..3 {
        let answer = purchase(&server.url, &server.client, "limited", "greedy").await;
        assert_eq!(
            answer.status, 201,
            "after the window, purchase {i}: {}",
            answer.body
        );
    }
    assert_eq!(
        purchase(&server.url, &server.client, "limited", "greedy")
            .await
            .status,
        429
    );
}

/// Purchases that reached the purchase path (every outcome), from /metrics.
async fn purchases_decided(server: &TestServer) -> f64 {
    decided_in(&server.metrics_text().await)
}

/// Purchases that went past the door, from a `/metrics` text: every
/// outcome of `stockade_purchases_total` but `rate_limited`.
fn decided_in(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("stockade_purchases_total") && !l.contains("rate_limited"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_are_limited_by_address_and_forwarded_for_only_from_trusted_proxies() {
    let clock = ManualClock::new(Utc::now());
    let behind_proxy = embedded(
        &clock,
        limits(&[
            ("rate_limit_ip", "1/m"),
            ("rate_limit_ip_burst", "2"),
            ("trusted_proxies", "127.0.0.0/8"),
        ]),
    )
    .await;
    let url = &behind_proxy.url;
    let client = &behind_proxy.client;
    let from = |ip: &str| {
        client
            .get(format!("{url}/v1/sales/nothing-here"))
            .header("X-Forwarded-For", format!("198.51.100.200, {ip}"))
    };
    // The proxy (loopback, trusted) says who the client is.
    for _ in 0..2 {
        assert_eq!(send(from("203.0.113.1")).await.status, 404);
    }
    let limited = send(from("203.0.113.1")).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(header(&limited, "ratelimit-policy"), "\"ip\";q=2;w=120");
    // Another client behind the same proxy is not affected.
    assert_eq!(send(from("203.0.113.2")).await.status, 404);
    // Every /v1 route counts, buyers' and anonymous alike; the admin never.
    let purchase = send(
        client
            .post(format!("{url}/v1/sales/s/purchases"))
            .header("X-Forwarded-For", "203.0.113.1")
            .json(&json!({"user_id": "u"})),
    )
    .await;
    assert_eq!(purchase.status, 429);
    for _ in 0..5 {
        let admin = send(
            client
                .get(format!("{url}/v1/sales/nothing-here"))
                .header("X-Forwarded-For", "203.0.113.1")
                .bearer_auth(TOKEN),
        )
        .await;
        assert_eq!(admin.status, 404);
    }
    // Operations endpoints are not limited.
    let health = send(
        client
            .get(format!("{url}/healthz"))
            .header("X-Forwarded-For", "203.0.113.1"),
    )
    .await;
    assert_eq!(health.status, 200);

    // Without trusted proxies the header is anyone's word: ignored, and
    // every request here comes from 127.0.0.1.
    let direct = embedded(
        &clock,
        limits(&[("rate_limit_ip", "1/m"), ("rate_limit_ip_burst", "2")]),
    )
    .await;
    let statuses: Vec<u16> =
        statuses_claiming(&direct, &["192.0.2.1", "192.0.2.2", "192.0.2.3"]).await;
    assert_eq!(
        statuses,
        vec![404, 404, 429],
        "X-Forwarded-For must be ignored"
    );
}

async fn statuses_claiming(server: &TestServer, claimed: &[&str]) -> Vec<u16> {
    let mut statuses = Vec::new();
    for ip in claimed {
        let answer = send(
            server
                .client
                .get(server.at("/v1/sales/nothing-here"))
                .header("X-Forwarded-For", *ip),
        )
        .await;
        statuses.push(answer.status);
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_on_one_redis_share_a_buyers_limit_and_limited_requests_cost_nothing() {
    let backends = Backends::start(true).await;
    let clock = ManualClock::new(Utc::now());
    let limits = limits(&[("rate_limit_buyer", "6/m"), ("rate_limit_buyer_burst", "4")]);
    let adjust = |c: &mut RawConfig| c.limits = limits.clone();
    let a = Instance::start_with_clock(&backends, Arc::new(clock.clone()), adjust).await;
    let b = Instance::start_with_clock(&backends, Arc::new(clock.clone()), adjust).await;
    let (status, _) = a
        .create_sale(json!({"id": "shared", "stock": 1000, "per_user_limit": 1000}))
        .await;
    assert_eq!(status, 201);
    // The burst of 4 is spent across both instances.
    for instance in [&a, &b, &a, &b] {
        let answer = purchase(&instance.url, &instance.client, "shared", "busy").await;
        assert_eq!(answer.status, 201, "{}", answer.body);
    }
    for instance in [&a, &b] {
        let answer = purchase(&instance.url, &instance.client, "shared", "busy").await;
        assert_eq!(answer.status, 429, "{}", answer.body);
        assert_eq!(header(&answer, "retry-after"), "10");
    }

    // 200 limited requests: one limiter call each, no engine script, no
    // store statement (beyond what the reconcilers do meanwhile).
    let commands_before = backends.redis_commands();
    let scripts_before = backends.redis.script_calls().unwrap();
    let statements_before = backends.statements().await;
    let decided_before = decided_in(&a.metrics_text().await);
    let started = Instant::now();
    let mut limited = 0;
    for i in 0..200 {
        let instance = if i % 2 == 0 { &a } else { &b };
        let answer = purchase(&instance.url, &instance.client, "shared", "busy").await;
        assert_eq!(answer.status, 429, "{}", answer.body);
        limited += 1;
    }
    let elapsed = started.elapsed();
    let commands = backends.redis_commands() - commands_before;
    let scripts = backends.redis.script_calls().unwrap() - scripts_before;
    let statements = backends.statements().await - statements_before;
    eprintln!(
        "{limited} limited requests in {elapsed:?}: {commands} Redis commands ({scripts} script calls), {statements} store statements"
    );
    // Each check is one script call, which reads its key (INFO counts the
    // GET inside the script too) and, being over the limit, writes nothing.
    let background = 5 * (elapsed.as_secs() + 2);
    assert!(
        (limited..=limited + background).contains(&scripts),
        "{scripts} script calls for {limited} limited requests"
    );
    // Besides the checks: each of the two instances' background work every
    // second (a reconciler pass and an engine-view report with its PING).
    let background_commands = 2 * 6 * (elapsed.as_secs() + 2);
    assert!(
        commands <= 2 * limited + background_commands,
        "{commands} Redis commands for {limited} limited requests"
    );
    // Counted from whole seconds, rounded up, with three more: a loaded
    // machine runs passes that were due before the count began late, inside
    // it (25 statements once for 200 requests in under a second).
    assert!(
        statements <= 12 * (elapsed.as_secs_f64().ceil() as i64 + 3),
        "{statements} store statements for {limited} limited requests"
    );
    assert_eq!(decided_in(&a.metrics_text().await), decided_before);
    let (_, sale) = a.get("/v1/sales/shared").await;
    assert_eq!(sale["sold"], 4, "{sale}");

    // After the window, the buyer's whole burst is back on both.
    clock.advance(TimeDelta::seconds(40));
    for instance in [&b, &a, &b, &a] {
        let answer = purchase(&instance.url, &instance.client, "shared", "busy").await;
        assert_eq!(answer.status, 201, "{}", answer.body);
    }
    assert_eq!(
        purchase(&a.url, &a.client, "shared", "busy").await.status,
        429
    );
    // The limiter's key expires with its window: nothing is left behind.
    let reply = backends
        .redis
        .command(&["PTTL", "stockade:limit:buyer:busy"])
        .unwrap();
    let ttl: i64 = reply.trim().trim_start_matches(':').parse().unwrap();
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the key outlives its window: {reply:?}"
    );
}

/// Issue 18, item 5: with Redis frozen (SIGSTOP), a limited route answers
/// in well under the engine's 2 s timeout, is still limited (by this
/// instance's share of the rate: half, of two instances), every such check
/// is counted, and the shared limit is back once Redis answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_redis_costs_a_short_timeout_then_this_instances_share_limits() {
    let backends = Backends::start(false).await;
    let clock = ManualClock::new(Utc::now());
    let limits = limits(&[
        ("rate_limit_ip", "6/m"),
        ("rate_limit_ip_burst", "4"),
        ("trusted_proxies", "127.0.0.0/8"),
        ("rate_limit_instances", "2"),
    ]);
    let adjust = |c: &mut RawConfig| c.limits = limits.clone();
    let server = Instance::start_with_clock(&backends, Arc::new(clock.clone()), adjust).await;
    let from = |client: &str| {
        server
            .client
            .get(server.at("/v1/sales/nothing-here"))
            .header("X-Forwarded-For", client)
    };
    let fell_back = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("stockade_rate_limit_fallbacks_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = fell_back(&server.metrics_text().await);

    backends.redis.pause();
    let mut statuses = Vec::new();
    for i in 0..6 {
        let started = Instant::now();
        let answer = send(from("203.0.113.1")).await;
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_millis(500),
            "request {i} with Redis frozen took {took:?} (status {})",
            answer.status
        );
        statuses.push(answer.status);
    }
    let counted = fell_back(&server.metrics_text().await) - before;
    backends.redis.resume();
    // This instance's share (half the burst of 4) while Redis hangs.
    assert_eq!(statuses, vec![404, 404, 429, 429, 429, 429]);
    assert_eq!(counted, 6.0, "every check decided locally is counted");

    // Redis answers again: one request (each from a new client) soon asks
    // it and stops counting as a local decision.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let mut probes = 0;
    loop {
        let counted = fell_back(&server.metrics_text().await);
        send(from(&format!("198.51.100.{probes}"))).await;
        probes += 1;
        if fell_back(&server.metrics_text().await) == counted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the limiter never went back to Redis"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The shared limit decides again: the whole burst of 4, not the share.
    let counted = fell_back(&server.metrics_text().await);
    let mut after = Vec::new();
    for _ in 0..5 {
        after.push(send(from("203.0.113.2")).await.status);
    }
    assert_eq!(
        after,
        vec![404, 404, 404, 404, 429],
        "the shared limit is back"
    );
    assert_eq!(fell_back(&server.metrics_text().await), counted);
}

/// Issue 36, item 4: the share each instance enforces while Redis does not
/// answer comes from the live instances the store knows (their engine
/// views), not from `--rate-limit-instances` kept equal to the replica
/// count by hand: two instances, none told how many there are, each
/// enforces half the burst with Redis frozen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_local_share_counts_the_live_instances_in_the_store() {
    let backends = Backends::start(false).await;
    let clock = ManualClock::new(Utc::now());
    let limits = limits(&[
        ("rate_limit_ip", "6/m"),
        ("rate_limit_ip_burst", "4"),
        ("trusted_proxies", "127.0.0.0/8"),
    ]);
    let adjust = |c: &mut RawConfig| c.limits = limits.clone();
    let first = Instance::start_with_clock(&backends, Arc::new(clock.clone()), adjust).await;
    let _second = Instance::start_with_clock(&backends, Arc::new(clock.clone()), adjust).await;
    // Each instance reports to the store once a second and counts the
    // live ones after its report.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let counted = first.state.rate_limiter().instances();
        if counted == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the limiter never counted the 2 live instances (it counts {counted})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    backends.redis.pause();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let answer = send(
            first
                .client
                .get(first.at("/v1/sales/nothing-here"))
                .header("X-Forwarded-For", "203.0.113.9"),
        )
        .await;
        statuses.push(answer.status);
    }
    backends.redis.resume();
    assert_eq!(
        statuses,
        vec![404, 404, 429, 429],
        "half the burst of 4 with Redis frozen"
    );
    let text = first.metrics_text().await;
    assert!(
        text.lines().any(|l| l == "stockade_rate_limit_instances 2"),
        "the count is exported"
    );
}
