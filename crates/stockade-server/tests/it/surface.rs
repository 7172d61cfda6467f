//! The operational surface (issue 18, item 12): a per-client connection
//! cap (the admin and trusted proxies exempt), a rate-limited dashboard
//! login, a session cookie whose `Secure` flag follows `--public-url` and
//! never a request header, a `/readyz` that names what is down without
//! raw error text, and pages that cannot be framed or sniffed.

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use common::{Setup, TOKEN, TestServer};
use serde_json::{Value, json};
use stockade_core::{ManualClock, SystemClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `server` from the local address `from` (any of
/// 127.0.0.0/8 reaches a server on 127.0.0.1: another client).
async fn connect(server: &TestServer, from: &str) -> TcpStream {
    let target: SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    socket.connect(target).await.unwrap()
}

/// Sends `GET path` on `stream` (keep-alive) and reads one answer: the
/// status and the body.
async fn request(stream: &mut TcpStream, path: &str, bearer: Option<&str>) -> (u16, String) {
    let auth = bearer.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nhost: test\r\n{auth}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buffer.len() >= end + 4 + length {
                let status = head[9..12].parse().unwrap();
                let body = String::from_utf8_lossy(&buffer[end + 4..end + 4 + length]);
                return (status, body.into_owned());
            }
        }
        let read = tokio::time::timeout_at(deadline, stream.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(read > 0, "closed without a whole answer: {buffer:?}");
        buffer.extend_from_slice(&chunk[..read]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_every_connection() {
    let server = TestServer::start(Setup::Embedded).await;
    // 256 keep-alive connections from one client, each having asked once.
    let mut held = Vec::new();
    for _ in 0..256 {
        let mut stream = connect(&server, "127.0.0.1").await;
        assert_eq!(request(&mut stream, "/healthz", None).await.0, 200);
        held.push(stream);
    }
    // The 257th is refused...
    let mut over = connect(&server, "127.0.0.1").await;
    let (status, body) = request(&mut over, "/healthz", None).await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "too_many_connections", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-connections-per-client"),
        "{body}"
    );
    // ...while another client still connects, and the admin too.
    let mut other = connect(&server, "127.0.0.2").await;
    assert_eq!(request(&mut other, "/healthz", None).await.0, 200);
    let mut admin = connect(&server, "127.0.0.1").await;
    let (status, body) = request(&mut admin, "/v1/sales/none/orders", Some(TOKEN)).await;
    assert_eq!(status, 404, "the admin's request is served: {body}");
    // A connection closed makes room again.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = connect(&server, "127.0.0.1").await;
        let (status, _) = request(&mut again, "/healthz", None).await;
        if status == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no room came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Clients behind a trusted proxy share its address: it is not capped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_is_not_capped() {
    let server = TestServer::start_with_env(
        Setup::Embedded,
        Arc::new(SystemClock),
        &[
            ("STOCKADE_MAX_CONNECTIONS_PER_CLIENT", "2"),
            ("STOCKADE_TRUSTED_PROXIES", "127.0.0.3"),
        ],
        |_| {},
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut stream = connect(&server, "127.0.0.3").await;
        assert_eq!(request(&mut stream, "/healthz", None).await.0, 200);
        held.push(stream);
    }
    for _ in 0..2 {
        let mut stream = connect(&server, "127.0.0.4").await;
        assert_eq!(request(&mut stream, "/healthz", None).await.0, 200);
        held.push(stream);
    }
    let mut over = connect(&server, "127.0.0.4").await;
    assert_eq!(request(&mut over, "/healthz", None).await.0, 503);
}

/// A client reqwest connecting from `from`, not following redirects.
fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .local_address(from.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn login(client: &reqwest::Client, server: &TestServer, token: &str) -> reqwest::Response {
    client
        .post(server.at("/dashboard/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_login_is_rate_limited_per_client() {
    let clock = ManualClock::new(Utc::now());
    let server =
        TestServer::start_with_env(Setup::Embedded, Arc::new(clock.clone()), &[], |_| {}).await;
    let guesser = client_from("127.0.0.1");
    for attempt in 1..=5 {
        let answer = login(&guesser, &server, &format!("guess-number-{attempt}")).await;
        assert_eq!(answer.status().as_u16(), 401, "attempt {attempt}");
    }
    // The sixth try in the minute: 429, even with the right token.
    for token in ["guess-number-6", TOKEN] {
        let answer = login(&guesser, &server, token).await;
        assert_eq!(answer.status().as_u16(), 429);
        let retry: u64 = answer.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry), "Retry-After: {retry}");
        assert!(answer.headers().get("set-cookie").is_none());
        let page = answer.text().await.unwrap();
        assert!(page.contains("Too many"), "{page}");
    }
    // Another client is not held back.
    let other = client_from("127.0.0.2");
    assert_eq!(login(&other, &server, TOKEN).await.status().as_u16(), 303);
    // A minute later the first client may try again.
    clock.advance(TimeDelta::seconds(61));
    assert_eq!(login(&guesser, &server, TOKEN).await.status().as_u16(), 303);
}

fn cookie(response: &reqwest::Response) -> String {
    response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_secure_by_configuration_never_by_a_header() {
    let client = client_from("127.0.0.1");
    let plain = TestServer::start(Setup::Embedded).await;
    let answer = client
        .post(plain.at("/dashboard/login"))
        .header("x-forwarded-proto", "https")
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 303);
    assert!(
        !cookie(&answer).contains("Secure"),
        "a client's header does not decide: {}",
        cookie(&answer)
    );
    let https = TestServer::start_with_env(
        Setup::Embedded,
        Arc::new(SystemClock),
        &[("STOCKADE_PUBLIC_URL", "https://shop.example.test")],
        |_| {},
    )
    .await;
    let answer = login(&client, &https, TOKEN).await;
    assert_eq!(answer.status().as_u16(), 303);
    assert!(cookie(&answer).contains("; Secure"), "{}", cookie(&answer));
}

/// Redis down (no fallback): this instance stays ready, since every
/// replica shares that Redis and would leave the load balancer at once;
/// the body names the engine as down, without error text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_what_is_down_without_error_text() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["down"], json!([]), "{body}");
    assert_eq!(
        body["checks"],
        json!({"store": "up", "engine": "up"}),
        "{body}"
    );
    server.redis.as_mut().unwrap().kill();
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "a shared Redis down keeps the replica: {body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["down"], json!(["engine"]), "{body}");
    assert_eq!(body["checks"]["engine"], "down", "{body}");
    let text = body.to_string().to_ascii_lowercase();
    for leak in [
        "refused",
        "error",
        "redis://",
        "127.0.0.1",
        "os error",
        "timed out",
    ] {
        assert!(!text.contains(leak), "{leak:?} in {body}");
    }
}

/// The store down: this instance stays ready (purchases are answered 202
/// `pending` meanwhile), the store is reported down in the body and in
/// `stockade_dependency_up`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_stays_ready_and_reports_the_store_down() {
    let mut server = TestServer::start(Setup::RedisPostgres).await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    server.postgres.as_mut().unwrap().kill();
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "a shared store down keeps the replica: {body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["down"], json!(["store"]), "{body}");
    assert_eq!(
        body["checks"],
        json!({"store": "down", "engine": "up"}),
        "{body}"
    );
    let metrics = server.metrics_text().await;
    for line in [
        "stockade_dependency_up{dependency=\"store\"} 0",
        "stockade_dependency_up{dependency=\"engine\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
}

fn assert_guarded(what: &str, response: &reqwest::Response) {
    let headers = response.headers();
    let csp = headers
        .get("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"))
        .to_str()
        .unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert_eq!(
        headers
            .get("x-content-type-options")
            .map(|v| v.to_str().unwrap()),
        Some("nosniff"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_forbids_framing_and_sniffing() {
    let server = TestServer::start(Setup::Embedded).await;
    let client = client_from("127.0.0.1");
    let (status, _) = server
        .create_sale(json!({"id": "framed", "stock": 5,
            "waiting_room": {"admit_per_second": 5, "admission_ttl_seconds": 60}}))
        .await;
    assert_eq!(status, 201);
    for path in [
        "/queue/framed",
        "/assets/queue.js",
        "/assets/queue.css",
        "/dashboard",
        "/dashboard/assets/dashboard.js",
        "/v1/sales/framed",
        "/healthz",
        "/no-such-page",
    ] {
        let response = client.get(server.at(path)).send().await.unwrap();
        assert_guarded(path, &response);
    }
    let wrong = login(&client, &server, "wrong").await;
    assert_guarded("a failed login", &wrong);
    let ok = login(&client, &server, TOKEN).await;
    assert_guarded("a login", &ok);
    let pair = cookie(&ok).split(';').next().unwrap().to_owned();
    let page = client
        .get(server.at("/dashboard"))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_guarded("the dashboard", &page);
    // The waiting page still loads its own script and style.
    let waiting = client.get(server.at("/queue/framed")).send().await.unwrap();
    let csp = waiting.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
}
