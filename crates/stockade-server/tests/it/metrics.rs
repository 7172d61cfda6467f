//! Metrics that tell the truth (issue 12, items 2 and 3): purchases counted
//! by their real outcome, every documented series present from the start,
//! the recorder's upkeep running, an ended sale's series dropped after the
//! retention, and every series the Grafana dashboard and the alert rules
//! use exported by the service.

use crate::common;
use crate::scrape;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use scrape::{Scrape, scrape};
use serde_json::json;
use stockade_core::SystemClock;
use stockade_server::metrics::{Kind, PURCHASE_OUTCOMES, SERIES, upkeep_rounds};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_series_is_exported_before_any_event() {
    let server = TestServer::start(Setup::Embedded).await;
    let scrape = scrape(&server).await;
    for series in SERIES.iter().filter(|s| !s.per_sale) {
        assert!(
            scrape
                .text
                .contains(&format!("# TYPE {} {}", series.name, series.kind.name())),
            "{} has no TYPE line:\n{}",
            series.name,
            scrape.text
        );
        assert!(
            scrape.text.contains(&format!("# HELP {} ", series.name)),
            "{} has no HELP line",
            series.name
        );
        match series.kind {
            Kind::Histogram => {
                let count = format!("{}_count", series.name);
                assert!(scrape.has(&count), "{count} missing");
            }
            // A gauge may hold a setting from the start (the outbox grace).
            Kind::Gauge if series.initial.is_empty() => assert!(
                scrape.value(series.name, &[]).is_some(),
                "{} is not exported",
                series.name
            ),
            _ if series.initial.is_empty() => assert_eq!(
                scrape.value(series.name, &[]),
                Some(0.0),
                "{} is not exported at zero",
                series.name
            ),
            _ => {
                for value in series.initial {
                    assert_eq!(
                        scrape.value(series.name, &[(series.labels[0], value)]),
                        Some(0.0),
                        "{}{{{}=\"{value}\"}} is not exported at zero",
                        series.name,
                        series.labels[0]
                    );
                }
            }
        }
    }
    assert!(
        !scrape.has_label("outcome", "error"),
        "no catch-all error outcome"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purchases_are_counted_by_their_real_outcome() {
    let server = TestServer::start(Setup::Embedded).await;
    let (status, _) = server
        .create_sale(json!({"id": "drop", "stock": 3, "per_user_limit": 2}))
        .await;
    assert_eq!(status, 201);
    let later = Utc::now() + TimeDelta::hours(1);
    let (status, _) = server
        .create_sale(json!({"id": "later", "stock": 3, "starts_at": later}))
        .await;
    assert_eq!(status, 201);
    let before = scrape(&server).await;

    let answers = [
        (server.buy("drop", "ann", 2, Some("k1")).await.0, 201),
        (server.buy("drop", "ann", 2, Some("k1")).await.0, 200),
        (server.buy("drop", "ann", 1, None).await.0, 409),
        (server.buy("drop", "bob", 2, None).await.0, 409),
        (server.buy("drop", "bob", 1, None).await.0, 201),
        (server.buy("drop", "cyd", 1, None).await.0, 409),
        (server.buy("later", "cyd", 1, None).await.0, 409),
        (server.buy("nope", "cyd", 1, None).await.0, 404),
        (server.buy("drop", "cyd", 0, None).await.0, 422),
    ];
    for (got, expected) in answers {
        assert_eq!(got, expected, "{answers:?}");
    }
    let response = server
        .client
        .post(server.at("/v1/sales/drop/purchases"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);

    let after = scrape(&server).await;
    let delta = |outcome: &str| {
        let key = [("outcome", outcome)];
        after.value("stockade_purchases_total", &key).unwrap_or(0.0)
            - before
                .value("stockade_purchases_total", &key)
                .unwrap_or(0.0)
    };
    for (outcome, expected) in [
        ("purchased", 2.0),
        ("duplicate", 1.0),
        ("limit_exceeded", 1.0),
        ("insufficient_stock", 1.0),
        ("sold_out", 1.0),
        ("not_started", 1.0),
        ("unknown_sale", 1.0),
        ("invalid_request", 1.0),
        ("invalid_json", 1.0),
    ] {
        assert_eq!(
            delta(outcome),
            expected,
            "outcome {outcome}:\n{}",
            after.text
        );
    }
    assert!(!after.has_label("outcome", "error"), "{}", after.text);
    // Per sale, for sales the service knows; a made-up id makes no series.
    let per_sale = |sale: &str, outcome: &str| {
        after.value(
            "stockade_sale_purchases_total",
            &[("sale", sale), ("outcome", outcome)],
        )
    };
    assert_eq!(per_sale("drop", "purchased"), Some(2.0));
    assert_eq!(per_sale("drop", "sold_out"), Some(1.0));
    assert_eq!(per_sale("later", "not_started"), Some(1.0));
    assert!(!after.has_label("sale", "nope"), "{}", after.text);
    assert_eq!(
        after.value("stockade_sale_remaining", &[("sale", "drop")]),
        Some(0.0)
    );
    // The latency histogram saw every answer.
    let count = |s: &Scrape| s.value("stockade_purchase_seconds_count", &[]).unwrap();
    assert_eq!(count(&after) - count(&before), 10.0);
    // And the 4xx answers were counted by class.
    let class = |s: &Scrape, c: &str| {
        s.value("stockade_http_responses_total", &[("class", c)])
            .unwrap()
    };
    assert!(class(&after, "4xx") - class(&before, "4xx") >= 7.0);
}

/// Every `stockade_*` name in a file (PromQL inside JSON or YAML).
fn names_in(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut names = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("stockade_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_the_grafana_dashboard_and_the_alerts_use_is_exported() {
    let server = TestServer::start(Setup::Embedded).await;
    let (status, _) = server
        .create_sale(json!({"id": "watched", "stock": 2}))
        .await;
    assert_eq!(status, 201);
    for user in ["a", "b", "c"] {
        server.buy("watched", user, 1, None).await;
    }
    let scrape = scrape(&server).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut used = names_in(&root.join("grafana/stockade.json"));
    used.extend(names_in(&root.join("prometheus/alerts.yml")));
    assert!(used.len() > 10, "{used:?}");
    let documented: BTreeSet<&str> = SERIES.iter().map(|s| s.name).collect();
    for name in &used {
        assert!(
            scrape.has(name),
            "{name} (used by deploy/) is not exported:\n{}",
            scrape.text
        );
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| documented.contains(base))
            .unwrap_or(name);
        assert!(
            documented.contains(base),
            "{name} is not in the documented table"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_sales_series_are_dropped_after_the_retention() {
    let server = TestServer::start_adjusted(
        Setup::Embedded,
        Timing::default(),
        Arc::new(SystemClock),
        |c| c.operations.metrics_retention_s = Some(2),
    )
    .await;
    let ends = Utc::now() + TimeDelta::seconds(3);
    let (status, _) = server
        .create_sale(json!({"id": "brief", "stock": 10, "ends_at": ends}))
        .await;
    assert_eq!(status, 201);
    let (status, _) = server
        .create_sale(json!({"id": "lasting", "stock": 10}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(server.buy("brief", "u1", 1, None).await.0, 201);
    assert_eq!(server.buy("lasting", "u1", 1, None).await.0, 201);
    let first = scrape(&server).await;
    assert!(first.has_label("sale", "brief"), "{}", first.text);

    // The sale ends; its series go once idle for the retention (2 s), long
    // before the reconciler's margin for late outbox entries (100 s).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let scrape = scrape(&server).await;
        if !scrape.has_label("sale", "brief") {
            // The open sale's stock is refreshed every second and stays, and
            // so does every documented series, idle or not.
            assert_eq!(
                scrape.value("stockade_sale_remaining", &[("sale", "lasting")]),
                Some(9.0),
                "{}",
                scrape.text
            );
            assert_eq!(
                scrape.value("stockade_circuit_opened_total", &[]),
                Some(0.0)
            );
            assert_eq!(
                scrape.value("stockade_rebuilds_total", &[("reason", "drift")]),
                Some(0.0)
            );
            for outcome in PURCHASE_OUTCOMES {
                assert!(
                    scrape
                        .value("stockade_purchases_total", &[("outcome", outcome)])
                        .is_some(),
                    "{outcome} dropped"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the ended sale's series are still exported:\n{}",
            scrape.text
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorder_upkeep_runs_without_scrapes() {
    let _server = TestServer::start(Setup::Embedded).await;
    let start = upkeep_rounds();
    let deadline = Instant::now() + Duration::from_secs(30);
    while upkeep_rounds() < start + 2 {
        assert!(Instant::now() < deadline, "the upkeep does not run");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
