//! `stockade demo`: a simulated flash sale with a progress bar and a result
//! table (or JSON).
//!
//! By default the demo is the real thing in miniature: it starts the HTTP
//! service in-process (in-memory or Redis engine, SQLite or PostgreSQL
//! store), creates a sale through the admin API and sends the crowd over
//! keep-alive HTTP connections, then checks the sale and the committed
//! orders. `--direct` sends the crowd straight at the engine instead, through
//! the same runner as `stockade bench`. `--hold-seconds N --pay-ratio R`
//! runs a sale with payment holds instead: a share R of the buyers pay,
//! the other holds expire and their items are sold again
//! ([`stockade_bench::hold_sale`]).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use stockade_bench::compare::{self, BenchConfig, DEFAULT_POOL_SIZE, Progress};
use stockade_bench::hold_sale::{self, HoldSaleConfig, Phase};
use stockade_bench::http_load::{self, DEFAULT_CONNECTIONS, LoadConfig};
use stockade_bench::report::BenchResult;
use stockade_bench::scenario::{Overrides, Workload};
use stockade_bench::servers::Servers;
use stockade_bench::strategy::StrategyKind;
use stockade_server::Service;
use stockade_server::config::{RawConfig, ServerConfig};
use stockade_test_support::{PostgresServer, RedisServer};

use crate::cli::{DemoArgs, DemoEngine};

mod draw;

/// Runs the demo. Exits 1 if an invariant broke.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if args.buyers == 0 {
        bail!("--buyers must be at least 1");
    }
    if args.draw {
        return draw::run(&args).await;
    }
    if let Some(hold_seconds) = args.hold_seconds {
        if args.skus > 1 {
            bail!(
                "--skus with --hold-seconds is not offered: the payment-hold demo sells one SKU; drop one of them"
            );
        }
        return hold_sale(&args, hold_seconds).await;
    }
    let workload = Workload::new(
        None,
        &Overrides {
            buyers: Some(args.buyers),
            stock: Some(args.stock),
            skus: Some(args.skus),
            concurrency: Some(args.concurrency.unwrap_or(if args.direct {
                args.buyers
            } else {
                args.buyers.min(DEFAULT_CONNECTIONS)
            })),
            ..Overrides::default()
        },
    )?;
    let bar = ProgressBar::with_draw_target(
        Some(args.buyers as u64),
        ProgressDrawTarget::stderr_with_hz(10),
    );
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} answers  {per_sec}  {elapsed}")
    {
        bar.set_style(style);
    }
    let result = if args.direct {
        direct(&args, workload, bar.clone()).await?
    } else {
        over_http(&args, workload, bar.clone()).await?
    };
    bar.finish_and_clear();
    let report = DemoReport::new(args.engine, !args.direct, &result);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.to_table());
    }
    if report.ok {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("an invariant broke: {}", result.problems.join("; "));
        Ok(ExitCode::from(1))
    }
}

/// Ticks the progress bar for each answer.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn answered(&self) {
        self.0.inc(1);
    }
}

/// The engine alone, through the `stockade bench` runner.
async fn direct(
    args: &DemoArgs,
    workload: Workload,
    bar: ProgressBar,
) -> anyhow::Result<BenchResult> {
    let strategy = match args.engine {
        DemoEngine::Memory => StrategyKind::StockadeMemory,
        DemoEngine::Redis => StrategyKind::StockadeRedis,
        DemoEngine::Postgres => StrategyKind::StockadePostgres,
    };
    let config = BenchConfig {
        workload,
        strategies: vec![strategy],
        pool_size: DEFAULT_POOL_SIZE,
    };
    let servers = Servers::prepare(
        config.needs_redis(),
        config.needs_postgres(),
        args.redis_url.as_deref(),
        args.database_url.as_deref(),
    )
    .await?;
    eprintln!(
        "flash sale: {} buyers for {} items, straight to the {} engine",
        args.buyers,
        args.stock,
        args.engine.as_str()
    );
    for line in servers.describe() {
        eprintln!("{line}");
    }
    let report = compare::run(&config, &servers, Arc::new(Bar(bar))).await;
    report
        .results
        .into_iter()
        .next()
        .context("the runner returned no result")
}

