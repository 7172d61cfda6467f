//! The result of `stockade bench`: one [`BenchResult`] per strategy, as a
//! Markdown table or as JSON (`{"results": [...]}`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::check::Observed;
use crate::driver::Tally;
use crate::scenario::Workload;
use crate::strategy::StrategyKind;
use crate::timeline::WindowSummary;

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

/// The ratios issue 9's targets are stated in, between strategies of the
/// same run. Each is None unless both strategies ran, kept every invariant
/// and have the figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// `stockade-redis` requests/s over `redis-lua`'s (higher is better).
    pub stockade_redis_to_redis_lua_per_second: Option<f64>,
    /// `stockade-redis` Redis µs per purchase (`INFO commandstats`) over
    /// `redis-lua`'s (lower is better).
    pub stockade_redis_to_redis_lua_redis_us: Option<f64>,
    /// The same from `INFO cpu` (lower is better).
    pub stockade_redis_to_redis_lua_redis_cpu_us: Option<f64>,
    /// `stockade-redis` requests/s over `pg-for-update`'s (higher is
    /// better).
    pub stockade_redis_to_pg_for_update_per_second: Option<f64>,
}

impl Ratios {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
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

    /// The ratios between strategies that the issue's targets use.
    pub fn ratios(&self) -> Ratios {
        use StrategyKind::{PgForUpdate, RedisLua, StockadeRedis};
        Ratios {
            stockade_redis_to_redis_lua_per_second: self.ratio(StockadeRedis, RedisLua),
            stockade_redis_to_redis_lua_redis_us: self
                .figure_ratio(StockadeRedis, RedisLua, |r| r.redis_us_per_purchase),
            stockade_redis_to_redis_lua_redis_cpu_us: self.figure_ratio(
                StockadeRedis,
                RedisLua,
                |r| r.redis_cpu_us_per_purchase,
            ),
            stockade_redis_to_pg_for_update_per_second: self.ratio(StockadeRedis, PgForUpdate),
        }
    }

    /// `figure` of `top` over `figure` of `bottom`, if both ran, kept the
    /// invariants and have it.
    fn figure_ratio(
        &self,
        top: StrategyKind,
        bottom: StrategyKind,
        figure: impl Fn(&BenchResult) -> Option<f64>,
    ) -> Option<f64> {
        let (top, bottom) = (self.find(top)?, self.find(bottom)?);
        if !(top.ok && bottom.ok) {
            return None;
        }
        let (top, bottom) = (figure(top)?, figure(bottom)?);
        (bottom > 0.0).then(|| top / bottom)
    }

    /// The ratios as one line (empty when there is none).
    fn ratios_line(&self) -> String {
        let ratios = self.ratios();
        if ratios.is_empty() {
            return String::new();
        }
        let times = |ratio: Option<f64>, what: &str| ratio.map(|r| format!("{r:.2}× {what}"));
        let mut parts = Vec::new();
        let against_lua: Vec<String> = [
            times(ratios.stockade_redis_to_redis_lua_per_second, "requests/s"),
            times(
                ratios.stockade_redis_to_redis_lua_redis_us,
                "Redis µs per purchase (cmdstats)",
            ),
            times(
                ratios.stockade_redis_to_redis_lua_redis_cpu_us,
                "Redis µs per purchase (cpu)",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !against_lua.is_empty() {
            parts.push(format!(
                "stockade-redis / redis-lua: {}",
                against_lua.join(", ")
            ));
        }
        if let Some(ratio) = times(
            ratios.stockade_redis_to_pg_for_update_per_second,
            "requests/s",
        ) {
            parts.push(format!("stockade-redis / pg-for-update: {ratio}"));
        }
        format!("\nRatios: {}.\n", parts.join("; "))
    }

    fn find(&self, strategy: StrategyKind) -> Option<&BenchResult> {
        self.results
            .iter()
            .find(|r| r.strategy == strategy.as_str())
    }

    /// How many times faster `fast` was than `slow` (requests per second),
    /// if both ran and kept the invariants.
    pub fn ratio(&self, fast: StrategyKind, slow: StrategyKind) -> Option<f64> {
        let (fast, slow) = (self.find(fast)?, self.find(slow)?);
        (fast.ok && slow.ok && slow.per_second > 0.0).then(|| fast.per_second / slow.per_second)
    }

    /// The table, what broke, the notes, the comparison with the article
    /// and, for timed runs, the second-by-second table.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let any_repeat = self.results.iter().any(|r| r.already_purchased > 0);
        let _ = writeln!(
            out,
            "| strategy | purchased | sold out |{} failed | remaining | elapsed | requests/s | p50 | p99 | p99.9 | max | Redis cmds/req | Redis µs/req (cmdstats) | Redis µs/req (cpu) | DB tx/req | invariants |",
            if any_repeat { " repeat refused |" } else { "" }
        );
        let _ = writeln!(
            out,
            "| --- | ---: | ---: |{} ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            if any_repeat { " ---: |" } else { "" }
        );
        for r in &self.results {
            let repeat = if any_repeat {
                format!(" {} |", r.already_purchased)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} |{repeat} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.strategy,
                r.purchased,
                r.sold_out,
                r.failed,
                r.remaining.map_or("?".to_owned(), |v| v.to_string()),
                format_ms(r.elapsed_ms),
                format_rate(r.per_second),
                format_us(r.p50_us),
                format_us(r.p99_us),
                format_us(r.p999_us),
                format_us(r.max_us),
                r.redis_cmds_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.redis_us_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.redis_cpu_us_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                r.db_tx_per_purchase
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                if r.ok { "held" } else { "**BROKEN**" },
            );
        }
        out.push_str(&self.ratios_line());
        let broken: Vec<_> = self.results.iter().filter(|r| !r.ok).collect();
        if !broken.is_empty() {
            let _ = writeln!(out, "\nBroken:\n");
            for r in broken {
                let _ = writeln!(out, "- **{}**: {}", r.strategy, r.problems.join("; "));
            }
        }
        let noted: Vec<_> = self
            .results
            .iter()
            .filter(|r| !r.notes.is_empty())
            .collect();
        if !noted.is_empty() {
            let _ = writeln!(out, "\nNotes:\n");
            for r in noted {
                let _ = writeln!(out, "- {}: {}", r.strategy, r.notes.join("; "));
            }
        }
        if let Some(ratio) = self.ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate) {
            let articles_pair = self
                .ratio(StrategyKind::RedisLua, StrategyKind::PgForUpdate)
                .map(|r| format!("; redis-lua, the article's own pair, {r:.1}×"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "\nstockade-redis answered {ratio:.1}× as many requests per second as pg-for-update\
                 {articles_pair} (the founding article measured {ARTICLE_RATIO}× for its Redis Lua \
                 script against its database lock, 100 buyers for 100 items)."
            );
        }
        out.push_str(&self.timeline_markdown());
        out
    }

