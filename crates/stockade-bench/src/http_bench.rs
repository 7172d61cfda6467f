//! `stockade bench http`: what the HTTP service costs, measured against a
//! bare HTTP handler on the same machine with the same crowd.
//!
//! The baseline ([`baseline_router`]) is the least a purchase endpoint can
//! do: an axum handler that parses the purchase request (the sale id from
//! the path, `{"user_id", "quantity"}` from the body) and answers 201 with
//! `{"sale_id", "user_id", "quantity"}`. Each target is sent the same
//! keep-alive crowd (the [`crate::http_load`] client and the
//! [`crate::driver`] of `stockade load`) for a fixed time, in two phases:
//!
//! - [`Phase::Committed`]: a sale whose stock never runs out, distinct
//!   buyers, so every purchase commits;
//! - [`Phase::SoldOut`]: a sale of one item, sold before the crowd
//!   arrives, so every purchase is a rejection.
//!
//! The baseline answers both phases alike (it has no stock); it is run
//! right before each target's phase and the ratio is taken between those
//! two runs, so the machine's load at the time weighs on both.
//!
//! After a committed phase the service is checked as `stockade load`
//! checks it: every 201 is in the store, no buyer holds two orders, the
//! stock left and the orders add up. After a sold-out phase: every answer
//! was `409 sold_out` (or a `503` shed under load), and the sale holds its
//! one order. The baseline's echoes are checked too.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use stockade_test_support::ServeProcess;

use crate::driver::{self, Tally};
use crate::http_load::{self, HttpSale, LoadError, Success};
use crate::report::{format_rate, format_us};
use crate::scenario::{MAX_STOCK, Overrides, Workload};
use crate::strategy::Purchaser;

/// Keep-alive connections when `--connections` is not given: the issue's
/// measure of the service at the limit.
pub const DEFAULT_CONNECTIONS: usize = 512;
/// Length of each phase when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The name of the baseline in reports.
pub const BASELINE: &str = "baseline";

/// What a phase asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Every purchase commits.
    Committed,
    /// Every purchase is rejected: the sale is sold out.
    SoldOut,
}

impl Phase {
    /// Both, in the order they run.
    pub const ALL: [Phase; 2] = [Phase::Committed, Phase::SoldOut];

    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::SoldOut => "sold-out",
        }
    }

    /// What the phase sends, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Committed => "committed purchases (stock that never runs out, distinct buyers)",
            Self::SoldOut => "sold-out rejections (a sale of one item, sold first)",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A server to drive.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its name in reports (`baseline`, `embedded`, `redis-sqlite`, ...).
    pub name: String,
    /// `http://host:port`.
    pub url: String,
    /// The admin token of a `stockade serve`; None for the baseline.
    pub admin_token: Option<String>,
}

impl Target {
    fn is_baseline(&self) -> bool {
        self.admin_token.is_none()
    }
}

/// One phase of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseResult {
    /// The target's name.
    pub target: String,
    /// The phase.
    pub phase: Phase,
    /// Keep-alive connections, one request in flight on each.
    pub connections: usize,
    /// Requests answered.
    pub requests: u64,
    /// From the first request to the last answer, in seconds.
    pub elapsed_s: f64,
    /// Requests answered per second.
    pub per_second: f64,
    /// Median answer time.
    pub p50_us: u64,
    /// 99th percentile answer time.
    pub p99_us: u64,
    /// Answers by HTTP status (and error code), e.g. `201`,
    /// `409 sold_out`, `no answer`.
    pub statuses: BTreeMap<String, u64>,
    /// The baseline's requests/s in the run just before this one (None for
    /// the baseline itself).
    pub baseline_per_second: Option<f64>,
    /// `per_second` over `baseline_per_second`.
    pub ratio_to_baseline: Option<f64>,
    /// Whether every check held.
    pub ok: bool,
    /// What broke, in words.
    pub problems: Vec<String>,
}

/// Every phase of every target, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HttpBenchReport {
    /// Keep-alive connections.
    pub connections: usize,
    /// Length of each phase, in seconds.
    pub duration_s: f64,
    /// Baseline runs and target runs, each target's run right after the
    /// baseline run it is compared with.
    pub results: Vec<PhaseResult>,
}

impl HttpBenchReport {
    /// Whether every check held.
    pub fn all_ok(&self) -> bool {
        self.results.iter().all(|r| r.ok)
    }

    /// The ratio to the baseline of each target and phase.
    pub fn ratios(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut ratios: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for r in &self.results {
            if let Some(ratio) = r.ratio_to_baseline {
                ratios
                    .entry(r.target.clone())
                    .or_default()
                    .insert(r.phase.as_str().to_owned(), ratio);
            }
        }
        ratios
    }

