//! One run: a seed's scenario played on a fresh cluster in a fresh,
//! paused, single-threaded runtime, then judged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use rand::SeedableRng;
use stockade_core::entropy;

use crate::clock::{SimClock, TrueTime};
use crate::crowd::{Crowd, get};
use crate::faults;
use crate::history::History;
use crate::oracle::{self, Violation};
use crate::scenario::{Scenario, Size};
use crate::watchdog::Watchdog;
use crate::world::{World, json_request};

/// What a run found.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The size it ran at.
    pub size: Size,
    /// The hash of its event log: equal for every replay of the seed.
    pub hash: String,
    /// The broken promises (none: the run passed).
    pub violations: Vec<Violation>,
    /// The event log's lines (the first ones, if it is very long).
    pub log: Vec<String>,
    /// Simulated time the run covered, in ms.
    pub simulated_ms: u64,
    /// What it exercised, for the coverage report.
    pub features: Vec<String>,
    /// What a check the project has not yet made pass found (rebuilds for
    /// nothing, [`crate::rebuilds`]): shown with every run, not counted as
    /// broken promises, so the suite stays a gate while they are open.
    #[serde(default)]
    pub open_findings: Vec<String>,
}

/// How long after the last arrival the run goes on, so holds run out,
/// payments land and the writer drains, before the end is judged.
const SETTLE: Duration = Duration::from_secs(70);

/// Runs `seed` at `size`, on a thread of its own whose OS randomness (its
/// hash maps' order among it) comes from the seed (see
/// [`crate::os_random`]).
pub fn run(seed: u64, size: Size) -> Report {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name(format!("sim-{seed:#x}"))
            .spawn_scoped(scope, || {
                crate::os_random::seed_this_thread(seed ^ 0x05_0a_4d_0b);
                run_here(seed, size)
            })
            .expect("a thread for the run")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn run_here(seed: u64, size: Size) -> Report {
    let scenario = Scenario::draw(seed, size);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let dir = scratch_dir();
    let history = History::default();
    let _watchdog = Watchdog::start(seed, history.clone());
    // Every instance records its metrics here (see `crate::metrics`).
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let report = runtime.block_on(play(&scenario, dir.path(), history, &snapshotter));
    drop(runtime);
    report
}

/// A directory on a memory file system when there is one (the store's
/// syncs cost nothing there).
fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new()
            .prefix("stockade-sim-")
            .tempdir_in(shm)
    {
        return dir;
    }
    tempfile::Builder::new()
        .prefix("stockade-sim-")
        .tempdir()
        .expect("a temporary directory")
}