/// The HTTP service started in this process, driven over real HTTP.
async fn over_http(
    args: &DemoArgs,
    workload: Workload,
    bar: ProgressBar,
) -> anyhow::Result<BenchResult> {
    with_service(args, async |url, admin_token, _payments_token| {
        let load = http_load::run(
            &LoadConfig {
                hold_seconds: None,
                url,
                admin_token,
                workload,
            },
            Arc::new(move || bar.inc(1)),
        )
        .await;
        Ok(load?.result)
    })
    .await
}

/// `--hold-seconds`: a sale with payment holds, some buyers paying.
async fn hold_sale(args: &DemoArgs, hold_seconds: u64) -> anyhow::Result<ExitCode> {
    if args.direct {
        bail!(
            "--hold-seconds needs the HTTP service (holds are kept by its order store): drop --direct"
        );
    }
    if !(0.0..=1.0).contains(&args.pay_ratio) {
        bail!(
            "--pay-ratio must be between 0 and 1, not {}",
            args.pay_ratio
        );
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    if let Ok(style) = ProgressStyle::with_template("{spinner} {pos} answers  {elapsed}  {msg}") {
        bar.set_style(style);
    }
    let progress_bar = bar.clone();
    let progress: Arc<dyn Fn(Phase) + Send + Sync> = Arc::new(move |phase| match phase {
        Phase::Answered => progress_bar.inc(1),
        Phase::Line(line) => progress_bar.println(line),
    });
    let report = with_service(args, async |url, admin_token, payments_token| {
        let config = HoldSaleConfig {
            url,
            admin_token,
            payments_token,
            sale: "demo-holds".into(),
            stock: args.stock,
            buyers: args.buyers,
            concurrency: args.concurrency.unwrap_or(DEFAULT_CONNECTIONS),
            hold_seconds,
            pay_ratio: args.pay_ratio,
            seed: 7,
        };
        Ok(hold_sale::run(&config, progress).await?)
    })
    .await?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.to_table());
    }
    if report.ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("an invariant broke: {}", report.problems.join("; "));
        Ok(ExitCode::from(1))
    }
}

/// Starts the service in this process (with throwaway servers as needed),
/// runs `drive` with its URL and admin token, and stops it.
pub(super) async fn with_service<T>(
    args: &DemoArgs,
    drive: impl AsyncFnOnce(String, String, String) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let throwaway_redis;
    let throwaway_postgres;
    let redis_url = match (args.engine, &args.redis_url) {
        (DemoEngine::Redis, Some(url)) => Some(url.clone()),
        (DemoEngine::Redis, None) => {
            throwaway_redis = RedisServer::start()
                .context("starting a throwaway redis-server (or pass --redis-url)")?;
            Some(throwaway_redis.url())
        }
        (DemoEngine::Memory | DemoEngine::Postgres, _) => None,
    };
    // The PostgreSQL engine is the PostgreSQL store deciding purchases.
    let database_url = match (args.engine, &args.database_url) {
        (DemoEngine::Postgres, None) => {
            throwaway_postgres = PostgresServer::start()
                .context("starting a throwaway PostgreSQL (or pass --database-url)")?;
            Some(throwaway_postgres.fresh_database().await?)
        }
        (_, url) => url.clone(),
    };
    let data_dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let mut settings = RawConfig::default();
    settings.http.listen = Some("127.0.0.1:0".into());
    settings.storage.data_dir = Some(data_dir.path().to_path_buf());
    settings.storage.engine = Some(args.engine.as_str().to_owned());
    settings.redis.redis_url = redis_url;
    settings.storage.database_url = database_url;
    // The crowd is one client on loopback.
    settings.http.max_connections_per_client = Some(1_000_000);
    // The simulated payment service confirms held orders with it.
    settings.access.payments_token = Some(DEMO_PAYMENTS_TOKEN.to_owned());
    // The demo's one instance seals its draws with a key of its own.
    settings.access.draw_key = Some(
        String::from_utf8(stockade_core::draw::DrawKey::random().expose().to_vec())
            .expect("a generated draw key is hex"),
    );
    let config = ServerConfig::resolve(settings, RawConfig::default(), None)?;
    let service = Service::start(&config).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(service.serve(listener, async {
        let _ = stopped.await;
    }));
    let store = if args.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    eprintln!(
        "flash sale: {} buyers for {} items over HTTP to stockade serve at {url} ({} engine, {store} store)",
        args.buyers,
        args.stock,
        args.engine.as_str()
    );
    let result = drive(
        url,
        config.admin().token.expose().clone(),
        DEMO_PAYMENTS_TOKEN.to_owned(),
    )
    .await;
    let _ = stop.send(());
    server.await.context("the in-process service panicked")??;
    result
}