    /// One JSON object: the settings, `results` and `ratios`.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            report: &'a HttpBenchReport,
            ratios: BTreeMap<String, BTreeMap<String, f64>>,
        }
        serde_json::to_string_pretty(&Json {
            report: self,
            ratios: self.ratios(),
        })
        .expect("a report always serializes")
    }

    /// The table, what broke, and the ratios.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| target | phase | requests/s | p50 | p99 | answers | vs baseline |\n\
             | --- | --- | ---: | ---: | ---: | --- | ---: |\n",
        );
        for r in &self.results {
            let statuses: Vec<String> = r
                .statuses
                .iter()
                .map(|(status, count)| format!("{count} × {status}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.target,
                r.phase,
                format_rate(r.per_second),
                format_us(r.p50_us),
                format_us(r.p99_us),
                statuses.join(", "),
                r.ratio_to_baseline
                    .map_or("–".to_owned(), |ratio| format!("{ratio:.2}×")),
            );
        }
        let broken: Vec<_> = self.results.iter().filter(|r| !r.ok).collect();
        if !broken.is_empty() {
            out.push_str("\nBroken:\n\n");
            for r in broken {
                let _ = writeln!(
                    out,
                    "- **{} {}**: {}",
                    r.target,
                    r.phase,
                    r.problems.join("; ")
                );
            }
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            let parts: Vec<String> = ratios
                .iter()
                .map(|(target, phases)| {
                    let phases: Vec<String> = Phase::ALL
                        .iter()
                        .filter_map(|phase| {
                            phases
                                .get(phase.as_str())
                                .map(|ratio| format!("{phase} {ratio:.2}×"))
                        })
                        .collect();
                    format!("{target}: {}", phases.join(", "))
                })
                .collect();
            let _ = writeln!(
                out,
                "\nRatios to the bare axum baseline (requests/s): {}.",
                parts.join("; ")
            );
        }
        out
    }
}

/// Sends `connections` keep-alive connections of buyers at `target` for
/// `duration`, in `phase`, and checks the answers and the service.
/// `on_answer` is called once per answer. The baseline's requests/s, if
/// given, is the one this run is compared with.
pub async fn run_phase(
    target: &Target,
    phase: Phase,
    connections: usize,
    duration: Duration,
    baseline_per_second: Option<f64>,
    on_answer: Arc<dyn Fn() + Send + Sync>,
) -> Result<PhaseResult, LoadError> {
    let stock = match phase {
        Phase::Committed => MAX_STOCK,
        Phase::SoldOut => 1,
    };
    let workload = Workload::new(
        None,
        &Overrides {
            stock: Some(stock),
            concurrency: Some(connections),
            duration: Some(duration),
            ..Overrides::default()
        },
    )
    .map_err(|e| LoadError::Setup(e.to_string()))?;
    let client = http_load::client(connections)?;
    let sale = format!("http-{}-{}", phase, uuid::Uuid::now_v7().simple());
    let (token, success) = match &target.admin_token {
        Some(token) => (token.as_str(), Success::Order),
        None => ("", Success::Echo),
    };
    let service = Arc::new(HttpSale::new(
        client.clone(),
        &target.url,
        token,
        sale.clone(),
        success,
    ));
    if !target.is_baseline() {
        http_load::create_sale(&client, &service.base, token, &sale, stock, None).await?;
        if phase == Phase::SoldOut {
            sell_out(&service).await?;
        }
    }
    let tally = driver::drive(Arc::clone(&service), &workload, on_answer).await;
    let statuses = service.statuses();
    let problems = if target.is_baseline() {
        baseline_problems(&tally, &statuses)
    } else {
        match phase {
            Phase::Committed => committed_problems(&service, &tally, &statuses).await,
            Phase::SoldOut => sold_out_problems(&service, &tally, &statuses).await,
        }
    };
    let per_second = tally.requests as f64 / tally.elapsed.as_secs_f64().max(1e-9);
    let baseline_per_second = baseline_per_second.filter(|_| !target.is_baseline());
    Ok(PhaseResult {
        target: target.name.clone(),
        phase,
        connections,
        requests: tally.requests,
        elapsed_s: tally.elapsed.as_secs_f64(),
        per_second,
        p50_us: tally.latencies.quantile_us(0.5),
        p99_us: tally.latencies.quantile_us(0.99),
        statuses,
        baseline_per_second,
        ratio_to_baseline: baseline_per_second
            .filter(|b| *b > 0.0)
            .map(|b| per_second / b),
        ok: problems.is_empty(),
        problems,
    })
}

