//! The live dashboard (issue 12, item 1): a login that trades the admin
//! token for an HttpOnly, SameSite=Strict session cookie, sessions that
//! expire and end on logout, the overview's numbers, and the page itself in
//! headless Chromium watching a sale sell out.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::{Setup, TOKEN, TestServer, Timing};
use fantoccini::Locator;
use serde_json::{Value, json};
use stockade_core::ManualClock;
use stockade_test_support::browser::Chromedriver;

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Posts the login form.
async fn login(server: &TestServer, token: &str) -> reqwest::Response {
    client()
        .post(server.at("/dashboard/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
}

async fn overview(server: &TestServer, cookie: Option<&str>) -> (u16, Value) {
    let mut request = client().get(server.at("/dashboard/api/overview"));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    common::split(request.send().await.unwrap()).await
}

/// The `Set-Cookie` header and its `name=value` pair.
fn session_pair(response: &reqwest::Response) -> (String, String) {
    let header = response
        .headers()
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .to_owned();
    let pair = header.split(';').next().unwrap().to_owned();
    (header, pair)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_trades_the_token_for_a_strict_http_only_session() {
    let clock = ManualClock::new(Utc::now());
    let server = TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(clock.clone()),
        |c| c.operations.dashboard_session_ttl_s = Some(600),
    )
    .await;

    // No session: the login form, and the numbers are refused.
    let page = server
        .client
        .get(server.at("/dashboard"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    assert!(
        html.contains("name=\"token\"") && html.contains("method=\"post\""),
        "{html}"
    );
    let (status, body) = overview(&server, None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");

    // A wrong token: 401, a message, no cookie.
    let wrong = login(&server, "not-the-token").await;
    assert_eq!(wrong.status().as_u16(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    assert!(wrong.text().await.unwrap().contains("not the admin token"));
    // A body without the field: 400 and the form again.
    let empty = client()
        .post(server.at("/dashboard/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("password=x")
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status().as_u16(), 400);
    assert!(empty.headers().get("set-cookie").is_none());

    // The right token: a redirect to /dashboard (no token in any URL) and
    // a strict, HttpOnly cookie that holds a signed expiry, not the token.
    let ok = login(&server, TOKEN).await;
    assert_eq!(ok.status().as_u16(), 303);
    assert_eq!(ok.headers()["location"], "/dashboard");
    let (header, pair) = session_pair(&ok);
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/dashboard",
        "Max-Age=600",
    ] {
        assert!(header.contains(flag), "{flag} missing: {header}");
    }
    assert!(!header.contains(TOKEN));
    let (status, body) = overview(&server, Some(&pair)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["sales"].is_array());
    let page = client()
        .get(server.at("/dashboard"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("dashboard.js"), "{page}");

    // A made-up session is refused.
    let (status, _) = overview(&server, Some("stockade_session=0123abcd")).await;
    assert_eq!(status, 401);

    // Sessions expire.
    clock.advance(TimeDelta::seconds(599));
    assert_eq!(overview(&server, Some(&pair)).await.0, 200);
    clock.advance(TimeDelta::seconds(1));
    assert_eq!(overview(&server, Some(&pair)).await.0, 401);

    // Logout clears the cookie in the browser (a signed session is kept
    // nowhere else: a copy lasts until its expiry; a new admin token ends
    // them all).
    let (_, pair) = session_pair(&login(&server, TOKEN).await);
    assert_eq!(overview(&server, Some(&pair)).await.0, 200);
    let out = client()
        .post(server.at("/dashboard/logout"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status().as_u16(), 303);
    let (cleared, _) = session_pair(&out);
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert!(cleared.starts_with("stockade_session=;"), "{cleared}");
}

/// Two instances on one store, as behind a load balancer (issue 36, item
/// 3): a login on one is a session on the other, until its expiry on
/// either; and failed logins count across both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_and_the_login_throttle_hold_across_instances() {
    let clock = ManualClock::new(Utc::now());
    let a = TestServer::start_adjusted(
        Setup::Postgres,
        Timing::default(),
        Arc::new(clock.clone()),
        |_| {},
    )
    .await;
    let b = TestServer::start_beside(&a).await;

    let (_, pair) = session_pair(&login(&a, TOKEN).await);
    let (status, body) = overview(&b, Some(&pair)).await;
    assert_eq!(
        status, 200,
        "a session opened on one instance is refused by the other: {body}"
    );
    // Expiry is the same on both (the default lifetime: eight hours).
    clock.advance(TimeDelta::hours(8) - TimeDelta::seconds(1));
    assert_eq!(overview(&b, Some(&pair)).await.0, 200);
    clock.advance(TimeDelta::seconds(1));
    assert_eq!(overview(&a, Some(&pair)).await.0, 401);
    assert_eq!(overview(&b, Some(&pair)).await.0, 401);
    // A cookie with its expiry moved is refused: the signature covers it.
    let (_, pair) = session_pair(&login(&b, TOKEN).await);
    let (name, value) = pair.split_once('=').unwrap();
    let (expiry, signature) = value.split_once('.').expect("expiry.signature");
    let later: i64 = expiry.parse::<i64>().unwrap() + 3_600_000;
    let forged = format!("{name}={later}.{signature}");
    assert_eq!(overview(&a, Some(&forged)).await.0, 401);
    assert_eq!(overview(&a, Some(&pair)).await.0, 200);

    // Three failures on one instance, two on the other: the sixth try, on
    // either, is 429.
    for (server, attempt) in [(&a, 1), (&b, 2), (&a, 3), (&b, 4), (&a, 5)] {
        let answer = login(server, &format!("guess-{attempt}")).await;
        assert_eq!(answer.status().as_u16(), 401, "attempt {attempt}");
    }
    for server in [&a, &b] {
        let answer = login(server, TOKEN).await;
        assert_eq!(
            answer.status().as_u16(),
            429,
            "the failures on the other instance were not counted"
        );
    }
    clock.advance(TimeDelta::seconds(61));
    assert_eq!(login(&b, TOKEN).await.status().as_u16(), 303);
}

/// A sale with a waiting room shows how many buyers wait in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_waiting_room() {
    let server = TestServer::start(Setup::Embedded).await;
    let (_, pair) = session_pair(&login(&server, TOKEN).await);
    // Opens in an hour: everyone who joins now waits.
    let starts = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let (status, body) = server
        .create_sale(json!({"id": "queued", "stock": 5, "starts_at": starts,
            "waiting_room": {"admit_per_second": 10, "admission_ttl_seconds": 60}}))
        .await;
    assert_eq!(status, 201, "{body}");
    for user in ["a", "b", "c"] {
        let response = server
            .client
            .post(server.at("/v1/sales/queued/queue"))
            .json(&json!({"user_id": user}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = overview(&server, Some(&pair)).await;
        let sale = &body["sales"][0];
        assert_eq!(sale["id"], "queued");
        if sale["waiting_room"] == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiting room never showed 3 buyers: {sale}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_a_sale_selling_out() {
    let server = TestServer::start(Setup::Embedded).await;
    let (_, pair) = session_pair(&login(&server, TOKEN).await);
    let (status, _) = server
        .create_sale(json!({"id": "shoes", "stock": 4, "per_user_limit": 1}))
        .await;
    assert_eq!(status, 201);
    let (_, body) = overview(&server, Some(&pair)).await;
    let sale = &body["sales"][0];
    assert_eq!(sale["id"], "shoes");
    assert_eq!(sale["remaining"], 4);
    assert_eq!(sale["status"], "selling");
    assert_eq!(sale["engine_state"], "selling");
    assert!(sale["waiting_room"].is_null());

    for user in ["a", "b", "c", "d", "e", "f"] {
        server.buy("shoes", user, 1, None).await;
    }
    server.buy("shoes", "a", 1, None).await;
    let (_, body) = overview(&server, Some(&pair)).await;
    let sale = &body["sales"][0];
    assert_eq!(sale["stock"], 4);
    assert_eq!(sale["sold"], 4);
    assert_eq!(sale["remaining"], 0);
    assert_eq!(sale["committed"], 4);
    assert_eq!(sale["status"], "sold_out");
    assert_eq!(sale["outcomes"]["purchased"], 4);
    assert_eq!(sale["rejections"]["sold_out"], 3, "{sale}");
    assert!(sale["purchases_per_second"].as_f64().unwrap() > 0.0);
    assert!(sale["latency"]["p99_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(
        sale["skus"],
        json!([{"id": "default", "stock": 4, "sold": 4, "remaining": 0}])
    );
    let history = sale["history"].as_array().unwrap();
    let purchased: u64 = history
        .iter()
        .map(|s| s["purchased"].as_u64().unwrap())
        .sum();
    let rejected: u64 = history
        .iter()
        .map(|s| s["rejected"].as_u64().unwrap())
        .sum();
    assert_eq!((purchased, rejected), (4, 3));
    let instance = &body["instance"];
    assert_eq!(instance["engine"], "memory");
    assert_eq!(instance["circuit"], "closed");
    assert_eq!(instance["writer"]["queue_depth"], 0);
    assert!(
        instance["writer"]["commit_latency"]["samples"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

/// Waits until `check` passes on the text of the element at `css`.
async fn wait_for_text(
    browser: &fantoccini::Client,
    css: &str,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(element) = browser.find(Locator::Css(css)).await
            && let Ok(text) = element.text().await
        {
            if check(&text) {
                return text;
            }
            last = text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: {css} never matched; last text {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_a_browser_the_dashboard_follows_a_sale_until_it_sells_out() {
    let server = TestServer::start(Setup::Embedded).await;
    let driver = Chromedriver::start().unwrap();
    let browser = driver.session().await.unwrap();

    browser.goto(&server.at("/dashboard")).await.unwrap();
    browser
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    browser
        .find(Locator::Css("#sign-in"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "#instance-heading", "signed in", |t| {
        t == "This instance"
    })
    .await;
    let url = browser.current_url().await.unwrap();
    assert_eq!(url.path(), "/dashboard");
    assert!(!url.as_str().contains(TOKEN));
    // The session cookie is out of the page's reach.
    let cookies = browser
        .execute("return document.cookie", vec![])
        .await
        .unwrap();
    assert_eq!(cookies, Value::String(String::new()));

    let (status, _) = server
        .create_sale(json!({"id": "sneakers", "stock": 30, "per_user_limit": 2}))
        .await;
    assert_eq!(status, 201);
    let remaining = "#sale-sneakers [data-field=remaining]";
    wait_for_text(&browser, remaining, "a new sale", |t| t == "30").await;

    for i in 0..12 {
        assert_eq!(
            server
                .buy("sneakers", &format!("early-{i}"), 1, None)
                .await
                .0,
            201
        );
    }
    wait_for_text(&browser, remaining, "the first purchases", |t| t == "18").await;
    wait_for_text(&browser, "#sale-sneakers [data-field=sold]", "sold", |t| {
        t == "12"
    })
    .await;

    // A crowd finishes the stock; the rest are turned away.
    let mut buyers = tokio::task::JoinSet::new();
    let server = Arc::new(server);
    for i in 0..40 {
        let server = Arc::clone(&server);
        buyers.spawn(async move {
            server
                .buy("sneakers", &format!("crowd-{i}"), 1, None)
                .await
                .0
        });
    }
    let mut answers = Vec::new();
    while let Some(answer) = buyers.join_next().await {
        answers.push(answer.unwrap());
    }
    assert_eq!(answers.iter().filter(|s| **s == 201).count(), 18);
    assert_eq!(answers.iter().filter(|s| **s == 409).count(), 22);

    wait_for_text(&browser, remaining, "sold out", |t| t == "0").await;
    wait_for_text(
        &browser,
        "#sale-sneakers [data-field=status]",
        "status",
        |t| t == "sold out",
    )
    .await;
    wait_for_text(
        &browser,
        "#sale-sneakers [data-field=rejections]",
        "rejections",
        |t| t.contains("sold out 22"),
    )
    .await;
    wait_for_text(
        &browser,
        "#sale-sneakers [data-field=p99]",
        "latency",
        |t| t.ends_with(" ms"),
    )
    .await;
    // The chart drew bars.
    let bars = browser
        .find_all(Locator::Css("#sale-sneakers svg.chart rect"))
        .await
        .unwrap();
    assert!(!bars.is_empty());
    let shot = driver
        .save_screenshot(&browser, "dashboard.png")
        .await
        .unwrap();
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);

    // A sale of several SKUs shows each one's stock.
    let (status, body) = server
        .create_sale(json!({"id": "sizes", "skus": [{"id": "us-9", "stock": 3}, {"id": "us-10", "stock": 5}], "per_user_limit": 4}))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server
        .buy_with(
            "sizes",
            json!({"user_id": "pair", "items": [{"sku": "us-9", "quantity": 2}, {"sku": "us-10", "quantity": 1}]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    for (sku, field, want) in [
        ("us-9", "remaining", "1"),
        ("us-9", "sold", "2"),
        ("us-10", "remaining", "4"),
        ("us-10", "stock", "5"),
    ] {
        let css = format!("#sale-sizes [data-sku={sku}] [data-sku-field={field}]");
        wait_for_text(&browser, &css, "a SKU's stock", |t| t == want).await;
    }
    wait_for_text(
        &browser,
        "#sale-sizes [data-field=remaining]",
        "the sale's",
        |t| t == "5",
    )
    .await;

    // Signing out goes back to the login form.
    browser
        .find(Locator::Css("#sign-out"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(&browser, "label[for=token]", "signed out", |t| {
        t == "Admin token"
    })
    .await;
    browser.close().await.unwrap();
}