    fn timeline_markdown(&self) -> String {
        let timed: Vec<_> = self
            .results
            .iter()
            .filter(|r| !r.timeline.is_empty())
            .collect();
        let Some(longest) = timed.iter().map(|r| r.timeline.len()).max() else {
            return String::new();
        };
        let mut out = String::from("\nSecond by second (requests/s, p99):\n\n| second |");
        for r in &timed {
            let _ = write!(out, " {} |", r.strategy);
        }
        out.push_str("\n| ---: |");
        out.push_str(&" ---: |".repeat(timed.len()));
        out.push('\n');
        for i in 0..longest {
            let _ = write!(out, "| {} |", i + 1);
            for r in &timed {
                match r.timeline.get(i) {
                    Some(w) => {
                        let _ = write!(
                            out,
                            " {} ({}) |",
                            format_rate(w.per_second),
                            format_us(w.p99_us)
                        );
                    }
                    None => out.push_str(" |"),
                }
            }
            out.push('\n');
        }
        out
    }
}

/// Microseconds for people: `850 µs`, `1.24 ms`, `2.25 s`.
pub fn format_us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.2} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

fn format_ms(ms: f64) -> String {
    if ms < 1_000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

/// A rate with thousands separators: `12,345`.
pub fn format_rate(rate: f64) -> String {
    let whole = rate.round() as u64;
    let digits = whole.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scenario::{Overrides, Scenario};
    use crate::strategy::Verification;

    fn result(kind: StrategyKind, per_second_requests: u64, broken: bool) -> BenchResult {
        result_with_redis_us(kind, per_second_requests, broken, 1_500)
    }

    /// A run of 150 requests during which Redis spent `redis_us` µs in
    /// commands and twice that in CPU.
    fn result_with_redis_us(
        kind: StrategyKind,
        per_second_requests: u64,
        broken: bool,
        redis_us: u64,
    ) -> BenchResult {
        let workload = Workload::new(Some(Scenario::Seed150), &Overrides::default()).unwrap();
        let mut tally = Tally {
            requests: 150,
            buyers: 150,
            purchased: 100,
            sold_out: 50,
            elapsed: Duration::from_secs_f64(150.0 / per_second_requests as f64),
            ..Tally::default()
        };
        tally.latencies.record(Duration::from_micros(300));
        let observed = Observed::new(
            100,
            &tally,
            Ok(Verification {
                remaining: if broken { -1 } else { 0 },
                recorded_orders: Some(100),
                lowest_stock_seen: None,
            }),
        );
        let work = ServerWork {
            redis_commands: kind
                .needs_redis()
                .then(|| BTreeMap::from([("evalsha".to_owned(), 150), ("get".to_owned(), 150)])),
            redis_command_us: kind.needs_redis().then_some(redis_us),
            redis_cpu_us: kind.needs_redis().then_some(2 * redis_us),
            db_transactions: kind.needs_postgres().then_some(300),
            notes: Vec::new(),
        };
        BenchResult::new(kind.as_str(), &workload, &tally, &observed, work)
    }

    #[test]
    fn the_json_has_every_key_the_issue_names() {
        let report = BenchReport {
            results: vec![
                result(StrategyKind::RedisLua, 1_000, false),
                result(StrategyKind::PgForUpdate, 100, false),
            ],
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        let results = json["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        for key in [
            "strategy",
            "scenario",
            "purchased",
            "sold_out",
            "remaining",
            "oversold",
            "duplicate_buyers",
            "elapsed_ms",
            "per_second",
            "p50_us",
            "p99_us",
            "p999_us",
            "redis_cmds_per_purchase",
            "db_tx_per_purchase",
            "ok",
        ] {
            for result in results {
                assert!(result.get(key).is_some(), "{key} missing from {result}");
            }
        }
        assert_eq!(results[0]["redis_cmds_per_purchase"], 2.0);
        assert!(results[0]["db_tx_per_purchase"].is_null());
        assert_eq!(results[1]["db_tx_per_purchase"], 2.0);
        assert_eq!(results[1]["scenario"], "seed-150");
    }

    #[test]
    fn a_broken_strategy_is_shown_as_broken_with_what_broke() {
        let report = BenchReport {
            results: vec![
                result(StrategyKind::RedisDecr, 1_000, true),
                result(StrategyKind::RedisLua, 1_000, false),
            ],
        };
        assert!(!report.all_ok());
        let table = report.to_markdown();
        assert!(
            table.contains("| redis-decr | 100 | 50 | 0 | -1 |"),
            "{table}"
        );
        assert!(table.contains("**BROKEN**"));
        assert!(
            table.contains("- **redis-decr**: the stored stock is negative: -1"),
            "{table}"
        );
        assert!(table.contains("| redis-lua |"));
    }

    #[test]
    fn the_ratio_to_the_row_lock_is_reported_next_to_the_articles() {
        let report = BenchReport {
            results: vec![
                result(StrategyKind::PgForUpdate, 500, false),
                result(StrategyKind::StockadeRedis, 5_000, false),
            ],
        };
        let ratio = report
            .ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate)
            .unwrap();
        assert!((ratio - 10.0).abs() < 0.01, "{ratio}");
        assert!(
            report
                .to_markdown()
                .contains("10.0× as many requests per second")
        );
        // No ratio for a broken strategy.
        let broken = BenchReport {
            results: vec![
                result(StrategyKind::PgForUpdate, 500, true),
                result(StrategyKind::StockadeRedis, 5_000, false),
            ],
        };
        assert_eq!(
            broken.ratio(StrategyKind::StockadeRedis, StrategyKind::PgForUpdate),
            None
        );
    }

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(format_us(850), "850 µs");
        assert_eq!(format_us(1_240), "1.24 ms");
        assert_eq!(format_us(2_250_000), "2.25 s");
        assert_eq!(format_rate(1_234_567.4), "1,234,567");
        assert_eq!(format_rate(999.0), "999");
    }

    #[test]
    fn redis_time_per_purchase_is_in_the_table_the_json_and_the_ratios() {
        let report = BenchReport {
            results: vec![
                result_with_redis_us(StrategyKind::PgForUpdate, 500, false, 0),
                result_with_redis_us(StrategyKind::RedisLua, 4_000, false, 600),
                result_with_redis_us(StrategyKind::StockadeRedis, 6_000, false, 150),
            ],
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        let lua = &json["results"][1];
        // 600 µs over 150 requests; the CPU time is twice that.
        assert_eq!(lua["redis_us_per_purchase"], 4.0);
        assert_eq!(lua["redis_cpu_us_per_purchase"], 8.0);
        assert!(json["results"][0]["redis_us_per_purchase"].is_null());
        let ratios = &json["ratios"];
        assert_eq!(ratios["stockade_redis_to_redis_lua_per_second"], 1.5);
        assert_eq!(ratios["stockade_redis_to_redis_lua_redis_us"], 0.25);
        assert_eq!(ratios["stockade_redis_to_redis_lua_redis_cpu_us"], 0.25);
        assert_eq!(ratios["stockade_redis_to_pg_for_update_per_second"], 12.0);
        let table = report.to_markdown();
        assert!(
            table.contains("Redis µs/req (cmdstats) | Redis µs/req (cpu)"),
            "{table}"
        );
        assert!(
            table.contains("| 2.00 | 4.00 | 8.00 | – | held |"),
            "{table}"
        );
        assert!(
            table.contains(
                "Ratios: stockade-redis / redis-lua: 1.50× requests/s, \
                 0.25× Redis µs per purchase (cmdstats), 0.25× Redis µs per purchase (cpu); \
                 stockade-redis / pg-for-update: 12.00× requests/s."
            ),
            "{table}"
        );
        // Without redis-lua, only the ratio to the row lock; without either,
        // no line and null ratios.
        let alone = BenchReport {
            results: vec![report.results[0].clone(), report.results[2].clone()],
        };
        assert!(
            alone
                .to_markdown()
                .contains("Ratios: stockade-redis / pg-for-update: 12.00× requests/s.\n")
        );
        let none = BenchReport {
            results: vec![report.results[1].clone()],
        };
        assert!(!none.to_markdown().contains("Ratios"));
        let json: serde_json::Value = serde_json::from_str(&none.to_json()).unwrap();
        assert!(json["ratios"]["stockade_redis_to_redis_lua_redis_us"].is_null());
    }
}
