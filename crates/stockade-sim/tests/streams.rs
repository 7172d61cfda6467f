//! Each draw added after the first ones (the fallback, plain sales, lost
//! answers) comes from a stream of its own: the seeds it does not apply to
//! keep the scenario they had, and the suite's seeds keep meaning what
//! they meant.

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
fn the_fallback_and_plain_draws_change_no_other_part_of_a_scenario() {
    let mut hash = Sha256::new();
    for scenario in drawn().iter().filter(|s| !s.plain) {
        hash.update(fingerprint(scenario).as_bytes());
    }
    // The digest of the same scenarios before plain sales were drawn (at
    // b67b199; over all 200, before the fallback was drawn, at 5ce1df7:
    // bdd9d90d...).
    assert_eq!(
        hex::encode(hash.finalize()),
        "6cb2ad679e122962665e22118b3f4dc71d7156d858af6572e60aa4d216e48621"
    );
}

#[test]
fn about_a_third_of_the_sales_are_plain() {
    let drawn = drawn();
    let plain: Vec<&Scenario> = drawn.iter().filter(|s| s.plain).collect();
    assert!(
        (50..=85).contains(&plain.len()),
        "{} of 200 sales are plain",
        plain.len()
    );
    for s in &plain {
        assert!(s.sale.skus.len() == 1 && s.sale.tiers.is_empty());
        assert!(s.sale.per_sku_limit.is_none() && s.sale.release_reserved_ms.is_none());
        assert!(
            s.buyers
                .iter()
                .all(|b| b.items.len() == 1 && b.tier.is_none())
        );
    }
    let stock_alone = plain
        .iter()
        .filter(|s| s.sale.skus[0].id == "default")
        .count();
    assert!(
        stock_alone > 10 && stock_alone < plain.len() - 10,
        "{stock_alone} of {} plain sales are created with stock alone",
        plain.len()
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

#[test]
fn about_a_third_of_the_seeds_lose_answers_and_every_one_when_asked() {
    let drawn = drawn();
    let lost = drawn.iter().filter(|s| s.lost_answers).count();
    assert!(
        (45..=90).contains(&lost),
        "{lost} of 200 seeds lose answers"
    );
    let asked = Size {
        lost_answers: true,
        ..size()
    };
    for seed in 0x5eed_0000..0x5eed_0000 + 20u64 {
        assert!(Scenario::draw(seed, asked).lost_answers, "{seed:#x}");
    }
}

#[test]
fn about_a_quarter_of_the_sales_that_are_not_draws_have_a_waiting_room() {
    let drawn = drawn();
    let draws = drawn.iter().filter(|s| s.sale.draw_close_ms.is_some());
    assert!(
        draws.clone().all(|s| s.room.is_none()),
        "a draw has no room"
    );
    let others = drawn.len() - draws.count();
    let rooms = drawn.iter().filter(|s| s.room.is_some()).count();
    assert!(
        rooms * 6 > others && rooms * 5 < others * 2,
        "{rooms} of {others} sales that are not draws have a room"
    );
    for s in drawn.iter().filter(|s| s.room.is_some()) {
        assert!((5..=200).contains(&s.room.unwrap_or_default()));
    }
}
