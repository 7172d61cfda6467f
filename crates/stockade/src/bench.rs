//! `stockade bench`: every strategy side by side, with a progress bar per
//! strategy on stderr, and the result as a Markdown table (or JSON) on
//! stdout, optionally an SVG chart. `stockade bench lock` and `stockade
//! bench http` (in `http`) and `stockade bench draw` (in `draw`) are the
//! other benchmarks.
//!
//! Exit status: 0 when Stockade's own engines kept every invariant, 1 when
//! one of them broke, 2 for bad input or servers that cannot be used. The
//! founding articles' strategies are shown as broken when they are, but
//! that is a finding of the benchmark, not a failure of the run.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stockade_bench::compare::{self, BenchConfig, Progress};
use stockade_bench::report::{BenchResult, format_rate, format_us};
use stockade_bench::scenario::Workload;
use stockade_bench::servers::Servers;
use stockade_bench::strategy::StrategyKind;
use stockade_bench::{chart, lock};

use crate::cli::{BenchArgs, BenchCommand, LockArgs, ShardsArgs};

pub(crate) mod draw;
mod http;
mod servers;

/// `stockade bench shards`: a line per run on stderr, the runs and the
/// ratios (median and range over the rounds) on stdout.
async fn run_shards(args: ShardsArgs) -> anyhow::Result<ExitCode> {
    use stockade_bench::shards::{self, ShardsOptions};
    let options = ShardsOptions {
        buyers: args.buyers,
        concurrency: args.concurrency,
        shards: args.shards,
        rounds: args.rounds,
        rate: args.rate,
    };
    let report = match shards::run(&options, |line| eprintln!("{line}")).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("stockade bench shards: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "| {} shards ÷ 1, median (range) of {} rounds | ratio |\n| --- | --- |",
            args.shards, args.rounds
        );
        println!(
            "| busiest primary's CPU per purchase | {} |",
            shards::summary(&report.busiest_cpu_ratio)
        );
        println!(
            "| busiest primary's script time per purchase | {} |",
            shards::summary(&report.busiest_script_ratio)
        );
        println!(
            "| purchases per second | {} |",
            shards::summary(&report.throughput_ratio)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The most connections per pool: PostgreSQL allows 100 by default.
const MAX_POOL_SIZE: u32 = 90;

/// Runs the comparison (or `bench lock`).
pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(BenchCommand::Lock(lock)) => return run_lock(lock).await,
        Some(BenchCommand::Shards(shards)) => return run_shards(shards).await,
        Some(BenchCommand::Http(http)) => return http::run(http).await,
        Some(BenchCommand::HttpBaseline(baseline)) => return http::serve_baseline(baseline).await,
        Some(BenchCommand::Servers(servers)) => return servers::run(servers).await,
        Some(BenchCommand::Draw(draw)) => return draw::run(draw).await,
        None => {}
    }
    let config = config(&args)?;
    eprintln!("{}", config.workload.describe());
    let servers = Servers::prepare(
        config.needs_redis(),
        config.needs_postgres(),
        args.redis_url.as_deref(),
        args.database_url.as_deref(),
    )
    .await?;
    for line in servers.describe() {
        eprintln!("{line}");
    }

    let progress = Arc::new(Bars::default());
    let report = compare::run(&config, &servers, progress).await;
    drop(servers);

    if args.json {
        println!("{}", report.to_json());
    } else {
        println!(
            "{}; pool of {} connections per strategy (stockade-postgres: the order store's 16).\n",
            config.workload.describe(),
            config.pool_size
        );
        print!("{}", report.to_markdown());
    }
    if let Some(path) = &args.chart {
        chart::write_svg(&report, &config.workload.describe(), path)?;
        eprintln!("chart written to {}", path.display());
    }
    let engines_broken: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.strategy.starts_with("stockade-") && !r.ok)
        .map(|r| r.strategy.as_str())
        .collect();
    if engines_broken.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "an invariant broke in {}: see the table",
            engines_broken.join(", ")
        );
        Ok(ExitCode::from(1))
    }
}

