//! Each draw added after the first ones (the fallback, ...) comes from a
//! stream of its own: the seeds it does not apply to keep the scenario
//! they had, and the suite's seeds keep meaning what they meant.

use sha2::{Digest, Sha256};
use stockade_sim::scenario::Engine;
use stockade_sim::{Scenario, Size};

fn size() -> Size {
    Size {
        buyers: 50,
        ..Size::default()
    }
}

fn drawn() -> Vec<Scenario> {
    (0x5eed_0000..0x5eed_0000 + 200u64)
        .map(|seed| Scenario::draw(seed, size()))
        .collect()
}

/// The scenario's cluster, sale, crowd and faults, as text.
fn fingerprint(s: &Scenario) -> String {
    format!(
        "{:?} {} {:?} {:?} {:?} {:?}",
        s.engine, s.instances, s.clocks, s.sale, s.buyers, s.faults
    )
}

#[test]
fn the_fallback_draw_changes_no_other_part_of_a_scenario() {
    let mut hash = Sha256::new();
    for scenario in drawn() {
        hash.update(fingerprint(&scenario).as_bytes());
    }
    // The digest of these 200 scenarios before the fallback was drawn
    // (at 5ce1df7).
    assert_eq!(
        hex::encode(hash.finalize()),
        "bdd9d90dd12a52d086f9593ce73163a62520629a3fe58dc99d5c1d03e74ee68f"
    );
}

#[test]
fn about_half_the_seeds_on_redis_have_the_fallback() {
    let drawn = drawn();
    let redis = drawn.iter().filter(|s| s.engine == Engine::Redis).count();
    let fallback = drawn.iter().filter(|s| s.fallback).count();
    assert!(
        drawn
            .iter()
            .all(|s| !s.fallback || s.engine == Engine::Redis),
        "a fallback only on Redis"
    );
    assert!(
        (redis * 35 / 100..=redis * 65 / 100).contains(&fallback),
        "{fallback} of {redis} seeds on Redis have the fallback"
    );
}

#[test]
fn the_standard_seed_is_three_instances_on_redis_with_the_fallback_and_the_seeds_sale() {
    let standard = Size {
        standard: true,
        ..size()
    };
    for seed in 0x5eed_0000..0x5eed_0000 + 50u64 {
        let mixed = Scenario::draw(seed, size());
        let forced = Scenario::draw(seed, standard);
        assert_eq!(
            (forced.engine, forced.instances, forced.fallback),
            (Engine::Redis, 3, true)
        );
        assert_eq!(forced.clocks.len(), 3);
        assert_eq!(forced.clocks[..mixed.clocks.len()], mixed.clocks[..]);
        assert_eq!((&forced.sale, &forced.buyers), (&mixed.sale, &mixed.buyers));
        assert!(forced.faults.len() >= forced.size.faults);
    }
}
