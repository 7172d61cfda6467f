//! The faults of DESIGN.md's table, and a script that injects them one
//! after another while the crowd runs, each once the crowd has collected a
//! given number of acknowledged purchases.

use std::fmt;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::history::Recorder;

/// Longest wait for a step's trigger; the step is injected anyway after it.
const TRIGGER_TIMEOUT: Duration = Duration::from_secs(60);

/// One fault.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Redis killed and restarted empty: every key lost, new run id.
    RedisRestartEmpty,
    /// Not a fault: Redis saves its data now, for `RedisRestartFromSnapshot`.
    RedisSnapshot,
    /// Redis killed and restarted from the last snapshot: stale data.
    RedisRestartFromSnapshot,
    /// Redis frozen (SIGSTOP) for a while, then resumed.
    RedisUnreachable(Duration),
    /// PostgreSQL stopped for a while, then started again on its data.
    PostgresDown(Duration),
    /// One instance SIGKILLed, then restarted with the same flags.
    KillInstance {
        /// Which instance.
        index: usize,
        /// How long it stays dead.
        down_for: Duration,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::RedisRestartEmpty => write!(f, "Redis restarted with its data lost"),
            Fault::RedisSnapshot => write!(f, "Redis snapshot saved"),
            Fault::RedisRestartFromSnapshot => write!(f, "Redis restarted from the old snapshot"),
            Fault::RedisUnreachable(d) => write!(f, "Redis frozen for {} ms", d.as_millis()),
            Fault::PostgresDown(d) => write!(f, "PostgreSQL stopped for {} ms", d.as_millis()),
            Fault::KillInstance { index, down_for } => write!(
                f,
                "instance {index} SIGKILLed for {} ms",
                down_for.as_millis()
            ),
        }
    }
}

/// A fault and when to inject it.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Inject once the crowd has had this many 201s (or has finished).
    pub after_acks: usize,
    /// What to inject.
    pub fault: Fault,
}

/// Injects the steps in order; every fault is healed before the next step.
/// For a sale with payment holds (`expiry_sale`), each instance about to be
/// killed has its `expired` counter of the sale scraped first (its counters
/// die with it); those counts are returned as (instance, count).
pub async fn run(
    cluster: &Cluster,
    steps: &[Step],
    recorder: &Recorder,
    round: usize,
    expiry_sale: Option<&str>,
) -> Vec<(usize, Result<u64, String>)> {
    let mut before_kills = Vec::new();
    for step in steps {
        let waiting = Instant::now();
        loop {
            if recorder.acks() >= step.after_acks {
                break;
            }
            if recorder.crowd_done() || waiting.elapsed() > TRIGGER_TIMEOUT {
                eprintln!(
                    "round {round}: the crowd {} with {} acks, before the {} acks that trigger \
                     \"{}\": injecting it now",
                    if recorder.crowd_done() {
                        "finished"
                    } else {
                        "is stuck"
                    },
                    recorder.acks(),
                    step.after_acks,
                    step.fault
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        eprintln!(
            "round {round}: fault: {} (at {} acks)",
            step.fault,
            recorder.acks()
        );
        if let (Fault::KillInstance { index, .. }, Some(sale)) = (step.fault, expiry_sale) {
            before_kills.push((index, cluster.expired_counter(index, sale).await));
        }
        inject(cluster, step.fault).await;
        eprintln!(
            "round {round}: fault healed: {} (at {} acks)",
            step.fault,
            recorder.acks()
        );
    }
    before_kills
}

async fn inject(cluster: &Cluster, fault: Fault) {
    match fault {
        Fault::RedisRestartEmpty => {
            cluster
                .redis(|r| r.restart().expect("restart redis-server empty"))
                .await
        }
        Fault::RedisSnapshot => {
            cluster
                .redis(|r| r.save_snapshot().expect("save a redis snapshot"))
                .await;
        }
        Fault::RedisRestartFromSnapshot => {
            cluster
                .redis(|r| {
                    r.restart_from_snapshot()
                        .expect("restart redis-server from the snapshot")
                })
                .await
        }
        Fault::RedisUnreachable(down_for) => {
            cluster.redis(|r| r.pause()).await;
            tokio::time::sleep(down_for).await;
            cluster.redis(|r| r.resume()).await;
        }
        Fault::PostgresDown(down_for) => {
            cluster.postgres(|p| p.stop()).await;
            tokio::time::sleep(down_for).await;
            cluster
                .postgres(|p| p.start_again().expect("start PostgreSQL again"))
                .await;
        }
        Fault::KillInstance { index, down_for } => {
            cluster.kill_instance(index).await;
            tokio::time::sleep(down_for).await;
            cluster.restart_instance(index).await;
        }
    }
}
