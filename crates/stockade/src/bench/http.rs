//! `stockade bench http`: `stockade serve` against a bare axum handler,
//! both in child processes of this binary, driven over HTTP with the same
//! keep-alive crowd; progress on stderr, the result on stdout.
//!
//! The baseline is this binary's hidden `bench http-baseline`; each
//! `stockade serve` setup is this binary's `serve` on a free port with a
//! temporary data directory and a generated admin token. For each setup
//! and phase, the baseline runs first, then the setup, and the ratio is
//! taken between the two. Every child is stopped when the bench ends, fails
//! or is interrupted (Ctrl-C), and killed by the kernel if the bench dies.
//!
//! Exit status: 0 when every check held, 1 when one broke, 2 for bad input
//! or servers that cannot be started, 130 when interrupted.

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stockade_bench::http_bench::{self, BASELINE, HttpBenchReport, Phase, PhaseResult, Target};
use stockade_bench::report::{format_rate, format_us};
use stockade_bench::scenario::MAX_DURATION;
use stockade_bench::servers::Servers;
use stockade_core::redact::mask_passwords_in;
use stockade_test_support::ServeProcess;
use tempfile::TempDir;

use crate::cli::{HttpArgs, HttpBaselineArgs, ServeSetup};

/// The most connections: each is a socket here and one in the server, and
/// the file descriptor limit is often 20,000 or lower.
const MAX_CONNECTIONS: usize = 8_192;

/// Runs the benchmark, stopping every child server when it ends or on
/// Ctrl-C.
pub async fn run(args: HttpArgs) -> anyhow::Result<ExitCode> {
    if args.connections == 0 || args.connections > MAX_CONNECTIONS {
        bail!(
            "--connections must be between 1 and {MAX_CONNECTIONS}, not {}",
            args.connections
        );
    }
    if args.duration.is_zero() || args.duration > MAX_DURATION {
        bail!(
            "--duration must be more than 0 s and at most {} s",
            MAX_DURATION.as_secs()
        );
    }
    let setups = setups(&args);
    // Caught before the first child starts: a signal at any point stops the
    // bench gracefully. Dropping the bench's future drops its child
    // servers, which stops them.
    let stop = crate::signals::stop_requested()?;
    tokio::select! {
        result = bench(&args, &setups) => result,
        () = stop => {
            eprintln!("interrupted: stopping the servers");
            Ok(ExitCode::from(130))
        }
    }
}

/// The setups to drive: those named, else embedded plus those the URLs
/// given point to.
fn setups(args: &HttpArgs) -> Vec<ServeSetup> {
    let mut setups = args.targets.clone().unwrap_or_else(|| {
        let mut setups = vec![ServeSetup::Embedded];
        if args.redis_url.is_some() {
            setups.push(ServeSetup::RedisSqlite);
        }
        if args.database_url.is_some() {
            setups.push(ServeSetup::RedisPostgres);
        }
        setups
    });
    let mut seen = Vec::new();
    setups.retain(|s| {
        let first = !seen.contains(s);
        seen.push(*s);
        first
    });
    setups
}

async fn bench(args: &HttpArgs, setups: &[ServeSetup]) -> anyhow::Result<ExitCode> {
    let program = std::env::current_exe().context("finding this program to start its servers")?;
    let needs_redis = setups
        .iter()
        .any(|s| matches!(s, ServeSetup::RedisSqlite | ServeSetup::RedisPostgres));
    let needs_postgres = setups.contains(&ServeSetup::RedisPostgres);
    let servers = Servers::prepare(
        needs_redis,
        needs_postgres,
        args.redis_url.as_deref(),
        args.database_url.as_deref(),
    )
    .await?;
    for line in servers.describe() {
        eprintln!("{line}");
    }
    let dir = tempfile::Builder::new()
        .prefix("stockade-bench-http-")
        .tempdir()
        .context("a temporary directory for the servers")?;

    let mut baseline_command = Command::new(&program);
    baseline_command.args(["bench", "http-baseline", "--listen", "127.0.0.1:0"]);
    let baseline_server = http_bench::start_server(
        "the baseline",
        baseline_command,
        &dir.path().join("baseline.log"),
    )?;
    let baseline = Target {
        name: BASELINE.to_owned(),
        url: baseline_server.url().to_owned(),
        admin_token: None,
    };
    eprintln!("baseline (bare axum echo) at {}", baseline.url);

    let mut report = HttpBenchReport {
        connections: args.connections,
        duration_s: args.duration.as_secs_f64(),
        results: Vec::new(),
    };
    let runs = setups.len() * Phase::ALL.len() * 2;
    let mut run = 0;
    for &setup in setups {
        if needs_redis {
            // Each setup starts from an empty Redis (the bench's own
            // throwaway one is flushed).
            servers.clean_redis().await?;
        }
        let (server, target) = start_serve(&program, setup, &servers, &dir).await?;
        eprintln!("{} (stockade serve) at {}", target.name, target.url);
        for phase in Phase::ALL {
            run += 1;
            let base = measure(&baseline, phase, args, None, (run, runs)).await?;
            let base_rate = base.per_second;
            report.results.push(base);
            run += 1;
            let result = measure(&target, phase, args, Some(base_rate), (run, runs)).await?;
            report.results.push(result);
        }
        server.stop();
    }
    baseline_server.stop();
    drop(servers);

    if args.json {
        println!("{}", report.to_json());
    } else {
        println!(
            "{} keep-alive connections, {} s per run.\n",
            args.connections,
            args.duration.as_secs_f64()
        );
        print!("{}", report.to_markdown());
    }
    if report.all_ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("a check failed: see the table");
        Ok(ExitCode::from(1))
    }
}

