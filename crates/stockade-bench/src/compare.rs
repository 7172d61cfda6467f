//! `stockade bench`: every chosen strategy, one after another, on the same
//! servers, each from a clean state, measured and checked the same way.
//!
//! For each strategy: a clean server (see [`Servers`]), connect and set up
//! the sale (pools filled, scripts loaded, statements prepared), read the
//! servers' counters, send the workload, close the strategy's sessions,
//! read the counters again, read back what the server holds, and check it.
//! A strategy that cannot even be set up is reported as broken with the
//! reason; the run goes on with the next one.

use std::sync::Arc;

use crate::check::Observed;
use crate::counters::{DatabaseTarget, PgMonitor, RedisMonitor};
use crate::driver;
use crate::report::{BenchReport, BenchResult, ServerWork};
use crate::scenario::Workload;
use crate::servers::Servers;
use crate::strategy::{
    EngineStrategy, PgConditional, PgForUpdate, RedisDecr, RedisLock, RedisLua, SaleSetup,
    Strategy, StrategyError, StrategyKind,
};

/// Connections per pool (Redis pools of the hand-written strategies and
/// the PostgreSQL pools of `pg-for-update` and `pg-conditional`; the order
/// store behind `stockade-postgres` has its own) when not set: the founding
/// article's 32 threads.
pub const DEFAULT_POOL_SIZE: u32 = 32;

/// What to compare.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The workload every strategy gets.
    pub workload: Workload,
    /// The strategies, in the order to run them.
    pub strategies: Vec<StrategyKind>,
    /// Connections per pool (not the order store's: see
    /// [`DEFAULT_POOL_SIZE`]).
    pub pool_size: u32,
}

impl BenchConfig {
    /// Whether any chosen strategy needs Redis.
    pub fn needs_redis(&self) -> bool {
        self.strategies.iter().any(|s| s.needs_redis())
    }

    /// Whether any chosen strategy needs PostgreSQL.
    pub fn needs_postgres(&self) -> bool {
        self.strategies.iter().any(|s| s.needs_postgres())
    }
}

/// Where a comparison is, for a progress display.
pub trait Progress: Send + Sync {
    /// A strategy is about to be sent the workload; `answers` is how many
    /// answers to expect (None for a timed run).
    fn started(&self, _strategy: StrategyKind, _answers: Option<u64>) {}
    /// One more answer.
    fn answered(&self) {}
    /// A strategy is done.
    fn finished(&self, _result: &BenchResult) {}
}

/// A progress display that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Progress for Quiet {}

/// Runs every strategy of `config` against `servers`.
pub async fn run(
    config: &BenchConfig,
    servers: &Servers,
    progress: Arc<dyn Progress>,
) -> BenchReport {
    let mut report = BenchReport::default();
    for &kind in &config.strategies {
        let result = match run_one(kind, config, servers, &progress).await {
            Ok(result) => result,
            Err(error) => BenchResult::could_not_run(kind, &config.workload, error.to_string()),
        };
        progress.finished(&result);
        report.results.push(result);
    }
    report
}

async fn connect(
    kind: StrategyKind,
    servers: &Servers,
    database: Option<&DatabaseTarget>,
    pool_size: u32,
) -> Result<Box<dyn Strategy>, StrategyError> {
    let redis = || {
        servers
            .redis_url()
            .ok_or_else(|| StrategyError::Other("no Redis server was prepared".into()))
    };
    let database = || {
        database
            .map(|d| d.url.as_str())
            .ok_or_else(|| StrategyError::Other("no PostgreSQL database was prepared".into()))
    };
    Ok(match kind {
        StrategyKind::PgForUpdate => Box::new(PgForUpdate::connect(database()?, pool_size).await?),
        StrategyKind::PgConditional => {
            Box::new(PgConditional::connect(database()?, pool_size).await?)
        }
        StrategyKind::RedisLock => Box::new(RedisLock::connect(redis()?, pool_size).await?),
        StrategyKind::RedisDecr => Box::new(RedisDecr::connect(redis()?, pool_size).await?),
        StrategyKind::RedisLua => Box::new(RedisLua::connect(redis()?, pool_size).await?),
        StrategyKind::StockadeRedis => Box::new(EngineStrategy::redis(redis()?).await?),
        StrategyKind::StockadePostgres => Box::new(EngineStrategy::postgres(database()?).await?),
        StrategyKind::StockadeMemory => Box::new(EngineStrategy::memory()),
    })
}

