//! `stockade bench shards`: one hot sale on a three-primary Redis Cluster,
//! whole on one primary and spread over shards, with the same crowd.
//!
//! Each round sells two sales alike (stock = buyers, one item each, the
//! Redis engine driven as the service drives it): one unsharded, one of
//! `--shards` shards, in alternating order from round to round. For each,
//! every primary's CPU time (`INFO cpu`) and script time (`INFO
//! commandstats`) is read before and after; the figure that matters is the
//! busiest primary's, per purchase, since one primary's CPU bounds a hot
//! sale. With `--rate` both sales are offered the same purchases per second
//! (the same load); without it each is sold as fast as it answers. A run is
//! checked: every item sold exactly once, nothing left.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use stockade_core::{Engine, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_test_support::RedisCluster;

use crate::counters::{RedisMonitor, RedisReading, SCRIPT_RUNNERS};
use crate::strategy::StrategyError;

/// What to run.
#[derive(Debug, Clone)]
pub struct ShardsOptions {
    /// Buyers per sale (and items: every buyer gets one).
    pub buyers: usize,
    /// Purchases in flight at once.
    pub concurrency: usize,
    /// Shards of the spread sale.
    pub shards: u16,
    /// Rounds (each sells both sales).
    pub rounds: usize,
    /// Purchases per second offered to both sales alike (None: as fast as
    /// they are answered). A rate both can keep compares their CPU at the
    /// same load.
    pub rate: Option<u32>,
}

/// One sale's run.
#[derive(Debug, Clone, Serialize)]
pub struct ShardsRun {
    /// The round (1-based).
    pub round: usize,
    /// The sale's shards.
    pub shards: u16,
    /// Purchases per second.
    pub per_second: f64,
    /// Each primary's CPU time per purchase (µs), by port order.
    pub cpu_us_per_purchase: Vec<f64>,
    /// Each primary's script time per purchase (µs).
    pub script_us_per_purchase: Vec<f64>,
    /// The busiest primary's CPU time per purchase (µs).
    pub busiest_cpu_us: f64,
    /// The busiest primary's script time per purchase (µs).
    pub busiest_script_us: f64,
}

/// Every run, and the ratios sharded ÷ unsharded per round.
#[derive(Debug, Clone, Serialize)]
pub struct ShardsReport {
    /// Every run, in order.
    pub runs: Vec<ShardsRun>,
    /// Per round: busiest primary's CPU per purchase, sharded ÷ unsharded.
    pub busiest_cpu_ratio: Vec<f64>,
    /// Per round: busiest primary's script time, sharded ÷ unsharded.
    pub busiest_script_ratio: Vec<f64>,
    /// Per round: purchases per second, sharded ÷ unsharded.
    pub throughput_ratio: Vec<f64>,
}

/// Runs the comparison on a throwaway three-primary Cluster; `progress`
/// hears a line per run.
pub async fn run(
    options: &ShardsOptions,
    progress: impl Fn(&str),
) -> Result<ShardsReport, StrategyError> {
    if options.buyers == 0 || options.concurrency == 0 || options.rounds == 0 {
        return Err(StrategyError::Other(
            "--buyers, --concurrency and --rounds must be at least 1".into(),
        ));
    }
    if options.rate == Some(0) {
        return Err(StrategyError::Other(
            "--rate must be at least 1 purchase per second (leave it out for as fast as answered)"
                .into(),
        ));
    }
    if options.shards < 2 || usize::from(options.shards) > options.buyers {
        return Err(StrategyError::Other(format!(
            "--shards must be 2 or more, and no more than --buyers (got {})",
            options.shards
        )));
    }
    progress("starting a three-primary Redis Cluster");
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .map_err(|e| StrategyError::Other(e.to_string()))?
        .map_err(|e| StrategyError::Other(format!("starting a Redis Cluster: {e}")))?;
    let config = RedisEngineConfig::from_url(&cluster.url())
        .map_err(|e| StrategyError::Other(e.to_string()))?;
    let engine = Arc::new(RedisEngine::connect(&config, Arc::new(SystemClock)).await?);
    let mut monitors = Vec::new();
    for port in cluster.ports() {
        monitors.push(RedisMonitor::connect(&format!("redis://127.0.0.1:{port}")).await?);
    }
    let mut runs = Vec::new();
    for round in 1..=options.rounds {
        let order = if round % 2 == 1 {
            [1, options.shards]
        } else {
            [options.shards, 1]
        };
        for shards in order {
            let run = sell(&engine, &mut monitors, options, round, shards).await?;
            progress(&format!(
                "round {round}, {shards} shard(s): {:.0} purchases/s, busiest primary {:.2} µs CPU and {:.2} µs in scripts per purchase",
                run.per_second, run.busiest_cpu_us, run.busiest_script_us
            ));
            runs.push(run);
        }
    }
    let ratio = |f: fn(&ShardsRun) -> f64| -> Vec<f64> {
        (1..=options.rounds)
            .map(|round| {
                let of = |shards: u16| {
                    runs.iter()
                        .find(|r| r.round == round && r.shards == shards)
                        .map(f)
                        .unwrap_or(f64::NAN)
                };
                of(options.shards) / of(1)
            })
            .collect()
    };
    Ok(ShardsReport {
        busiest_cpu_ratio: ratio(|r| r.busiest_cpu_us),
        busiest_script_ratio: ratio(|r| r.busiest_script_us),
        throughput_ratio: ratio(|r| r.per_second),
        runs,
    })
}