/// The payments token of the demo's in-process service (it listens on a
/// random loopback port for the demo's length only).
const DEMO_PAYMENTS_TOKEN: &str = "demo-payment-service-token";

/// What the demo prints: the same fields as a table or one JSON object.
#[derive(Debug, Serialize)]
struct DemoReport {
    engine: &'static str,
    transport: &'static str,
    buyers: u64,
    stock: u32,
    skus: u32,
    purchased: u64,
    sold_out: u64,
    remaining: Option<i64>,
    oversold: u64,
    duplicate_buyers: u64,
    errors: u64,
    elapsed_ms: f64,
    per_second: f64,
    p50_us: u64,
    p99_us: u64,
    ok: bool,
}

impl DemoReport {
    fn new(engine: DemoEngine, over_http: bool, result: &BenchResult) -> Self {
        Self {
            engine: engine.as_str(),
            transport: if over_http { "http" } else { "direct" },
            buyers: result.buyers,
            stock: result.stock,
            skus: result.skus,
            purchased: result.purchased,
            sold_out: result.sold_out,
            remaining: result.remaining,
            oversold: result.oversold,
            duplicate_buyers: result.duplicate_buyers,
            errors: result.failed,
            elapsed_ms: result.elapsed_ms,
            per_second: result.per_second,
            p50_us: result.p50_us,
            p99_us: result.p99_us,
            ok: result.ok,
        }
    }

    /// A two-column Markdown table.
    fn to_table(&self) -> String {
        let remaining = self
            .remaining
            .map_or_else(|| "unknown".to_owned(), |r| r.to_string());
        let rows = [
            ("engine", format!("{} ({})", self.engine, self.transport)),
            ("buyers", self.buyers.to_string()),
            ("stock", self.stock.to_string()),
            ("skus", self.skus.to_string()),
            ("purchased", self.purchased.to_string()),
            ("sold out", self.sold_out.to_string()),
            ("remaining", remaining),
            ("oversold", self.oversold.to_string()),
            ("duplicate buyers", self.duplicate_buyers.to_string()),
            ("errors", self.errors.to_string()),
            ("elapsed", format!("{:.1} ms", self.elapsed_ms)),
            ("requests per second", format!("{:.0}", self.per_second)),
            ("latency p50", format!("{} µs", self.p50_us)),
            ("latency p99", format!("{} µs", self.p99_us)),
            (
                "invariants",
                if self.ok { "held" } else { "BROKEN" }.to_owned(),
            ),
        ];
        let mut table = String::from("| measure | value |\n| --- | ---: |\n");
        for (name, value) in rows {
            table.push_str(&format!("| {name} | {value} |\n"));
        }
        table
    }
}
