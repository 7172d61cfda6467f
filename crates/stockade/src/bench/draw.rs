//! `stockade bench draw`: close → published of a large draw on the
//! embedded default (this binary's `stockade serve` with no settings but a
//! free port and a temporary data directory: the in-memory engine and a
//! SQLite order store), a line per step on stderr, the median and range of
//! the runs on stdout ([`stockade_bench::draw_bench`]).
//!
//! Exit status: 0 when every draw was published and adds up, 1 when one
//! does not, 2 for bad input or a server that cannot be started.

use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};
use clap::Args;
use stockade_bench::draw_bench::{self, DrawBenchConfig, DrawRun};
use stockade_bench::http_bench;
use stockade_bench::shards::summary;

/// `stockade bench draw`.
#[derive(Debug, Args)]
pub struct DrawArgs {
    /// Entries per draw (1 to 1,000,000).
    #[arg(long, default_value_t = 100_000)]
    pub entries: usize,
    /// Items on sale, one SKU, one per entry (default: as many as the
    /// entries, so every entry is bought for: the most work a draw of that
    /// many entries makes).
    #[arg(long)]
    pub stock: Option<u32>,
    /// Draws, one after another on the same server (1 to 20).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Print the runs as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark.
pub async fn run(args: DrawArgs) -> anyhow::Result<ExitCode> {
    if !(1..=1_000_000).contains(&args.entries) {
        bail!("--entries must be 1 to 1000000, not {}", args.entries);
    }
    if !(1..=20).contains(&args.runs) {
        bail!("--runs must be 1 to 20, not {}", args.runs);
    }
    let stock = args
        .stock
        .unwrap_or(u32::try_from(args.entries).unwrap_or(u32::MAX));
    if stock == 0 {
        bail!("--stock must be at least 1");
    }
    let program = std::env::current_exe().context("finding this program to start its server")?;
    let dir = tempfile::Builder::new()
        .prefix("stockade-bench-draw-")
        .tempdir()
        .context("a temporary directory for the server")?;
    let data = dir.path().join("data");
    let token = http_bench::fresh_admin_token();
    let mut command = Command::new(&program);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data);
    // Only these settings: no STOCKADE_* of the caller's environment.
    for (name, _) in std::env::vars() {
        if name.starts_with("STOCKADE_") {
            command.env_remove(name);
        }
    }
    command
        .env("STOCKADE_ADMIN_TOKEN", &token)
        // The draw's own line: its steps' times.
        .env("RUST_LOG", "warn,stockade_server::draws=info")
        .env("NO_COLOR", "1");
    let server =
        match http_bench::start_server("stockade serve", command, &dir.path().join("serve.log")) {
            Ok(server) => server,
            Err(error) => {
                eprintln!("stockade bench draw: {error}");
                return Ok(ExitCode::from(2));
            }
        };
    eprintln!("stockade serve (embedded default) at {}", server.url());
    let config = DrawBenchConfig {
        url: server.url().to_owned(),
        admin_token: token,
        store_url: format!("sqlite://{}?mode=rw", data.join("orders.db").display()),
        entries: args.entries,
        stock,
    };
    let mut runs: Vec<DrawRun> = Vec::new();
    for n in 1..=args.runs {
        let sale = format!("draw-bench-{n}");
        eprintln!(
            "run {n}/{}: {} entries, {stock} items",
            args.runs, args.entries
        );
        match draw_bench::run_once(&config, &sale, &|line| eprintln!("  {line}")).await {
            Ok(run) => {
                let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
                if let Some(line) = log.lines().rev().find(|l| l.contains("draw made")) {
                    eprintln!("  the service: {}", line.trim());
                }
                runs.push(run);
            }
            Err(error) => {
                eprintln!("stockade bench draw: {error}");
                server.stop();
                return Ok(ExitCode::from(1));
            }
        }
    }
    server.stop();
    let published: Vec<f64> = runs.iter().map(|r| r.close_to_published_seconds).collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "runs": runs }))?
        );
    } else {
        println!(
            "| {} entries, {stock} items, embedded default, {} runs | median (range) |",
            args.entries, args.runs
        );
        println!("| --- | --- |");
        println!("| close → published, s | {} |", summary(&published));
    }
    Ok(ExitCode::SUCCESS)
}