/// Buys the one item of a sold-out phase's sale, before the crowd (not
/// counted in the phase's answers).
async fn sell_out(service: &HttpSale) -> Result<(), LoadError> {
    let answer = service.purchase("first-buyer").await;
    let statuses = service.statuses();
    service
        .statuses
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    if answer == crate::strategy::Answer::Purchased {
        Ok(())
    } else {
        Err(LoadError::Service(format!(
            "selling the sold-out phase's one item failed: {answer:?} ({statuses:?})"
        )))
    }
}

/// Answers other than those the phase expects, and requests without one.
/// An expected `"503"` takes every 503, whatever its error code.
fn unexpected_answers(
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
    expected: &[&str],
) -> Vec<String> {
    let mut problems = Vec::new();
    let unexpected: Vec<String> = statuses
        .iter()
        .filter(|(status, _)| {
            !expected
                .iter()
                .any(|e| status == e || status.starts_with(&format!("{e} ")))
        })
        .map(|(status, count)| format!("{count} × {status}"))
        .collect();
    if !unexpected.is_empty() {
        problems.push(format!(
            "unexpected answers: {} (for example: {})",
            unexpected.join(", "),
            tally.failure_samples.join(" | ")
        ));
    }
    let counted: u64 = statuses.values().sum();
    if counted != tally.requests {
        problems.push(format!(
            "{} requests answered but {counted} answers counted by status",
            tally.requests
        ));
    }
    problems
}

fn baseline_problems(tally: &Tally, statuses: &BTreeMap<String, u64>) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["201"]);
    if tally.failed > 0 && problems.is_empty() {
        problems.push(format!(
            "{} echoes did not match the request: {}",
            tally.failed,
            tally.failure_samples.join(" | ")
        ));
    }
    problems
}

/// A 503 (load shed, or the engine briefly unavailable) is an answer, not a
/// broken invariant: it is counted and shown, and allowed.
const SHED: &str = "503";

async fn committed_problems(
    service: &HttpSale,
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["201", "202", SHED]);
    let answered =
        statuses.get("201").copied().unwrap_or(0) + statuses.get("202").copied().unwrap_or(0);
    if answered != tally.purchased {
        problems.push(format!(
            "{answered} answers 201/202 but {} purchases tallied",
            tally.purchased
        ));
    }
    if tally.duplicate_buyers > 0 {
        problems.push(format!(
            "{} buyers were told twice that they bought",
            tally.duplicate_buyers
        ));
    }
    // Orders answered 202 may still be committing: give them a moment.
    let started = Instant::now();
    let verification = loop {
        let verification = service.verify().await;
        let settled = matches!(&verification, Ok(v) if v.recorded_orders >= Some(tally.purchased));
        if settled || started.elapsed() > http_load::SETTLE_TIMEOUT {
            break verification;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    match verification {
        Ok(v) => {
            let live = v.recorded_orders.unwrap_or(0);
            if live != tally.purchased {
                problems.push(format!(
                    "{} purchases answered 201/202 but the store holds {live} live orders",
                    tally.purchased
                ));
            }
            let sold = i64::from(MAX_STOCK) - v.remaining;
            if sold != live as i64 {
                problems.push(format!(
                    "the sale says {sold} items sold but the store holds {live} live orders"
                ));
            }
        }
        Err(error) => problems.push(format!("could not read the sale back: {error}")),
    }
    problems.extend(http_load::store_problems(service).await);
    problems
}

async fn sold_out_problems(
    service: &HttpSale,
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["409 sold_out", SHED]);
    match service.verify().await {
        Ok(v) => {
            if v.remaining != 0 || v.recorded_orders != Some(1) {
                problems.push(format!(
                    "the sold-out sale should hold its one order and no stock, \
                     not {} left and {:?} orders",
                    v.remaining, v.recorded_orders
                ));
            }
        }
        Err(error) => problems.push(format!("could not read the sale back: {error}")),
    }
    problems
}

/// How long a child server may take to print its URL.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts a server in a child process (the baseline, or a `stockade
/// serve`) and waits for its URL ([`ServeProcess::start`]). Errors name it
/// `name` (its command line may hold passwords). Start it from a thread
/// that lives as long as the server, not from a pool's worker.
pub fn start_server(
    name: &str,
    command: Command,
    log: &std::path::Path,
) -> Result<ServeProcess, LoadError> {
    ServeProcess::start(command, log, START_TIMEOUT)
        .map_err(|e| LoadError::Setup(format!("starting {name}: {e}")))
}

/// A fresh admin token for a `stockade serve` the bench starts (random
/// bits of a UUIDv7: enough for a server that lives as long as the run).
pub fn fresh_admin_token() -> String {
    format!("bench-{}", uuid::Uuid::now_v7().simple())
}

