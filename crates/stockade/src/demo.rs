//! `stockade demo`: a simulated flash sale with a progress bar and a result
//! table (or JSON).

use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use stockade_bench::backend::Backend;
use stockade_bench::flash_sale::{self, FlashSale};

use crate::cli::DemoArgs;

/// Runs the demo. Exits 1 if an invariant broke.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let mut sale = FlashSale::new(args.buyers, args.stock)?;
    if let Some(concurrency) = args.concurrency {
        sale = sale.with_concurrency(concurrency)?;
    }
    let backend = Backend::connect(
        args.engine,
        args.redis_url.as_deref(),
        args.database_url.as_deref(),
    )
    .await?;
    eprintln!(
        "flash sale: {} buyers for {} items on the {}",
        args.buyers,
        args.stock,
        backend.description()
    );

    let progress = ProgressBar::with_draw_target(
        Some(args.buyers as u64),
        ProgressDrawTarget::stderr_with_hz(10),
    );
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} answers  {per_sec}  {elapsed}")
            .context("progress bar template")?,
    );
    let ticks = progress.clone();
    let report = flash_sale::run(backend.engine(), &sale, move || ticks.inc(1)).await?;
    progress.finish_and_clear();

    if args.json {
        let value = json!({
            "engine": report.engine,
            "buyers": report.buyers,
            "stock": report.stock,
            "purchased": report.purchased,
            "sold_out": report.sold_out,
            "remaining": report.remaining,
            "oversold": report.oversold,
            "duplicate_buyers": report.duplicate_buyers,
            "errors": report.errors,
            "elapsed_ms": report.elapsed_ms,
            "per_second": report.per_second,
            "p50_us": report.p50_us,
            "p99_us": report.p99_us,
            "ok": report.ok,
        });
        println!("{value}");
    } else {
        print!("{}", report.to_table());
    }
    if report.ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("an invariant broke: see the table above");
        Ok(ExitCode::from(1))
    }
}
