//! The workloads drawn for the simulator's power against issue 35's fixes
//! reach what they were drawn for, and the service keeps every promise
//! under them.

use stockade_sim::scenario::Engine;
use stockade_sim::{Scenario, Size};

/// Without faults, so that what the run shows is the workload's.
fn quiet() -> Size {
    Size {
        faults: 0,
        ..Size::default()
    }
}

/// The first `n` seeds from `0x5eed0000` on Redis whose scenario `pick`s.
fn seeds(n: usize, pick: impl Fn(&Scenario) -> bool) -> Vec<u64> {
    (0x5eed_0000u64..)
        .filter(|seed| {
            let scenario = Scenario::draw(*seed, quiet());
            scenario.engine == Engine::Redis && pick(&scenario)
        })
        .take(n)
        .collect()
}

/// The rush of big bundles is sold without a broken promise: the stock
/// each SKU's orders took and the engine's remaining add up.
#[test]
fn a_rush_of_big_bundles_keeps_every_promise() {
    let seed = seeds(1, |s| s.bundles.is_some())[0];
    let report = stockade_sim::run(seed, quiet());
    assert!(
        report.violations.is_empty(),
        "seed {seed:#x}: {:?}",
        report.violations
    );
    assert!(report.features.iter().any(|f| f == "big bundles in a rush"));
}