/// `stockade bench lock`: the lock library against `rslock`.
async fn run_lock(args: LockArgs) -> anyhow::Result<ExitCode> {
    if args.clients == 0 || args.waiters < 2 || args.duration.is_zero() {
        bail!(
            "stockade bench lock needs --clients of at least 1, --waiters of at least 2 \
             and a --duration above zero"
        );
    }
    let options = lock::LockBenchOptions {
        clients: args.clients,
        waiters: args.waiters,
        duration: args.duration,
        ..lock::LockBenchOptions::default()
    };
    let servers = Servers::prepare(true, false, args.redis_url.as_deref(), None).await?;
    for line in servers.describe() {
        eprintln!("{line}");
    }
    let url = servers.redis_url().expect("Redis was asked for").to_owned();
    let report = lock::run(&url, &options, |progress| eprintln!("{progress}")).await?;
    drop(servers);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_markdown());
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks the command line and turns it into a [`BenchConfig`].
fn config(args: &BenchArgs) -> anyhow::Result<BenchConfig> {
    let workload = Workload::new(args.workload.scenario(), &args.workload.overrides())?;
    if args.pool_size == 0 || args.pool_size > MAX_POOL_SIZE {
        bail!(
            "--pool-size must be between 1 and {MAX_POOL_SIZE}, not {}",
            args.pool_size
        );
    }
    let mut strategies = args
        .strategies
        .clone()
        .unwrap_or_else(|| StrategyKind::ALL.to_vec());
    let mut seen = Vec::new();
    strategies.retain(|s| {
        let first = !seen.contains(s);
        seen.push(*s);
        first
    });
    if strategies.is_empty() {
        bail!("--strategies names no strategy");
    }
    Ok(BenchConfig {
        workload,
        strategies,
        pool_size: args.pool_size,
    })
}

/// One progress bar per strategy, on stderr.
#[derive(Default)]
struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress for Bars {
    fn started(&self, strategy: StrategyKind, answers: Option<u64>) {
        let target = ProgressDrawTarget::stderr_with_hz(10);
        let bar = match answers {
            Some(answers) => {
                let bar = ProgressBar::with_draw_target(Some(answers), target);
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix:>18} {bar:40} {pos}/{len} answers  {per_sec}  {elapsed}",
                ) {
                    bar.set_style(style);
                }
                bar
            }
            None => {
                let bar = ProgressBar::with_draw_target(None, target);
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix:>18} {spinner} {pos} answers  {per_sec}  {elapsed}",
                ) {
                    bar.set_style(style);
                }
                bar.enable_steady_tick(Duration::from_millis(100));
                bar
            }
        };
        bar.set_prefix(strategy.as_str());
        *self.bar.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn answered(&self) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|e| e.into_inner()) {
            bar.inc(1);
        }
    }

    fn finished(&self, result: &BenchResult) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
        let verdict = if result.ok {
            "invariants held".to_owned()
        } else {
            format!("BROKEN: {}", result.problems.join("; "))
        };
        eprintln!(
            "{:>18}: {} purchased, {} requests/s, p99 {}, {verdict}",
            result.strategy,
            result.purchased,
            format_rate(result.per_second),
            format_us(result.p99_us),
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<BenchConfig, String> {
        let cli = Cli::try_parse_from(["stockade", "bench"].iter().chain(args))
            .map_err(|e| e.to_string())?;
        let Command::Bench(args) = cli.command else {
            panic!("not a bench command");
        };
        config(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn the_default_is_the_articles_seed_with_every_strategy() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.workload.scenario, "seed-100");
        assert_eq!(config.strategies, StrategyKind::ALL.to_vec());
        assert_eq!(config.pool_size, 32);
    }

    #[test]
    fn strategies_and_scenarios_are_chosen_by_name() {
        let config = parse(&[
            "--scenario",
            "crowd",
            "--strategies",
            "redis-lua,stockade-redis,redis-lua",
        ])
        .unwrap();
        assert_eq!(config.workload.scenario, "crowd");
        assert_eq!(
            config.strategies,
            vec![StrategyKind::RedisLua, StrategyKind::StockadeRedis]
        );
        let timed = parse(&["--scenario", "sustained", "--duration", "2s"]).unwrap();
        assert_eq!(timed.workload.requests(), None);
    }

    #[test]
    fn the_lock_benchmark_is_a_subcommand() {
        let cli =
            Cli::try_parse_from(["stockade", "bench", "lock", "--json", "--waiters", "8"]).unwrap();
        let Command::Bench(args) = cli.command else {
            panic!("not a bench command");
        };
        let Some(BenchCommand::Lock(lock)) = args.command else {
            panic!("not bench lock");
        };
        assert!(lock.json);
        assert_eq!(lock.waiters, 8);
        // The comparison's flags do not mix with it.
        assert!(Cli::try_parse_from(["stockade", "bench", "--scenario", "crowd", "lock"]).is_err());
    }

    #[test]
    fn bad_input_is_refused() {
        for (args, needle) in [
            (&["--buyers", "0", "--stock", "10"][..], "--buyers"),
            (&["--scenario", "flash"][..], "unknown scenario"),
            (&["--strategies", "redis-magic"][..], "unknown strategy"),
            (&["--pool-size", "0"][..], "--pool-size"),
            (&["--duration", "soon"][..], "not a duration"),
            (
                &["--scenario", "crowd", "--concurrency", "0"][..],
                "--concurrency",
            ),
            (&["--buyers", "10"][..], "--stock"),
        ] {
            let error = parse(args).unwrap_err();
            assert!(error.contains(needle), "{args:?}: {error}");
        }
    }
}
