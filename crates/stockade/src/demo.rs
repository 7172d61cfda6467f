//! `stockade demo`: a simulated flash sale with a progress bar and a result
//! table (or JSON).
//!
//! By default the demo is the real thing in miniature: it starts the HTTP
//! service in-process (in-memory or Redis engine, SQLite or PostgreSQL
//! store), creates a sale through the admin API and sends the crowd over
//! keep-alive HTTP connections, then checks the sale and the committed
//! orders. `--direct` calls the engine in-process instead.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use stockade_bench::backend::{Backend, EngineKind};
use stockade_bench::flash_sale::{self, FlashSale, FlashSaleReport};
use stockade_bench::http_load::{self, DEFAULT_CONNECTIONS, LoadConfig};
use stockade_bench::scenario::{Overrides, Workload};
use stockade_server::Service;
use stockade_server::config::{RawConfig, ServerConfig};
use stockade_test_support::RedisServer;

use crate::cli::DemoArgs;

/// Runs the demo. Exits 1 if an invariant broke.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    // Check the numbers before starting anything.
    let mut sale = FlashSale::new(args.buyers, args.stock)?;
    if let Some(concurrency) = args.concurrency {
        sale = sale.with_concurrency(concurrency)?;
    }
    let progress = progress_bar(args.buyers);
    let ticks = progress.clone();
    let report = if args.direct {
        direct(&args, &sale, move || ticks.inc(1)).await?
    } else {
        over_http(&args, move || ticks.inc(1)).await?
    };
    progress.finish_and_clear();
    print_report(&report, args.json, !args.direct);
    if report.ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("an invariant broke: see the table above");
        Ok(ExitCode::from(1))
    }
}

fn progress_bar(buyers: usize) -> ProgressBar {
    let bar =
        ProgressBar::with_draw_target(Some(buyers as u64), ProgressDrawTarget::stderr_with_hz(10));
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} answers  {per_sec}  {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}

/// The engine alone, in this process.
async fn direct(
    args: &DemoArgs,
    sale: &FlashSale,
    on_answer: impl Fn() + Send + Sync + 'static,
) -> anyhow::Result<FlashSaleReport> {
    let backend = Backend::connect(
        args.engine,
        args.redis_url.as_deref(),
        args.database_url.as_deref(),
    )
    .await?;
    eprintln!(
        "flash sale: {} buyers for {} items, straight to the {}",
        args.buyers,
        args.stock,
        backend.description()
    );
    Ok(flash_sale::run(backend.engine(), sale, on_answer).await?)
}

/// The HTTP service started in this process, driven over real HTTP.
async fn over_http(
    args: &DemoArgs,
    on_answer: impl Fn() + Send + Sync + 'static,
) -> anyhow::Result<FlashSaleReport> {
    let throwaway_redis;
    let redis_url = match (args.engine, &args.redis_url) {
        (EngineKind::Memory, _) => None,
        (EngineKind::Redis, Some(url)) => Some(url.clone()),
        (EngineKind::Redis, None) => {
            throwaway_redis = RedisServer::start()
                .context("starting a throwaway redis-server (or pass --redis-url)")?;
            Some(throwaway_redis.url())
        }
        (EngineKind::Postgres, _) => bail!(
            "the service's engines are memory and redis (PostgreSQL is its order store: pass --database-url); \
             run the PostgreSQL engine alone with --direct --engine postgres"
        ),
    };
    let data_dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = ServerConfig::resolve(
        RawConfig {
            listen: Some("127.0.0.1:0".into()),
            data_dir: Some(data_dir.path().to_path_buf()),
            redis_url,
            database_url: args.database_url.clone(),
            ..RawConfig::default()
        },
        RawConfig::default(),
        None,
    )?;
    let service = Service::start(&config).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(service.serve(listener, async {
        let _ = stopped.await;
    }));
    let engine = if config.redis_url.is_some() {
        "redis"
    } else {
        "memory"
    };
    let store = if args.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    eprintln!(
        "flash sale: {} buyers for {} items over HTTP to stockade serve at {url} ({engine} engine, {store} store)",
        args.buyers, args.stock
    );
    let concurrency = args
        .concurrency
        .unwrap_or(args.buyers.min(DEFAULT_CONNECTIONS));
    let workload = Workload::new(
        None,
        &Overrides {
            buyers: Some(args.buyers),
            stock: Some(args.stock),
            concurrency: Some(concurrency),
            ..Overrides::default()
        },
    )?;
    let load = http_load::run(
        &LoadConfig {
            url,
            admin_token: config.admin.token.clone(),
            workload,
        },
        Arc::new(on_answer),
    )
    .await;
    let _ = stop.send(());
    server.await.context("the in-process service panicked")??;
    Ok(FlashSaleReport::from_http(engine, &load?.result))
}

fn print_report(report: &FlashSaleReport, as_json: bool, over_http: bool) {
    if as_json {
        let value = json!({
            "engine": report.engine,
            "transport": if over_http { "http" } else { "direct" },
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
}
