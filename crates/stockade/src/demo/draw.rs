//! `stockade demo --draw`: a draw sale over HTTP, its draw checked from
//! what the service publishes ([`stockade_bench::draw_sale`]).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stockade_bench::draw_sale::{self, DrawSaleConfig, DrawSaleReport};
use stockade_bench::http_load::DEFAULT_CONNECTIONS;

use super::with_service;
use crate::cli::DemoArgs;

/// Runs the draw sale and prints its report.
pub(super) async fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    if args.direct {
        bail!(
            "--draw needs the HTTP service (the draw is the service's, kept in its order store): drop --direct"
        );
    }
    if args.hold_seconds.is_some() {
        bail!(
            "--draw with --hold-seconds is not offered: the draw demo's winners are confirmed at once; drop one of them"
        );
    }
    if args.skus == 0 || args.skus > 100 || args.skus > args.stock {
        bail!(
            "--skus must be between 1 and 100 and at most --stock ({}), not {}",
            args.stock,
            args.skus
        );
    }
    let bar = ProgressBar::with_draw_target(
        Some(args.buyers as u64),
        ProgressDrawTarget::stderr_with_hz(10),
    );
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} entries  {elapsed}") {
        bar.set_style(style);
    }
    let progress = bar.clone();
    let report = with_service(args, async |url, admin_token, _payments_token| {
        let config = DrawSaleConfig {
            url,
            admin_token,
            sale: "demo-draw".into(),
            stock: args.stock,
            skus: args.skus,
            buyers: args.buyers,
            concurrency: args.concurrency.unwrap_or(DEFAULT_CONNECTIONS),
        };
        Ok(draw_sale::run(&config, Arc::new(move || progress.inc(1))).await?)
    })
    .await?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&report));
    }
    if report.ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("the draw does not add up: {}", report.problems.join("; "));
        Ok(ExitCode::from(1))
    }
}

/// A two-column Markdown table.
fn table(report: &DrawSaleReport) -> String {
    let yes = |b: bool| if b { "yes" } else { "NO" }.to_owned();
    let rows = [
        ("buyers", report.buyers.to_string()),
        ("stock", report.stock.to_string()),
        ("entries", report.entered.to_string()),
        ("entries after the close", report.late.to_string()),
        ("won", report.won.to_string()),
        ("not drawn", report.not_drawn.to_string()),
        ("orders in the store", report.orders.to_string()),
        ("seed matches its commitment", yes(report.seed_verified)),
        (
            "order recomputed from the seed",
            yes(report.order_recomputed),
        ),
        (
            "entries to published draw",
            format!("{:.0} ms", report.elapsed_ms),
        ),
        (
            "draw",
            if report.ok() { "right" } else { "WRONG" }.to_owned(),
        ),
    ];
    let mut out = String::from("| draw sale | |\n| --- | ---: |\n");
    for (name, value) in rows {
        out.push_str(&format!("| {name} | {value} |\n"));
    }
    out
}
