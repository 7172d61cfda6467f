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
//!
//! - `results`: the phases' results, as a table or JSON;
//! - `checks`: the answers and the service checked after each phase;
//! - `baseline`: the bare axum handler.

mod baseline;
mod checks;
mod results;

use std::fmt;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use stockade_test_support::ServeProcess;

use crate::driver;
use crate::http_load::{self, HttpSale, LoadError, Success};
use crate::scenario::{MAX_STOCK, Overrides, Workload};
use crate::strategy::Purchaser;
use checks::{baseline_problems, committed_problems, sold_out_problems};

pub use baseline::{baseline_router, serve_baseline};
pub use results::{HttpBenchReport, PhaseResult};

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
    let sale = format!("http-{}-{}", phase, uuid::Uuid::now_v7().simple());
    let (token, success) = match &target.admin_token {
        Some(token) => (token.as_str(), Success::Order),
        None => ("", Success::Echo),
    };
    let client = http_load::client(&target.url, token, connections)
        .map_err(|e| LoadError::Setup(format!("{}: {e}", target.name)))?;
    let service = Arc::new(HttpSale::new(client.clone(), sale.clone(), success));
    if !target.is_baseline() {
        http_load::create_sale(&client, &sale, stock, 1, None).await?;
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
