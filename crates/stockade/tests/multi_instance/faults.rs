//! The faults of docs/design.md's table, and a script that injects them one
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
    /// Redis Sentinel ordered to fail the primary over to its replica
    /// (`SENTINEL FAILOVER`); healed once every sentinel names the new one.
    SentinelFailover,
    /// On a Redis Cluster: the sale's slot migrated to the next primary,
    /// one key at a time with this pause after each (buyers meet the slot
    /// half-migrated: ASK, TRYAGAIN).
    MigrateSaleSlot {
        /// The pause after each key.
        pause: Duration,
    },
    /// The scenario's partitioned instance cut off from Redis (its proxy
    /// black-holes the traffic) for a while, then healed; the other
    /// instances reach Redis throughout.
    Partition(Duration),
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
            Fault::Partition(d) => write!(
                f,
                "one instance cut off from Redis for {} ms",
                d.as_millis()
            ),
            Fault::SentinelFailover => write!(f, "Redis Sentinel failover"),
            Fault::MigrateSaleSlot { pause } => write!(
                f,
                "the sale's Redis Cluster slot migrated ({} ms per key)",
                pause.as_millis()
            ),
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

/// What [`run`] did.
#[derive(Debug, Default)]
pub struct Injected {
    /// When each step was injected, and when its injection ended.
    pub times: Vec<(Instant, Instant)>,
    /// The `expired` counter of each killed instance just before its kill.
    pub before_kills: Vec<(usize, Result<u64, String>)>,
}

/// Injects the steps in order into the round that sells `sale`; every
/// fault is healed before the next step. Returns when each was injected
/// and when its injection (the outage, the failover, the migration) ended;
/// and, for a sale with payment holds (`holds`), the `expired` counter of
/// the sale each instance about to be killed had (its counters die with
/// it), as (instance, count).
pub async fn run(
    cluster: &Cluster,
    sale: &str,
    steps: &[Step],
    recorder: &Recorder,
    round: usize,
    holds: bool,
) -> Injected {
    let mut injected = Injected::default();
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
        if let (Fault::KillInstance { index, .. }, true) = (step.fault, holds) {
            injected
                .before_kills
                .push((index, cluster.expired_counter(index, sale).await));
        }
        let start = Instant::now();
        inject(cluster, sale, step.fault).await;
        injected.times.push((start, Instant::now()));
        eprintln!(
            "round {round}: fault healed: {} (at {} acks)",
            step.fault,
            recorder.acks()
        );
    }
    injected
}

async fn inject(cluster: &Cluster, sale: &str, fault: Fault) {
    match fault {
        Fault::SentinelFailover => {
            let new = cluster
                .sentinel(|group| group.failover().expect("a Sentinel failover"))
                .await;
            eprintln!("the Redis on port {new} is the primary now");
        }
        Fault::MigrateSaleSlot { pause } => {
            let tag = format!("{{{sale}}}");
            let (slot, from, to) = cluster
                .redis_cluster(move |redis| {
                    let slot = redis.slot_of(&tag).expect("CLUSTER KEYSLOT");
                    let from = redis.owner_of(slot).expect("CLUSTER NODES");
                    let ports = redis.ports();
                    let next = ports.iter().position(|p| *p == from).expect("a primary") + 1;
                    let to = ports[next % ports.len()];
                    let moved = redis
                        .migrate_slot(slot, to, pause)
                        .expect("migrate the sale's slot");
                    assert!(moved > 0, "the sale had no keys in slot {slot} to migrate");
                    (slot, from, to)
                })
                .await;
            eprintln!("slot {slot} moved from the primary on port {from} to {to}");
        }
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
        Fault::Partition(down_for) => {
            cluster.cut_partition();
            tokio::time::sleep(down_for).await;
            cluster.heal_partition();
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
