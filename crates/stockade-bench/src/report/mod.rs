//! The result of `stockade bench`: one [`BenchResult`] per strategy, as a
//! Markdown table or as JSON (`{"results": [...]}`).
//!
//! - `ratios`: the ratios between strategies that the targets are stated in;
//! - `markdown`: the table and the numbers formatted for people.

mod markdown;
mod ratios;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::check::Observed;
use crate::driver::Tally;
use crate::scenario::Workload;
use crate::strategy::StrategyKind;
use crate::timeline::WindowSummary;

pub use markdown::{format_rate, format_us};
pub use ratios::Ratios;

/// The founding article's ratio: Redis Lua against the database row lock,
/// 100 buyers for 100 items (851 ms against 127 ms).
pub const ARTICLE_RATIO: f64 = 6.7;

/// One strategy's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// The strategy's name.
    pub strategy: String,
    /// The scenario's name.
    pub scenario: String,
    /// Distinct buyers who asked.
    pub buyers: u64,
    /// Requests answered.
    pub requests: u64,
    /// Items on sale.
    pub stock: u32,
    /// SKUs the stock was split over (`--skus`).
    pub skus: u32,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests answered "purchased".
    pub purchased: u64,
    /// Requests answered "sold out".
    pub sold_out: u64,
    /// Requests refused because the buyer had already bought.
    pub already_purchased: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Stock left according to the server (None if it could not be read).
    pub remaining: Option<i64>,
    /// Items sold beyond the stock.
    pub oversold: u64,
    /// Buyers told "purchased" more than once.
    pub duplicate_buyers: u64,
    /// From the first request to the last answer.
    pub elapsed_ms: f64,
    /// Requests answered per second.
    pub per_second: f64,
    /// Median answer time.
    pub p50_us: u64,
    /// 99th percentile answer time.
    pub p99_us: u64,
    /// 99.9th percentile answer time.
    pub p999_us: u64,
    /// Slowest answer.
    pub max_us: u64,
    /// Redis commands executed per request (including those run inside
    /// scripts); None when the strategy does not use Redis.
    pub redis_cmds_per_purchase: Option<f64>,
    /// Redis commands executed, by command.
    pub redis_commands: Option<BTreeMap<String, u64>>,
    /// Redis time per request from `INFO commandstats`: the microseconds
    /// Redis spent in the commands of the run (a script's commands counted
    /// once, within its `EVALSHA`), divided by the requests. None when the
    /// strategy does not use Redis.
    pub redis_us_per_purchase: Option<f64>,
    /// Redis CPU time per request from `INFO cpu` (`used_cpu_sys` +
    /// `used_cpu_user`, the whole server process: commands, networking and
    /// event loop), in microseconds. None when the strategy does not use
    /// Redis.
    pub redis_cpu_us_per_purchase: Option<f64>,
    /// PostgreSQL transactions per request; None when the strategy does not
    /// use PostgreSQL or the count could not be taken.
    pub db_tx_per_purchase: Option<f64>,
    /// Whether every invariant held.
    pub ok: bool,
    /// What broke, in words (empty when `ok`).
    pub problems: Vec<String>,
    /// Caveats about the measurement (not about correctness).
    pub notes: Vec<String>,
    /// Second by second, for timed runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<WindowSummary>,
}

/// The server-side counts of a run, where taken.
#[derive(Debug, Clone, Default)]
pub struct ServerWork {
    /// Redis commands, by command.
    pub redis_commands: Option<BTreeMap<String, u64>>,
    /// Microseconds Redis spent in commands, each counted once
    /// ([`crate::counters::RedisWork::command_us`]).
    pub redis_command_us: Option<u64>,
    /// Redis's CPU time, in microseconds.
    pub redis_cpu_us: Option<u64>,
    /// PostgreSQL transactions.
    pub db_transactions: Option<u64>,
    /// Caveats.
    pub notes: Vec<String>,
}

impl BenchResult {
    /// Builds the result of a finished run of the strategy named `strategy`.
    pub fn new(
        strategy: &str,
        workload: &Workload,
        tally: &Tally,
        observed: &Observed,
        work: ServerWork,
    ) -> Self {
        let problems = observed.problems();
        let requests = tally.requests.max(1) as f64;
        let seconds = tally.elapsed.as_secs_f64().max(1e-9);
        Self {
            strategy: strategy.to_owned(),
            scenario: workload.scenario.clone(),
            buyers: tally.buyers,
            requests: tally.requests,
            stock: workload.stock,
            skus: workload.skus,
            concurrency: workload.concurrency,
            purchased: tally.purchased,
            sold_out: tally.sold_out,
            already_purchased: tally.already_purchased,
            failed: tally.failed,
            remaining: observed.verification.as_ref().map(|v| v.remaining),
            oversold: observed.oversold(),
            duplicate_buyers: tally.duplicate_buyers,
            elapsed_ms: tally.elapsed.as_secs_f64() * 1e3,
            per_second: tally.requests as f64 / seconds,
            p50_us: tally.latencies.quantile_us(0.5),
            p99_us: tally.latencies.quantile_us(0.99),
            p999_us: tally.latencies.quantile_us(0.999),
            max_us: tally.latencies.max_us(),
            redis_cmds_per_purchase: work
                .redis_commands
                .as_ref()
                .map(|commands| commands.values().sum::<u64>() as f64 / requests),
            redis_commands: work.redis_commands,
            redis_us_per_purchase: work.redis_command_us.map(|us| us as f64 / requests),
            redis_cpu_us_per_purchase: work.redis_cpu_us.map(|us| us as f64 / requests),
            db_tx_per_purchase: work.db_transactions.map(|tx| tx as f64 / requests),
            ok: problems.is_empty(),
            problems,
            notes: work.notes,
            timeline: tally.timeline.clone(),
        }
    }

    /// The result of a strategy that could not run at all.
    pub fn could_not_run(kind: StrategyKind, workload: &Workload, why: String) -> Self {
        let observed = Observed {
            stock: workload.stock,
            verification_error: Some("the run did not take place".into()),
            ..Observed::default()
        };
        let mut result = Self::new(
            kind.as_str(),
            workload,
            &Tally::default(),
            &observed,
            ServerWork::default(),
        );
        result.problems = vec![format!("could not run: {why}")];
        result.ok = false;
        result
    }
}

/// Every strategy's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BenchReport {
    /// In the order they ran.
    pub results: Vec<BenchResult>,
}

/// What `--json` prints.
#[derive(Serialize)]
struct JsonReport<'a> {
    results: &'a [BenchResult],
    ratios: Ratios,
}

impl BenchReport {
    /// Whether every strategy kept every invariant.
    pub fn all_ok(&self) -> bool {
        self.results.iter().all(|r| r.ok)
    }

    /// One JSON object: `{"results": [...], "ratios": {...}}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&JsonReport {
            results: &self.results,
            ratios: self.ratios(),
        })
        .expect("a report always serializes")
    }

    fn find(&self, strategy: StrategyKind) -> Option<&BenchResult> {
        self.results
            .iter()
            .find(|r| r.strategy == strategy.as_str())
    }
}
