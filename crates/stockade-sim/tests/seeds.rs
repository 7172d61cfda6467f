//! The simulator's budget in the suite: the standard mix's seeds, in four
//! shards that run side by side, seeds of the embedded default twice
//! (their event logs must hash the same), and the regression corpus. A
//! failure prints each failing seed with the command that replays it.
//!
//! Seeds on the Redis engine are not yet replayed the same every time
//! (docs/testing.md says what is open): their twice-run is left to
//! `stockade sim --twice` until that is fixed.

use stockade_sim::batch::{Plan, Summary, run_plan};
use stockade_sim::scenario::Engine;
use stockade_sim::{Scenario, Size};

/// Seeds of the standard mix per shard (four shards: 40 seeds).
const PER_SHARD: u64 = 10;
/// Seeds of the embedded default run twice for the determinism check.
const TWICE: usize = 8;
/// The first seed of the suite's sequence.
const FIRST: u64 = 0x5eed_0000;

fn shard(n: u64) -> Plan {
    Plan {
        fixed: Vec::new(),
        count: PER_SHARD,
        for_at_most: None,
        first: FIRST + n,
        step: 4,
        size: Size::default(),
        twice: 0,
        shrink: true,
    }
}

fn assert_kept(summary: &Summary) {
    let mut text = String::new();
    for failure in &summary.failures {
        text.push_str(&format!(
            "\nseed {:#x} at {:?}:\n  {}\n  events:\n    {}\n  replay: {}\n",
            failure.seed,
            failure.size,
            failure.violations.join("\n  "),
            failure.excerpt.join("\n    "),
            failure.replay()
        ));
    }
    assert!(
        summary.failures.is_empty(),
        "{} seed(s) broke a promise:{text}",
        summary.failures.len()
    );
    assert!(summary.seeds > 0, "no seed ran");
}

#[test]
fn standard_mix_shard_0() {
    assert_kept(&run_plan(&shard(0), |_| {}));
}

#[test]
fn standard_mix_shard_1() {
    assert_kept(&run_plan(&shard(1), |_| {}));
}

#[test]
fn standard_mix_shard_2() {
    assert_kept(&run_plan(&shard(2), |_| {}));
}

#[test]
fn standard_mix_shard_3() {
    assert_kept(&run_plan(&shard(3), |_| {}));
}

/// Whether a scenario is one the simulator replays exactly today: the
/// embedded default without a store outage (with one, the calls that
/// waited resume in an order that differs between runs: docs/testing.md).
fn replayable(scenario: &Scenario) -> bool {
    scenario.engine == Engine::Memory
        && !scenario
            .faults
            .iter()
            .any(|(_, f)| matches!(f, stockade_sim::scenario::Fault::StoreOutage(_)))
}

/// The first replayable seeds of the suite's sequence, each run twice: the
/// same events both times.
#[test]
fn embedded_seeds_replay_the_same_events() {
    let seeds = (FIRST..).filter(|seed| replayable(&Scenario::draw(*seed, Size::default())));
    for seed in seeds.take(TWICE) {
        let first = stockade_sim::run(seed, Size::default());
        let again = stockade_sim::run(seed, Size::default());
        assert_eq!(
            first.hash,
            again.hash,
            "seed {seed:#x} logged other events when replayed; replay: {}",
            stockade_sim::batch::replay_command(seed, Size::default())
        );
        assert!(
            first.violations.is_empty(),
            "seed {seed:#x}: {:?}",
            first.violations
        );
    }
}

/// Every seed of the corpus, at its shrunk size.
#[test]
fn the_regression_corpus() {
    let text = include_str!("../corpus.txt");
    let fixed: Vec<(u64, Size)> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            let fields: Vec<u64> = line
                .split_whitespace()
                .map(|f| match f.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => f.parse(),
                })
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("corpus line {line:?}: {e}"));
            assert_eq!(
                fields.len(),
                4,
                "corpus line {line:?}: seed buyers faults span_ms"
            );
            (
                fields[0],
                Size {
                    buyers: fields[1] as usize,
                    faults: fields[2] as usize,
                    span_ms: fields[3],
                },
            )
        })
        .collect();
    let plan = Plan {
        count: 0,
        twice: 0,
        shrink: false,
        fixed,
        ..shard(0)
    };
    let summary = run_plan(&plan, |_| {});
    assert_kept(&Summary {
        seeds: summary.seeds.max(1),
        ..summary
    });
}