async fn play(
    scenario: &Scenario,
    dir: &std::path::Path,
    history: History,
    snapshotter: &metrics_util::debugging::Snapshotter,
) -> Report {
    let time = TrueTime::start();
    let store_clock = SimClock::new(time, TimeDelta::zero(), 0);
    let _seeded = entropy::seed_thread(scenario.seed ^ 0x5eed_5eed, Arc::new(store_clock.clone()));
    let _events = crate::events::capture(&history, time);
    let mut violations = Vec::new();
    let clocks = scenario
        .clocks
        .iter()
        .map(|(offset, drift)| SimClock::new(time, TimeDelta::milliseconds(*offset), *drift))
        .collect();
    let world =
        World::new(dir, scenario.engine, clocks, store_clock, scenario.knobs).and_then(|w| {
            if scenario.fallback {
                w.with_fallback()
            } else {
                Ok(w)
            }
        });
    let mut world = match world {
        Ok(world) => world,
        Err(e) => return failed(scenario, &history, vec![e.to_string()]),
    };
    if scenario.engine == crate::scenario::Engine::Redis {
        // Created if missing, as the instances' settings do.
        let url = format!("{}?mode=rwc", crate::world::store_url(dir));
        if let Err(e) = crate::housekeeping::leave_yesterdays_view(&url, time).await {
            return failed(scenario, &history, vec![e]);
        }
    }
    if let Some(rush) = &scenario.release_rush {
        world.links().slow_scripts(rush.script_ms);
    }
    for i in 0..scenario.instances {
        if let Err(e) = world.start(i).await {
            return failed(scenario, &history, vec![e.to_string()]);
        }
    }
    history.log(
        0,
        format!(
            "cluster: {} instance(s), {:?} engine{}{}",
            scenario.instances,
            scenario.engine,
            if scenario.fallback {
                " with the fallback"
            } else {
                ""
            },
            scenario
                .knobs
                .map(|k| format!(", settings {}", k.describe()))
                .unwrap_or_default()
        ),
    );
    let gateway = world.gateway();
    let sale = Arc::new(scenario.sale.clone());
    let created = gateway
        .call(
            0,
            json_request("POST", "/v1/sales", &sale_body(scenario), true),
        )
        .await;
    history.log(time.millis(), format!("create sale -> {created:?}"));
    let commitment = created
        .as_ref()
        .and_then(|(_, body)| body["draw"]["seed_commitment"].as_str())
        .unwrap_or_default()
        .to_owned();
    if !matches!(created, Some((201, _))) {
        return failed(
            scenario,
            &history,
            vec![format!("the sale was not created: {created:?}")],
        );
    }
    let crowd = Crowd {
        gateway: gateway.clone(),
        history: history.clone(),
        time,
        sale: Arc::clone(&sale),
        clocks: (0..scenario.instances)
            .map(|i| world.clock(i).clone())
            .collect(),
        plain: scenario.plain,
        room: scenario.room.is_some(),
        spent: crate::rooms::Spent::default(),
        lost_answers: scenario.lost_answers,
    };
    let mut seeds = rand_chacha::ChaCha8Rng::seed_from_u64(scenario.seed);
    let buyers: Vec<_> = scenario
        .buyers
        .iter()
        .map(|buyer| {
            let seed = rand::Rng::random(&mut seeds);
            tokio::spawn(crowd.clone().buyer(buyer.clone(), seed))
        })
        .collect();
    let links = world.links();
    let world = Arc::new(tokio::sync::Mutex::new(world));
    let faults = faults::play(&scenario.faults, &world, &links, &history, time);
    for buyer in buyers {
        if let Err(e) = buyer.await {
            violations.push(format!("a buyer's task failed: {e}"));
        }
    }
    for fault in faults {
        match fault.await {
            Ok(Some(broken)) => violations.push(broken),
            Ok(None) => {}
            Err(e) => violations.push(format!("a fault's task failed: {e}")),
        }
    }
    let mut world = Arc::into_inner(world)
        .expect("the fault tasks have ended")
        .into_inner();
    tokio::time::sleep(SETTLE).await;
    // Read before the sale's answer below, which refreshes its gauges.
    let recorded = crate::metrics::Recorded::read(snapshotter);
    let remaining = remaining_of(&gateway, &sale.id).await;
    history.log(time.millis(), format!("end: remaining {remaining:?}"));
    let limits: BTreeMap<String, u32> = scenario
        .buyers
        .iter()
        .map(|b| (b.user.clone(), sale.limit_of(b.tier.as_deref())))
        .collect();
    let two_primaries = world.redis().is_some_and(|r| r.two_primaries_served());
    let shared_room = scenario.engine == crate::scenario::Engine::Redis;
    violations.extend(history.broken_spans());
    violations.extend(crate::rooms::unknown_tickets(
        &history,
        shared_room,
        two_primaries,
    ));
    if let Some(redis) = world.redis() {
        // Two primaries (see `agreement`): every epoch from the one before
        // the first the old one wrote after the failover to the one after
        // its last.
        let deposed = redis.deposed_epochs();
        if let (Some(first), Some(last)) = (deposed.first(), deposed.last()) {
            for epoch in first.saturating_sub(1)..=last + 1 {
                history.two_primaries(epoch);
            }
        }
    }
    match world.store() {
        Some(store) => {
            let tiers: BTreeMap<String, Option<String>> = scenario
                .buyers
                .iter()
                .map(|b| (b.user.clone(), b.tier.clone()))
                .collect();
            let now = crate::clock::at(time.millis());
            let mut verdict =
                oracle::judge(&sale, &limits, &history, (&store, now), &remaining).await;
            verdict
                .violations
                .extend(oracle::windows(&sale, &tiers, &history.judged_answers()));
            verdict
                .violations
                .extend(crate::refusals::judge(scenario, &store, &history).await);
            verdict
                .violations
                .extend(crate::outages::judge(scenario, &history, time.millis()));
            if scenario.engine == crate::scenario::Engine::Redis {
                verdict
                    .violations
                    .extend(crate::housekeeping::judge(&store, world.longest_running()).await);
            }
            violations.extend(verdict.violations);
            violations.extend(judge_metrics(
                &recorded,
                verdict.statuses.as_deref(),
                &sale,
                &remaining,
                world.batch_max(),
                time.millis(),
            ));
        }
        None => violations.push("no instance is running at the end".into()),
    }
    if sale.draw_close_ms.is_some() {
        violations.extend(
            crate::draw_check::judge(&gateway, &sale.id, &commitment, &history.entries()).await,
        );
    }
    world.stop_all().await;
    let simulated_ms = time.millis();
    let mut features = features(scenario);
    if crate::release::crossed(&sale, &history.judged_answers()) {
        features.push("an order asked before the reserve release, answered after".into());
    }
    Report {
        seed: scenario.seed,
        size: scenario.size,
        hash: history.hash(),
        violations,
        log: history.lines(),
        simulated_ms,
        features,
        open_findings: crate::rebuilds::judge(&history),
    }
}

