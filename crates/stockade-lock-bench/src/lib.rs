//! Benchmark of [`stockade_lock`] against the [`rslock`] crate, on the same
//! Redis in the same run.
//!
//! For each library, in rounds: a crowd of `waiters` tasks (spread over
//! `clients` lock clients) arrives at a held lock and drains through it, each
//! task holding it once (see `harness` for why exactly this shape). Measured,
//! after a warm-up, over a fixed window:
//!
//! - **hand-off latency** (p50, p99): from a holder calling release to the
//!   next holder's acquire returning, with the rest of the crowd waiting;
//! - **acquisitions per second** while a crowd drains (64 waiters at the
//!   start of each round);
//! - **Redis commands per acquisition**: `INFO commandstats` before and after
//!   the window, divided by the acquisitions in it. `INFO commandstats` also
//!   counts the commands Lua scripts run, so this is the work Redis did; the
//!   markdown table adds the requests clients sent (round trips) and the
//!   ratio of the two libraries' commands per acquisition.
//!
//! ```no_run
//! # async fn demo() -> Result<(), stockade_lock_bench::LockBenchError> {
//! use stockade_lock_bench::{LockBenchOptions, run};
//! let report = run("redis://127.0.0.1:6379", &LockBenchOptions::default(), |p| {
//!     eprintln!("{p}");
//! })
//! .await?;
//! println!("{}", report.to_markdown());
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - `lib.rs`: [`run`], [`LockBenchOptions`], [`Progress`], [`LockBenchError`].
//! - `report`: [`LockBenchReport`] and [`StrategyResult`] (JSON and markdown).
//! - `harness`: the contention loop and the measurement window.
//! - `contender`: the two libraries behind one interface.
//! - `commandstats`: [`CommandStats`], counting what Redis ran.

mod commandstats;
mod contender;
mod harness;
mod report;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use commandstats::{CommandDelta, CommandStats};
pub use report::{LockBenchReport, StrategyDetails, StrategyResult};

use contender::{Contender, Rslock, Stockade};

/// What to run.
#[derive(Debug, Clone)]
pub struct LockBenchOptions {
    /// Lock clients per library (each with its own connections).
    pub clients: usize,
    /// Tasks in each crowd, spread over the clients.
    pub waiters: usize,
    /// Contention before measuring starts.
    pub warmup: Duration,
    /// The measurement window, per library.
    pub duration: Duration,
    /// Time each holder keeps the lock.
    pub hold: Duration,
    /// Lease of each acquisition (fixed, no watchdog, for both libraries).
    pub lease: Duration,
}

impl Default for LockBenchOptions {
    fn default() -> Self {
        Self {
            clients: 4,
            waiters: 64,
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs(5),
            hold: Duration::ZERO,
            lease: Duration::from_secs(10),
        }
    }
}

/// Where a run is, for progress output.
#[derive(Debug, Clone)]
pub enum Progress {
    /// Warming up one library.
    WarmingUp {
        /// `stockade-lock` or `rslock`.
        strategy: &'static str,
    },
    /// Measuring one library.
    Measuring {
        /// `stockade-lock` or `rslock`.
        strategy: &'static str,
        /// How long the window lasts.
        window: Duration,
    },
    /// One library is done.
    Done(StrategyResult),
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WarmingUp { strategy } => write!(f, "{strategy}: warming up"),
            Self::Measuring { strategy, window } => {
                write!(f, "{strategy}: measuring for {window:?}")
            }
            Self::Done(result) => write!(
                f,
                "{}: hand-off p50 {:.1} µs, p99 {:.1} µs, {:.0} acquisitions/s, {:.1} Redis commands per acquisition",
                result.strategy,
                result.handoff_p50_us,
                result.handoff_p99_us,
                result.acquisitions_per_second,
                result.redis_cmds_per_acquisition
            ),
        }
    }
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum LockBenchError {
    /// Talking to Redis (for the statistics) failed.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// `stockade-lock` failed.
    #[error("stockade-lock: {0}")]
    Lock(#[from] stockade_lock::LockError),
    /// `rslock` failed.
    #[error("rslock: {0}")]
    Rslock(String),
    /// The options cannot work.
    #[error("invalid benchmark options: {0}")]
    Invalid(String),
}

/// Runs the benchmark for `stockade-lock`, then `rslock`, against the Redis
/// at `redis_url`, reporting progress to `progress`. Takes about
/// `2 × (warmup + duration)` plus set-up.
pub async fn run(
    redis_url: &str,
    options: &LockBenchOptions,
    progress: impl Fn(Progress),
) -> Result<LockBenchReport, LockBenchError> {
    if options.clients == 0 || options.waiters < 2 || options.duration.is_zero() {
        return Err(LockBenchError::Invalid(
            "at least one client, two waiters and a non-zero duration are needed".to_owned(),
        ));
    }
    let mut stats = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    // A unique name per run: nothing left over from an earlier run interferes.
    let run_id: u64 = redis::cmd("INCR")
        .arg("stockade-lock-bench:runs")
        .query_async(&mut stats)
        .await?;

    let mut results = Vec::new();

    let strategy = "stockade-lock";
    let mut contenders = Vec::new();
    for _ in 0..options.clients {
        let locks = stockade_lock::Locks::builder()
            .node(redis_url)
            .command_timeout(Duration::from_secs(5))
            .connect()
            .await?;
        contenders.push(Arc::new(Stockade {
            locks,
            name: format!("bench-{run_id}-stockade"),
            lease: options.lease,
        }));
    }
    let result = measure(strategy, contenders, options, &mut stats, &progress).await?;
    progress(Progress::Done(result.clone()));
    results.push(result);

    // Let the background releases of the tasks stopped above finish.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let strategy = "rslock";
    let contenders = (0..options.clients)
        .map(|_| {
            Arc::new(Rslock {
                manager: rslock::LockManager::new(vec![redis_url.to_owned()]),
                name: format!("bench-{run_id}-rslock"),
                lease: options.lease,
            })
        })
        .collect();
    let result = measure(strategy, contenders, options, &mut stats, &progress).await?;
    progress(Progress::Done(result.clone()));
    results.push(result);

    Ok(LockBenchReport {
        results,
        options: options.clone(),
    })
}

trait ScriptCommands {
    const SCRIPT_COMMANDS: &'static [&'static str];
}

impl ScriptCommands for Stockade {
    const SCRIPT_COMMANDS: &'static [&'static str] = Stockade::SCRIPT_COMMANDS;
}

impl ScriptCommands for Rslock {
    const SCRIPT_COMMANDS: &'static [&'static str] = Rslock::SCRIPT_COMMANDS;
}

async fn measure<C: Contender + ScriptCommands>(
    strategy: &'static str,
    contenders: Vec<Arc<C>>,
    options: &LockBenchOptions,
    stats: &mut redis::aio::MultiplexedConnection,
    progress: &impl Fn(Progress),
) -> Result<StrategyResult, LockBenchError> {
    progress(Progress::WarmingUp { strategy });
    let window = options.duration;
    let measurement = harness::contend(contenders, options, stats, || {
        progress(Progress::Measuring { strategy, window });
    })
    .await?;
    Ok(StrategyResult::from_measurement(
        strategy,
        &measurement,
        C::SCRIPT_COMMANDS,
    ))
}