/// Starts `stockade serve` in `setup`, on a free port, with its data in
/// `dir` and a generated admin token.
async fn start_serve(
    program: &std::path::Path,
    setup: ServeSetup,
    servers: &Servers,
    dir: &TempDir,
) -> anyhow::Result<(ServeProcess, Target)> {
    let token = http_bench::fresh_admin_token();
    let mut command = Command::new(program);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join(format!("{}-data", setup.as_str())));
    if matches!(setup, ServeSetup::RedisSqlite | ServeSetup::RedisPostgres) {
        let url = servers.redis_url().context("no Redis was prepared")?;
        command.args(["--engine", "redis", "--redis-url", url]);
    }
    if setup == ServeSetup::RedisPostgres {
        let database = servers
            .database()
            .await
            .map_err(|e| anyhow::anyhow!("a database for redis-postgres: {e}"))?;
        command.args(["--database-url", &database.url]);
    }
    // The bench is one client that opens every connection.
    command.args(["--max-connections-per-client", "1000000"]);
    // Only these settings: no STOCKADE_* of the caller's environment.
    for (name, _) in std::env::vars() {
        if name.starts_with("STOCKADE_") {
            command.env_remove(name);
        }
    }
    command
        .env("STOCKADE_ADMIN_TOKEN", &token)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1");
    let log = dir.path().join(format!("{}.log", setup.as_str()));
    let name = format!("stockade serve ({})", setup.as_str());
    let server = http_bench::start_server(&name, command, &log)
        // Its output may quote a URL with its password.
        .map_err(|e| anyhow::anyhow!(mask_passwords_in(&e.to_string())))?;
    let target = Target {
        name: setup.as_str().to_owned(),
        url: server.url().to_owned(),
        admin_token: Some(token),
    };
    Ok((server, target))
}

/// One phase of one target, announced, with a progress spinner.
async fn measure(
    target: &Target,
    phase: Phase,
    args: &HttpArgs,
    baseline_per_second: Option<f64>,
    (run, runs): (usize, usize),
) -> anyhow::Result<PhaseResult> {
    eprintln!(
        "[{run}/{runs}] {}: {}, {} connections for {} s",
        target.name,
        phase.describe(),
        args.connections,
        args.duration.as_secs_f64()
    );
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>16} {spinner} {pos} answers  {per_sec}  {elapsed}")
    {
        bar.set_style(style);
    }
    bar.set_prefix(format!("{} {}", target.name, phase));
    bar.enable_steady_tick(Duration::from_millis(100));
    let ticks = bar.clone();
    let result = http_bench::run_phase(
        target,
        phase,
        args.connections,
        args.duration,
        baseline_per_second,
        Arc::new(move || ticks.inc(1)),
    )
    .await;
    bar.finish_and_clear();
    let result = result?;
    let ratio = result
        .ratio_to_baseline
        .map(|r| format!(", {r:.2}× the baseline"))
        .unwrap_or_default();
    let verdict = if result.ok {
        "checks held".to_owned()
    } else {
        format!("BROKEN: {}", result.problems.join("; "))
    };
    eprintln!(
        "{:>16}: {} requests/s, p50 {}, p99 {}{ratio}, {verdict}",
        format!("{} {}", target.name, phase),
        format_rate(result.per_second),
        format_us(result.p50_us),
        format_us(result.p99_us),
    );
    Ok(result)
}

/// `stockade bench http-baseline`: the bare handler, until SIGTERM or
/// Ctrl-C.
pub async fn serve_baseline(args: HttpBaselineArgs) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
    // Caught before the address is announced, which is when it may come.
    let stop = crate::signals::stop_requested()?;
    println!("baseline listening on http://{}", listener.local_addr()?);
    http_bench::serve_baseline(listener, stop).await?;
    Ok(ExitCode::SUCCESS)
}