/// The metrics against the store's orders (as the oracle read them) and
/// the sale's answer (`crate::metrics`):
/// the remaining-stock gauges only while the sale is open, by a minute
/// past any clock's reading (an ended sale's are no longer refreshed).
fn judge_metrics(
    recorded: &crate::metrics::Recorded,
    statuses: Option<&[stockade_core::OrderStatus]>,
    sale: &crate::scenario::Sale,
    remaining: &BTreeMap<String, i64>,
    batch_max: usize,
    now_ms: u64,
) -> Vec<oracle::Violation> {
    let mut violations = crate::metrics::voids(recorded);
    violations.extend(crate::metrics::batches(recorded, batch_max));
    // Without the store's orders the oracle has said so already.
    if let Some(statuses) = statuses {
        violations.extend(crate::metrics::orders(recorded, &sale.id, statuses));
    }
    if sale.ends_ms.is_none_or(|end| end > now_ms + 60_000) {
        violations.extend(crate::metrics::remaining(recorded, &sale.id, remaining));
    }
    violations
}

/// Each SKU's `remaining`, as the first instance up answers.
async fn remaining_of(gateway: &crate::world::Gateway, sale: &str) -> BTreeMap<String, i64> {
    for i in 0..gateway.instances() {
        if let Some((200, body)) = gateway.call(i, get(&format!("/v1/sales/{sale}"))).await {
            return body["skus"]
                .as_array()
                .map(|skus| {
                    skus.iter()
                        .filter_map(|s| {
                            Some((s["id"].as_str()?.to_owned(), s["remaining"].as_i64()?))
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
    }
    BTreeMap::new()
}

fn failed(scenario: &Scenario, history: &History, violations: Vec<String>) -> Report {
    Report {
        seed: scenario.seed,
        size: scenario.size,
        hash: history.hash(),
        violations,
        log: history.lines(),
        simulated_ms: 0,
        features: features(scenario),
        open_findings: Vec::new(),
    }
}

/// The sale features and fault kinds a scenario exercises.
pub fn features(scenario: &Scenario) -> Vec<String> {
    let sale = &scenario.sale;
    let mut features = vec![];
    let mut has = |yes: bool, name: &'static str| {
        if yes {
            features.push(name.to_owned());
        }
    };
    has(
        scenario.engine == crate::scenario::Engine::Redis,
        "Redis engine",
    );
    has(scenario.fallback, "fallback");
    has(scenario.plain, "a plain sale");
    has(scenario.bundles.is_some(), "big bundles in a rush");
    has(
        scenario.release_rush.is_some(),
        "a rush at the reserve release",
    );
    has(scenario.room.is_some(), "a waiting room");
    has(scenario.lost_answers, "lost answers");
    has(scenario.knobs.is_some(), "drawn settings");
    has(
        scenario.knobs.is_some_and(|k| k.batch_max == 1),
        "batches of one",
    );
    has(
        scenario.plain && sale.skus[0].id == "default",
        "a sale created with stock alone",
    );
    has(scenario.instances > 1, "several instances");
    has(sale.skus.len() > 1, "several SKUs");
    has(scenario.buyers.iter().any(|b| b.items.len() > 1), "bundles");
    has(sale.per_sku_limit.is_some(), "per-SKU limit");
    has(sale.hold_seconds.is_some(), "payment holds");
    has(sale.ends_ms.is_some(), "an end");
    has(!sale.tiers.is_empty(), "tiers");
    has(sale.release_reserved_ms.is_some(), "reserve release");
    has(sale.draw_close_ms.is_some(), "a draw");
    has(
        scenario.buyers.iter().any(|b| b.respond_async),
        "asynchronous answers",
    );
    let mut kinds: Vec<&'static str> = scenario.faults.iter().map(|(_, f)| f.label()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    features.extend(kinds.into_iter().map(String::from));
    features
}

/// The sale's creation body, with its waiting room if it has one.
fn sale_body(scenario: &Scenario) -> serde_json::Value {
    let mut body = scenario.sale.body();
    if let Some(admit_per_second) = scenario.room {
        body["waiting_room"] = crate::rooms::room_body(admit_per_second);
    }
    body
}
