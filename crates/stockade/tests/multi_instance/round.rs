//! A scenario: one cluster, several rounds. A round is a fresh sale, the
//! crowd with the scenario's faults injected mid-way, healing, and the
//! checker; the first round with violations fails the test with all of
//! them (and the instances' log tails).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::checker;
use crate::cluster::{Cluster, INSTANCES};
use crate::crowd;
use crate::evidence::{Evidence, ExpiryCounters, SkuStock, Terms};
use crate::faults::{self, Step};
use crate::flags::Engine;
use crate::healing;
use crate::history::{Phase, Recorder};
use crate::plan::{self, PER_USER_LIMIT};

/// A scenario of the suite.
pub struct Scenario {
    /// A short name, used in sale ids and progress lines.
    pub name: &'static str,
    /// The engine of the three instances.
    pub engine: Engine,
    /// More `stockade serve` arguments for every instance, after the
    /// engine's (see `flags.rs`).
    pub extra_args: Vec<String>,
    /// Whether every crowd answer must be 2xx, 409, or 503 with
    /// `Retry-After` (no other error, no missing answer).
    pub orderly_answers_only: bool,
    /// The stock of each round's sale (`plan::STOCK` unless the scenario
    /// needs the crowd to outlast its faults).
    pub stock: u64,
    /// The sale's SKUs and their stocks, adding up to `stock`; the crowd
    /// then buys bundles of them (`plan::with_bundles`). Empty: the sale is
    /// created with `stock` alone and nobody names a SKU.
    pub skus: &'static [(&'static str, u64)],
    /// Over how many shards the sale's stock is spread (1: not split; more
    /// needs the Redis engine to mean anything, and a sale of one SKU).
    pub shards: u16,
    /// The faults of round `n` (1-based), in order.
    pub faults: fn(usize) -> Vec<Step>,
    /// Payment holds of the sales, if any.
    pub holds: Option<Holds>,
    /// Percent of the crowd's requests sent with `Prefer: respond-async`
    /// (answered 202 `pending` when their commit is not done at once).
    pub async_percent: u64,
    /// The instance that reaches Redis through a [`PartitionProxy`], which
    /// the `Fault::Partition` step cuts.
    ///
    /// [`PartitionProxy`]: stockade_test_support::PartitionProxy
    pub partitioned: Option<usize>,
}

/// A sale with payment holds and the crowd's paying buyers.
#[derive(Debug, Clone, Copy)]
pub struct Holds {
    /// The sale's `hold_seconds`.
    pub seconds: u64,
    /// Percent of the crowd's buyers who confirm their holds (chosen from
    /// the round's seed); the others let them expire.
    pub paying_percent: u64,
}

/// Runs every round of `scenario`; panics at the first round that breaks
/// an invariant or never heals.
pub async fn run(scenario: Scenario) {
    let started = Instant::now();
    let cluster = Cluster::start(scenario.engine, &scenario.extra_args, scenario.partitioned).await;
    eprintln!(
        "{}: cluster up in {:.1} s",
        scenario.name,
        started.elapsed().as_secs_f64()
    );
    let mut sales = Vec::new();
    let mut heal_times = Vec::new();
    let rounds = rounds();
    for round in 1..=rounds {
        let (sale, healed) = run_round(&cluster, &scenario, round).await;
        sales.push(sale);
        heal_times.extend(healed);
    }
    if scenario.engine == Engine::RedisCluster {
        let mut primaries = cluster.primaries_of(sales.clone()).await;
        eprintln!(
            "{}: sales {sales:?} are on primaries {primaries:?}",
            scenario.name
        );
        primaries.sort_unstable();
        primaries.dedup();
        // Each round's sale on another primary: all three from the third
        // round on (`scripts/test --long`).
        assert_eq!(
            primaries.len(),
            rounds.min(stockade_test_support::redis_cluster::PRIMARIES),
            "the rounds' sales must each be on another primary of the Redis Cluster"
        );
    }
    if !heal_times.is_empty() {
        heal_times.sort_unstable();
        let seconds: Vec<String> = heal_times
            .iter()
            .map(|t| format!("{:.2}", t.as_secs_f64()))
            .collect();
        eprintln!(
            "{}: healed in [{}] s (median {:.2} s): from each fault to the first 201 after \
             its last refusal",
            scenario.name,
            seconds.join(", "),
            heal_times[heal_times.len() / 2].as_secs_f64()
        );
    }
    eprintln!(
        "{}: all {} rounds kept the invariants ({:.1} s)",
        scenario.name,
        rounds,
        started.elapsed().as_secs_f64()
    );
}

