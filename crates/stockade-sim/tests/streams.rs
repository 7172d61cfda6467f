//! Each draw added after the first ones (the fallback, plain sales, big
//! bundles, the rush at the reserve release, lost answers, waiting rooms)
//! comes from a stream of its own: the seeds it does not apply to keep the
//! scenario they had, and the suite's seeds keep meaning what they meant.

use sha2::{Digest, Sha256};
use stockade_sim::outages::OUTAGE_MS;
use stockade_sim::scenario::{Engine, Fault};
use stockade_sim::{Scenario, Size};

fn size() -> Size {
    Size {
        buyers: 50,
        ..Size::default()
    }
}

/// A freeze of Redis past the fallback's quiet period.
fn is_outage(fault: &Fault) -> bool {
    matches!(fault, Fault::RedisFreeze(ms) if *ms >= OUTAGE_MS.start)
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
fn the_fallback_plain_bundles_and_release_rush_draws_change_no_other_part_of_a_scenario() {
    let mut hash = Sha256::new();
    // Drawn as before big bundles and the rush at the release, which the
    // seeds neither of them picks are (below).
    let before: Vec<Scenario> = (0x5eed_0000..0x5eed_0000 + 200u64)
        .map(|seed| Scenario::draw_before_workloads(seed, size()))
        .collect();
    for scenario in before.iter().filter(|s| !s.plain) {
        hash.update(fingerprint(scenario).as_bytes());
    }
    for (now, before) in drawn().iter().zip(&before) {
        if now.bundles.is_none() && now.release_rush.is_none() {
            // A waiting room changes the sale's creation only; an outage
            // is a fault more, and one alone leaves out the faults near it.
            let mut now = now.clone();
            now.room = None;
            if now.faults.iter().any(|(_, fault)| is_outage(fault)) {
                now.faults.retain(|(_, fault)| !is_outage(fault));
                assert!(
                    now.faults.iter().all(|f| before.faults.contains(f)),
                    "seed {:#x}",
                    now.seed
                );
                now.faults.clone_from(&before.faults);
            }
            assert_eq!(&now, before, "seed {:#x}", now.seed);
        }
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
fn about_a_third_of_the_seeds_on_redis_have_one_outage_of_redis() {
    let drawn = drawn();
    let redis = drawn.iter().filter(|s| s.engine == Engine::Redis).count();
    let outages: Vec<usize> = drawn
        .iter()
        .map(|s| s.faults.iter().filter(|(_, f)| is_outage(f)).count())
        .collect();
    for (s, outages) in drawn.iter().zip(&outages) {
        assert!(*outages <= 1, "seed {:#x} has {outages} outages", s.seed);
        assert!(
            *outages == 0 || s.engine == Engine::Redis,
            "an outage only on Redis"
        );
    }
    let with = outages.iter().sum::<usize>();
    assert!(
        (redis * 20 / 100..=redis * 45 / 100).contains(&with),
        "{with} of {redis} seeds on Redis have an outage"
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
        // All the size's faults, or an outage alone that left some out.
        assert!(
            forced.faults.len() >= forced.size.faults
                || forced.faults.iter().any(|(_, f)| is_outage(f))
        );
    }
}

#[test]
fn some_sales_are_big_bundles_bought_in_a_rush() {
    use stockade_sim::bundles::{RUSH, SKUS};
    let size = Size::default();
    let drawn: Vec<Scenario> = (0x5eed_0000..0x5eed_0000 + 200u64)
        .map(|seed| Scenario::draw(seed, size))
        .collect();
    let eligible = drawn
        .iter()
        .filter(|s| !s.plain && s.sale.draw_close_ms.is_none())
        .count();
    let bundles: Vec<&Scenario> = drawn.iter().filter(|s| s.bundles.is_some()).collect();
    assert!(
        (eligible / 12..=eligible / 3).contains(&bundles.len()),
        "{} of {eligible} sales are big bundles",
        bundles.len()
    );
    for s in bundles {
        let at = s.bundles.unwrap();
        assert!(!s.plain && s.sale.draw_close_ms.is_none());
        assert_eq!(s.sale.skus.len(), SKUS);
        assert!(s.sale.skus.iter().all(|sku| sku.stock >= 200));
        assert!(s.sale.per_sku_limit.is_some() && s.sale.per_user_limit >= SKUS as u32);
        assert!(at > s.sale.starts_ms && s.sale.ends_ms.is_none_or(|ends| at < ends));
        let rush: Vec<_> = s.buyers.iter().filter(|b| b.arrives_ms == at).collect();
        assert!(rush.len() >= RUSH, "{} buyers in the rush", rush.len());
        assert!(
            rush.iter()
                .all(|b| b.items == (0..SKUS).map(|i| (i, 1u32)).collect::<Vec<_>>())
        );
    }
}

#[test]
fn some_crowds_rush_the_reserve_release_on_a_loaded_redis() {
    let size = Size::default();
    let drawn: Vec<Scenario> = (0x5eed_0000..0x5eed_0000 + 300u64)
        .map(|seed| Scenario::draw(seed, size))
        .collect();
    let releasing = drawn
        .iter()
        .filter(|s| {
            s.sale.release_reserved_ms.is_some()
                && s.sale.draw_close_ms.is_none()
                && s.bundles.is_none()
        })
        .count();
    let rushed: Vec<&Scenario> = drawn.iter().filter(|s| s.release_rush.is_some()).collect();
    assert!(
        rushed.len() * 3 >= releasing && rushed.len() < releasing,
        "{} of {releasing} sales releasing reserves are rushed",
        rushed.len()
    );
    for s in rushed {
        let rush = s.release_rush.as_ref().unwrap();
        let release = s.sale.release_reserved_ms.unwrap();
        assert!((2..=20).contains(&rush.script_ms));
        assert_eq!(rush.arrivals.len(), stockade_sim::release::RUSH);
        for (buyer, at) in s.buyers.iter().zip(&rush.arrivals) {
            assert_eq!(buyer.arrives_ms, *at);
            assert!(buyer.arrives_ms.abs_diff(release) <= 1_000);
            assert!(buyer.tier.is_none() && buyer.items.len() == 1 && buyer.items[0].0 == 0);
        }
        // Some before the release and some after, by true time.
        assert!(rush.arrivals.iter().any(|at| *at < release));
        assert!(rush.arrivals.iter().any(|at| *at > release));
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
fn about_a_quarter_of_the_sales_without_a_draw_or_a_rush_have_a_waiting_room() {
    let drawn = drawn();
    let (eligible, others): (Vec<&Scenario>, Vec<&Scenario>) = drawn.iter().partition(|s| {
        s.sale.draw_close_ms.is_none() && s.bundles.is_none() && s.release_rush.is_none()
    });
    assert!(others.iter().all(|s| s.room.is_none()));
    let rooms = eligible.iter().filter(|s| s.room.is_some()).count();
    assert!(
        rooms * 6 > eligible.len() && rooms * 5 < eligible.len() * 2,
        "{rooms} of {} sales without a draw or a rush have a room",
        eligible.len()
    );
    for s in eligible.iter().filter(|s| s.room.is_some()) {
        assert!((5..=200).contains(&s.room.unwrap_or_default()));
    }
}
