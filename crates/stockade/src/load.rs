//! `stockade load`: a crowd sent over HTTP to a running `stockade serve`,
//! with a progress bar on stderr and the result on stdout.
//!
//! Exit status: 0 when every check held, 1 when one broke, 2 for bad input
//! or a service that cannot be used.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stockade_bench::http_load::{self, DEFAULT_CONNECTIONS, LoadConfig};
use stockade_bench::scenario::Workload;

use crate::cli::LoadArgs;

/// Runs the load.
pub async fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let config = config(&args)?;
    eprintln!("{} against {}", config.workload.describe(), config.url);
    let bar = ProgressBar::with_draw_target(
        config.workload.requests().map(|n| n as u64),
        ProgressDrawTarget::stderr_with_hz(10),
    );
    let template = match config.workload.requests() {
        Some(_) => "{bar:40} {pos}/{len} answers  {per_sec}  {elapsed}",
        None => "{spinner} {pos} answers  {per_sec}  {elapsed}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    if config.workload.requests().is_none() {
        bar.enable_steady_tick(Duration::from_millis(100));
    }
    let ticks = bar.clone();
    let report = http_load::run(&config, Arc::new(move || ticks.inc(1))).await?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!("{} against {}.\n", config.workload.describe(), config.url);
        print!("{}", report.to_markdown());
    }
    if report.result.ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("a check failed: see the table");
        Ok(ExitCode::from(1))
    }
}

fn config(args: &LoadArgs) -> anyhow::Result<LoadConfig> {
    let scenario = args.workload.scenario();
    let mut overrides = args.workload.overrides();
    // One connection per request in flight: keep the default within what a
    // machine's file descriptors allow.
    let workload = Workload::new(scenario, &overrides)?;
    if overrides.concurrency.is_none() {
        overrides.concurrency = Some(workload.concurrency.min(DEFAULT_CONNECTIONS));
    }
    Ok(LoadConfig {
        url: args.url.clone(),
        admin_token: args.admin_token.clone(),
        workload: Workload::new(scenario, &overrides)?,
        hold_seconds: args.hold_seconds,
    })
}