/// One round; returns its sale and how long the crowd took to heal from
/// each fault (see [`Recorder::aftermath`]).
async fn run_round(
    cluster: &Cluster,
    scenario: &Scenario,
    round: usize,
) -> (String, Vec<Duration>) {
    let started = Instant::now();
    let sale = cluster
        .sale_id(format!("{}-r{round}", scenario.name), round)
        .await;
    let hold_seconds = scenario.holds.map(|h| h.seconds);
    let skus: Vec<SkuStock> = scenario
        .skus
        .iter()
        .map(|&(id, stock)| SkuStock {
            id: id.to_owned(),
            stock,
        })
        .collect();
    assert!(
        skus.is_empty() || skus.iter().map(|s| s.stock).sum::<u64>() == scenario.stock,
        "{}: the SKUs' stocks must add up to the stock",
        scenario.name
    );
    let terms = Terms {
        sale: sale.clone(),
        stock: scenario.stock,
        per_user_limit: PER_USER_LIMIT,
        hold_seconds,
    };
    cluster.create_sale(&terms, &skus, scenario.shards).await;
    let seed = seed(scenario.name, round);
    let plan = match scenario.holds {
        Some(holds) => plan::with_payments(seed, plan::crowd(seed), holds.paying_percent),
        None => plan::crowd(seed),
    };
    let plan = plan::with_async(seed, plan, scenario.async_percent);
    let plan = match scenario.skus {
        [] => plan,
        skus => {
            let ids: Vec<&str> = skus.iter().map(|&(id, _)| id).collect();
            plan::with_bundles(seed, plan, &ids)
        }
    };
    let steps = (scenario.faults)(round);
    let faults: Vec<String> = steps
        .iter()
        .map(|s| format!("{} at {} acks", s.fault, s.after_acks))
        .collect();
    eprintln!(
        "{} round {round}: sale {sale} (stock {}{}, limit {PER_USER_LIMIT}, holds {:?}), \
         {} requests (seed {seed}); faults: {}",
        scenario.name,
        scenario.stock,
        skus_in_words(scenario.skus),
        scenario.holds,
        plan.len(),
        faults.join(", ")
    );
    let recorder = Recorder::default();
    let crowd = tokio::spawn(crowd::run(
        cluster.client().clone(),
        cluster.endpoints(),
        sale.clone(),
        plan,
        recorder.clone(),
    ));
    let injected = faults::run(
        cluster,
        &sale,
        &steps,
        &recorder,
        round,
        scenario.holds.is_some(),
    )
    .await;
    let crowd_wait = tokio::time::timeout(Duration::from_secs(180), crowd).await;
    crowd_wait
        .expect("the crowd did not finish within 180 s")
        .expect("the crowd panicked");
    if scenario.orderly_answers_only {
        let history = recorder.history();
        let disorderly: Vec<String> = history
            .purchases
            .iter()
            .filter(|p| p.request.phase == Phase::Crowd && !p.answer.is_orderly())
            .take(5)
            .map(|p| p.answer.describe())
            .collect();
        assert!(
            disorderly.is_empty(),
            "{} round {round}: buyers met answers other than 2xx, 409 or 503 with Retry-After: {}",
            scenario.name,
            disorderly.join("; ")
        );
    }
    let mut heal_times = Vec::new();
    let times = &injected.times;
    for (index, ((at, ended), step)) in times.iter().zip(&steps).enumerate() {
        let aftermath = recorder.aftermath(*at, times.get(index + 1).map(|(next, _)| *next));
        eprintln!(
            "{} round {round}: after \"{}\" (injected in {:.2} s): {aftermath}",
            scenario.name,
            step.fault,
            ended.duration_since(*at).as_secs_f64()
        );
        heal_times.extend(aftermath.healed);
    }
    eprintln!(
        "{} round {round}: crowd done after {:.1} s: {}",
        scenario.name,
        started.elapsed().as_secs_f64(),
        recorder.history().summary(Phase::Crowd)
    );
    let holds = scenario.holds.is_some();
    let (healing, store) =
        healing::heal_skus(cluster, &sale, terms.stock, &skus, holds, &recorder, round).await;
    let mut expiry_counters = None;
    if holds {
        let mut after_healing = Vec::new();
        for index in 0..INSTANCES {
            after_healing.push(cluster.expired_counter(index, &sale).await);
        }
        let counters = ExpiryCounters {
            after_healing,
            before_kills: injected.before_kills,
        };
        let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
        for order in store.iter().flatten() {
            *statuses.entry(order.status.as_str()).or_default() += 1;
        }
        eprintln!(
            "{} round {round}: {}; store: {statuses:?}; expired counters: {counters:?}",
            scenario.name,
            recorder.history().confirm_summary()
        );
        expiry_counters = Some(counters);
    }
    let evidence = Evidence {
        terms,
        history: recorder.history(),
        store,
        healing,
        expiry_counters,
    };
    let violations = checker::check_with_skus(&evidence, &skus);
    if violations.is_empty() {
        eprintln!(
            "{} round {round}: invariants 1-5 hold ({:.1} s)",
            scenario.name,
            started.elapsed().as_secs_f64()
        );
        return (sale, heal_times);
    }
    let list: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
    // Printed before the long log tails too, so that an excerpt of the
    // output (CI keeps its head and its tail) still shows what broke.
    eprintln!(
        "{} round {round}: {} invariant violations:\n{}",
        scenario.name,
        violations.len(),
        list.join("\n")
    );
    eprintln!("{}", cluster.log_tails(15));
    let named = order_ids_in(
        &violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
    );
    eprintln!(
        "--- log lines naming the {} orders concerned:\n{}",
        named.len(),
        cluster.log_lines_naming(&named)
    );
    let notes: Vec<String> = cluster
        .exited_instances()
        .iter()
        .map(|n| format!("\n  note: {n}"))
        .collect();
    panic!(
        "{} round {round} (sale {sale}, seed {seed}, faults: {}): {} invariant violations:\n{}{}",
        scenario.name,
        faults.join(", "),
        violations.len(),
        list.join("\n"),
        notes.concat()
    );
}

