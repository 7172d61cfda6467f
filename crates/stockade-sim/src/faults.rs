//! Playing the scenario's faults: each at its instant, in a task of its
//! own, so that they overlap as they come (a crash during a store outage).
//! Those that end by healing (an outage, a partition) heal through
//! [`Links`] or a server handle, never the world's lock, which a start
//! waiting on them holds.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::clock::TrueTime;
use crate::history::{FaultSpan, History};
use crate::links::Links;
use crate::scenario::Fault;
use crate::world::World;

/// How long a deposed primary keeps serving the connections opened to it
/// before a failover, before it is demoted: Sentinel reconfigures a
/// reachable old primary within about a second of the promotion.
pub const DEMOTED_AFTER: Duration = Duration::from_secs(2);

/// Starts a task per fault; each ends with the broken promise it met, if
/// any (an instance that did not start again).
pub fn play(
    faults: &[(u64, Fault)],
    world: &Arc<Mutex<World>>,
    links: &Links,
    history: &History,
    time: TrueTime,
) -> Vec<JoinHandle<Option<String>>> {
    faults
        .iter()
        .map(|&(at, fault)| {
            let world = Arc::clone(world);
            let links = links.clone();
            let history = history.clone();
            tokio::spawn(async move {
                let wait = Duration::from_millis(at.saturating_sub(time.millis()));
                tokio::time::sleep(wait).await;
                let from_ms = time.millis();
                let broken = one(fault, &world, &links, &history, time).await;
                // A freeze records its own span: it may strike later,
                // once a start waiting on the world lets go of it.
                if !matches!(fault, Fault::RedisFreeze(_)) {
                    history.fault(FaultSpan {
                        from_ms,
                        to_ms: time.millis(),
                        fault,
                    });
                }
                broken
            })
        })
        .collect()
}

async fn one(
    fault: Fault,
    world: &Mutex<World>,
    links: &Links,
    history: &History,
    time: TrueTime,
) -> Option<String> {
    let log = |line: String| history.log(time.millis(), line);
    let down_for = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
    match fault {
        Fault::Restart(i, down_ms) => {
            log(format!("fault: stop i{i}"));
            world.lock().await.stop(i).await;
            down_for(down_ms).await;
            start_again(world, i, &log).await
        }
        Fault::Crash(i, down_ms) => {
            log(format!("fault: crash i{i}"));
            world.lock().await.crash(i);
            down_for(down_ms).await;
            start_again(world, i, &log).await
        }
        Fault::StoreOutage(for_ms) => {
            log("fault: store down".into());
            links.set_store_down(true);
            down_for(for_ms).await;
            log("fault: store up".into());
            links.set_store_down(false);
            None
        }
        Fault::Partition(i, cut, for_ms) => {
            log(format!("fault: i{i} cut from {}", cut.name()));
            links.cut(i, cut, true);
            down_for(for_ms).await;
            log(format!("fault: i{i} reaches {} again", cut.name()));
            links.cut(i, cut, false);
            None
        }
        Fault::RedisLoss => {
            log("fault: Redis restarts empty".into());
            history.redis_lost_writes_now("a Redis loss");
            if let Some(redis) = world.lock().await.redis() {
                redis.server().restart_empty();
            }
            None
        }
        Fault::RedisFreeze(for_ms) => {
            log("fault: Redis freezes".into());
            let redis = world.lock().await.redis().map(|r| r.server());
            if let Some(redis) = redis {
                let from_ms = time.millis();
                redis.freeze();
                down_for(for_ms).await;
                log("fault: Redis thaws".into());
                redis.thaw();
                history.fault(FaultSpan {
                    from_ms,
                    to_ms: time.millis(),
                    fault,
                });
            }
            None
        }
        Fault::RedisDropReplies(n) => {
            log(format!("fault: Redis drops {n} replies"));
            history.disturbed("lost Redis replies");
            if let Some(redis) = world.lock().await.redis() {
                redis.server().drop_replies(n);
            }
            None
        }
        Fault::RedisFailover(behind) => {
            log(format!(
                "fault: a replica {behind} writes behind takes over"
            ));
            history.redis_lost_writes_now("a Redis failover");
            let redis = world.lock().await.redis().cloned();
            if let Some(redis) = redis {
                let deposed = redis.server();
                redis.promote(deposed.replica_lagging(behind));
                // Connections opened before the failover still reach the
                // old primary (two primaries), until it is demoted, as
                // Sentinel or a managed service does: they end, and their
                // clients connect again, to the new one. The fault lasts
                // until then.
                tokio::time::sleep(DEMOTED_AFTER).await;
                log("fault: the deposed primary is demoted: its connections end".into());
                deposed.drop_connections();
            }
            None
        }
        Fault::ClockJump(i, by) => {
            log(format!("fault: clock of i{i} jumps {by} ms"));
            world
                .lock()
                .await
                .clock(i)
                .jump(TimeDelta::milliseconds(by));
            None
        }
    }
}

async fn start_again(world: &Mutex<World>, i: usize, log: &impl Fn(String)) -> Option<String> {
    // As a supervisor does: a start that fails (Redis or the store still
    // down) is tried again a second later, for up to a minute.
    let mut failed = None;
    for _ in 0..60 {
        {
            let mut world = world.lock().await;
            if world.is_running(i) {
                return None;
            }
            log(format!("fault: start i{i}"));
            match world.start(i).await {
                Ok(()) => return None,
                Err(e) => {
                    log(format!("fault: i{i} did not start: {e}"));
                    failed = Some(e);
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    failed.map(|e| format!("instance {i} did not start again within a minute: {e}"))
}