/// The baseline's purchase request: the sale from the path, the buyer and
/// quantity from the body, as `stockade serve` reads them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineRequest {
    user_id: String,
    #[serde(default = "one")]
    quantity: u32,
}

fn one() -> u32 {
    1
}

/// The baseline's answer: the request, echoed.
#[derive(Serialize)]
struct BaselineEcho {
    sale_id: String,
    user_id: String,
    quantity: u32,
}

async fn echo_purchase(
    Path(sale_id): Path<String>,
    Json(request): Json<BaselineRequest>,
) -> (StatusCode, Json<BaselineEcho>) {
    (
        StatusCode::CREATED,
        Json(BaselineEcho {
            sale_id,
            user_id: request.user_id,
            quantity: request.quantity,
        }),
    )
}

/// The baseline's routes: `POST /v1/sales/{id}/purchases` parses the
/// purchase and echoes it with 201 (a body that does not parse gets axum's
/// 4xx).
pub fn baseline_router() -> Router {
    Router::new().route("/v1/sales/{id}/purchases", post(echo_purchase))
}

/// Serves the baseline on `listener` until `shutdown` completes.
pub async fn serve_baseline(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, baseline_router())
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(target: &str, phase: Phase, per_second: f64, baseline: Option<f64>) -> PhaseResult {
        PhaseResult {
            target: target.to_owned(),
            phase,
            connections: 512,
            requests: 1_000,
            elapsed_s: 1_000.0 / per_second,
            per_second,
            p50_us: 900,
            p99_us: 4_000,
            statuses: BTreeMap::from([("201".to_owned(), 1_000)]),
            baseline_per_second: baseline,
            ratio_to_baseline: baseline.map(|b| per_second / b),
            ok: true,
            problems: Vec::new(),
        }
    }

    #[test]
    fn each_target_is_compared_with_the_baseline_run_before_it() {
        let report = HttpBenchReport {
            connections: 512,
            duration_s: 10.0,
            results: vec![
                result(BASELINE, Phase::Committed, 80_000.0, None),
                result("embedded", Phase::Committed, 20_000.0, Some(80_000.0)),
                result(BASELINE, Phase::SoldOut, 75_000.0, None),
                result("embedded", Phase::SoldOut, 60_000.0, Some(75_000.0)),
            ],
        };
        let ratios = report.ratios();
        assert_eq!(ratios["embedded"]["committed"], 0.25);
        assert_eq!(ratios["embedded"]["sold-out"], 0.8);
        assert!(!ratios.contains_key(BASELINE));
        let table = report.to_markdown();
        assert!(
            table.contains(
                "| embedded | committed | 20,000 | 900 µs | 4.00 ms | 1000 × 201 | 0.25× |"
            ),
            "{table}"
        );
        assert!(
            table.contains("Ratios to the bare axum baseline (requests/s): embedded: committed 0.25×, sold-out 0.80×."),
            "{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["ratios"]["embedded"]["sold-out"], 0.8);
        assert_eq!(json["results"][1]["phase"], "committed");
        assert_eq!(json["connections"], 512);
    }

    #[test]
    fn answers_the_phase_does_not_expect_are_problems() {
        let tally = Tally {
            requests: 10,
            ..Tally::default()
        };
        let fine = BTreeMap::from([
            ("409 sold_out".to_owned(), 8),
            ("503 overloaded".to_owned(), 2),
        ]);
        assert!(unexpected_answers(&tally, &fine, &["409 sold_out", SHED]).is_empty());
        let odd = BTreeMap::from([("409 sold_out".to_owned(), 8), ("no answer".to_owned(), 1)]);
        let problems = unexpected_answers(&tally, &odd, &["409 sold_out", SHED]);
        assert!(problems[0].contains("1 × no answer"), "{problems:?}");
        assert!(
            problems[1].contains("10 requests answered but 9"),
            "{problems:?}"
        );
    }

    #[tokio::test]
    async fn the_baseline_echoes_the_purchase() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_baseline(listener, async {
            let _ = stopped.await;
        }));
        let client = reqwest::Client::new();
        let answer = client
            .post(format!("{url}/v1/sales/s-1/purchases"))
            .json(&serde_json::json!({ "user_id": "ann", "quantity": 2 }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "sale_id": "s-1", "user_id": "ann", "quantity": 2 })
        );
        let refused = client
            .post(format!("{url}/v1/sales/s-1/purchases"))
            .json(&serde_json::json!({ "buyer": "ann" }))
            .send()
            .await
            .unwrap();
        assert!(refused.status().is_client_error(), "{}", refused.status());
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