async fn run_one(
    kind: StrategyKind,
    config: &BenchConfig,
    servers: &Servers,
    progress: &Arc<dyn Progress>,
) -> Result<BenchResult, StrategyError> {
    let workload = &config.workload;
    if workload.skus > 1 && !kind.sells_skus() {
        return Err(StrategyError::Other(format!(
            "{} sells one counter: --skus applies to the stockade-* strategies",
            kind.as_str()
        )));
    }
    let sale = SaleSetup {
        id: format!("bench-{}", uuid::Uuid::now_v7().simple()),
        stock: workload.stock,
        skus: workload.skus,
    };
    let database = if kind.needs_postgres() {
        Some(servers.database().await?)
    } else {
        None
    };
    if kind.needs_redis() {
        servers.clean_redis().await?;
    }
    let mut strategy = connect(kind, servers, database.as_ref(), config.pool_size).await?;
    strategy.setup(&sale).await?;

    let mut notes = Vec::new();
    let mut redis_monitor = match servers.redis_url() {
        Some(url) if kind.needs_redis() => Some(RedisMonitor::connect(url).await?),
        _ => None,
    };
    let mut pg_monitor = match &database {
        Some(database) => Some(PgMonitor::connect(database).await?),
        None => None,
    };
    if let Err(error) = strategy.settle().await {
        notes.push(format!(
            "database transactions not counted: could not make PostgreSQL report them ({error}); \
             it needs PostgreSQL 15+ and a role allowed to call pg_stat_force_next_flush()"
        ));
        pg_monitor = None;
    }
    if pg_monitor.as_ref().is_some_and(|m| !m.exact()) {
        notes.push(
            "database transactions are approximate: the monitor shares the bench's database \
             and cannot force its own statistics out"
                .into(),
        );
    }
    let redis_before = match &mut redis_monitor {
        Some(monitor) => Some(monitor.read().await?),
        None => None,
    };
    let pg_before = match &mut pg_monitor {
        Some(monitor) => Some(monitor.read().await?),
        None => None,
    };

    let strategy: Arc<dyn Strategy> = Arc::from(strategy);
    progress.started(kind, workload.requests().map(|n| n as u64));
    let ticks = Arc::clone(progress);
    let tally = driver::drive(
        Arc::clone(&strategy),
        workload,
        Arc::new(move || ticks.answered()),
    )
    .await;
    strategy.finish().await;

    let mut work = ServerWork::default();
    if let (Some(monitor), Some(before)) = (&mut redis_monitor, &redis_before) {
        let redis = monitor.read().await?.since(before);
        work.redis_commands = Some(redis.calls());
        work.redis_command_us = Some(redis.command_us(kind.redis_script_commands()));
        work.redis_cpu_us = Some(redis.cpu_us);
        let unsplittable = redis.overlap_us(kind.redis_commands_also_in_scripts());
        if unsplittable > 0 {
            notes.push(format!(
                "Redis µs per purchase (cmdstats) is a lower bound: {} runs both on its own and \
                 inside the scripts, and its time (at most {:.2} µs per request) is counted \
                 only within the scripts",
                kind.redis_commands_also_in_scripts()
                    .join(", ")
                    .to_uppercase(),
                unsplittable as f64 / tally.requests.max(1) as f64
            ));
        }
    }
    if let (Some(mut monitor), Some(before)) = (pg_monitor, pg_before) {
        let (after, ended) = monitor.read_when_sessions_end().await?;
        if !ended {
            notes.push(
                "some of the strategy's database sessions were still open after 10 s; \
                 their transactions may be missing from the count"
                    .into(),
            );
        }
        work.db_transactions = Some(monitor.since(before, after));
        monitor.close().await;
    }
    work.notes = notes;

    let verification = strategy.verify().await.map_err(|e| e.to_string());
    let observed = Observed::new(workload.stock, &tally, verification);
    Ok(BenchResult::new(
        kind.as_str(),
        workload,
        &tally,
        &observed,
        work,
    ))
}