/// Sells one sale of `shards` shards to the crowd, and checks it.
async fn sell(
    engine: &Arc<RedisEngine>,
    monitors: &mut [RedisMonitor],
    options: &ShardsOptions,
    round: usize,
    shards: u16,
) -> Result<ShardsRun, StrategyError> {
    let id = format!("bench-shards-r{round}-s{shards}");
    let spec = SaleSpec::builder(id.as_str(), options.buyers as u32)
        .and_then(|b| b.shards(shards))
        .and_then(|b| b.build())
        .map_err(|e| StrategyError::Other(e.to_string()))?;
    engine.create_sale(&spec).await?;
    let before = read_all(monitors).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let sold = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..options.concurrency)
        .map(|_| {
            let (engine, next, sold, id) = (
                Arc::clone(engine),
                Arc::clone(&next),
                Arc::clone(&sold),
                id.clone(),
            );
            let (buyers, rate) = (options.buyers, options.rate);
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= buyers {
                        return Ok::<(), StrategyError>(());
                    }
                    // Purchase n is due n / rate seconds after the start.
                    if let Some(rate) = rate {
                        let due = started + Duration::from_secs_f64(n as f64 / f64::from(rate));
                        tokio::time::sleep_until(due.into()).await;
                    }
                    let purchase = Purchase::new(id.as_str(), format!("buyer-{n}"), 1)
                        .map_err(|e| StrategyError::Other(e.to_string()))?;
                    match engine.purchase(&purchase).await? {
                        PurchaseOutcome::Purchased { .. } => {
                            sold.fetch_add(1, Ordering::Relaxed);
                        }
                        other => {
                            return Err(StrategyError::Other(format!(
                                "buyer-{n} of a sale with an item for everyone was told {other:?}"
                            )));
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker
            .await
            .map_err(|e| StrategyError::Other(e.to_string()))??;
    }
    let elapsed = started.elapsed().max(Duration::from_micros(1));
    let after = read_all(monitors).await?;
    let sold = sold.load(Ordering::Relaxed);
    let snapshot = engine
        .snapshot(&SaleId::new(id.as_str()).map_err(|e| StrategyError::Other(e.to_string()))?)
        .await?
        .ok_or_else(|| StrategyError::Other(format!("sale {id} vanished")))?;
    if sold != options.buyers as u64 || snapshot.remaining != 0 {
        return Err(StrategyError::Other(format!(
            "sale {id}: {sold} sold of {}, {} left",
            options.buyers, snapshot.remaining
        )));
    }
    let per = |us: u64| us as f64 / sold as f64;
    let mut cpu = Vec::new();
    let mut scripts = Vec::new();
    for (before, after) in before.iter().zip(&after) {
        let work = after.since(before);
        cpu.push(per(work.cpu_us));
        let script_us: u64 = work
            .commands
            .iter()
            .filter(|(command, _)| SCRIPT_RUNNERS.contains(&command.as_str()))
            .map(|(_, stat)| stat.usec)
            .sum();
        scripts.push(per(script_us));
    }
    Ok(ShardsRun {
        round,
        shards,
        per_second: sold as f64 / elapsed.as_secs_f64(),
        busiest_cpu_us: cpu.iter().copied().fold(0.0, f64::max),
        busiest_script_us: scripts.iter().copied().fold(0.0, f64::max),
        cpu_us_per_purchase: cpu,
        script_us_per_purchase: scripts,
    })
}

async fn read_all(monitors: &mut [RedisMonitor]) -> Result<Vec<RedisReading>, StrategyError> {
    let mut readings = Vec::new();
    for monitor in monitors {
        readings.push(monitor.read().await?);
    }
    Ok(readings)
}

/// The median and range of `values`, as `median (min–max)`.
pub fn summary(values: &[f64]) -> String {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return "n/a".to_owned();
    }
    sorted.sort_by(f64::total_cmp);
    format!(
        "{:.2} ({:.2}–{:.2})",
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1]
    )
}