/// ` in SKUs a 300, b 400` (nothing for a sale of one SKU).
fn skus_in_words(skus: &[(&str, u64)]) -> String {
    if skus.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = skus.iter().map(|(id, n)| format!("{id} {n}")).collect();
    format!(" in SKUs {}", parts.join(", "))
}

/// The order ids (UUIDs) the violations name, each once.
fn order_ids_in(violations: &[String]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for text in violations {
        for word in text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-')) {
            if word.len() == 36 && word.matches('-').count() == 4 && !ids.iter().any(|i| i == word)
            {
                ids.push(word.to_owned());
            }
        }
    }
    ids
}

/// The rounds of each scenario (same servers, a fresh sale each): one
/// real-process round in the suite, whose crowds and faults the simulator
/// repeats over its seeds, or as many as `STOCKADE_SCENARIO_ROUNDS` asks
/// (`scripts/test --long` asks for 3; race windows are narrow, so a fault
/// is hunted over many rounds).
pub fn rounds() -> usize {
    match std::env::var("STOCKADE_SCENARIO_ROUNDS") {
        Ok(value) => value
            .parse::<usize>()
            .unwrap_or_else(|_| {
                panic!("STOCKADE_SCENARIO_ROUNDS={value:?} is not a count of rounds")
            })
            .max(1),
        Err(_) => 1,
    }
}

/// A seed per scenario and round, so every round differs and a failure can
/// be replayed.
fn seed(name: &str, round: usize) -> u64 {
    name.bytes().fold(round as u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    })
}
