//! Partitions of one instance are drawn from a stream of their own: some
//! seeds with several instances on Redis get one, and every seed keeps the
//! faults it had before partitions existed.

use stockade_sim::scenario::{Cut, Engine, Fault, Scenario, Size};

fn partitions(scenario: &Scenario) -> Vec<(u64, Fault)> {
    scenario
        .faults
        .iter()
        .copied()
        .filter(|(_, f)| matches!(f, Fault::Partition(..)))
        .collect()
}

fn others(scenario: &Scenario) -> Vec<(u64, Fault)> {
    scenario
        .faults
        .iter()
        .copied()
        .filter(|(_, f)| !matches!(f, Fault::Partition(..)))
        .collect()
}

/// The standard mix, as drawn before outages of Redis (which a seed may
/// have beside its partitions).
fn before_outages() -> Size {
    Size {
        without_outage: true,
        ..Size::default()
    }
}

#[test]
fn seeds_keep_the_faults_they_had_before_partitions() {
    use Fault::*;
    // Each seed's faults as drawn before partitions existed.
    let before: [(u64, Vec<(u64, Fault)>); 4] = [
        (
            0x5eed0000,
            vec![
                (11605, RedisFreeze(3968)),
                (13813, RedisLoss),
                (25624, ClockJump(1, -495)),
                (30058, Restart(1, 2635)),
                (30353, RedisFailover(17)),
                (52493, RedisLoss),
            ],
        ),
        (
            0x5eed0001,
            vec![
                (22431, StoreOutage(5387)),
                (23512, StoreOutage(6879)),
                (33212, StoreOutage(3597)),
                (37700, StoreOutage(7165)),
                (42135, StoreOutage(7131)),
                (53686, Crash(0, 2592)),
            ],
        ),
        (
            0x5eed0002,
            vec![
                (17698, Crash(0, 2646)),
                (18951, StoreOutage(5310)),
                (21797, RedisDropReplies(2)),
                (24952, Restart(1, 138)),
                (31699, Restart(0, 1292)),
                (33075, Restart(1, 517)),
            ],
        ),
        (
            0x5eed0003,
            vec![
                (18984, RedisLoss),
                (25656, ClockJump(1, -104)),
                (35282, StoreOutage(4033)),
                (45142, RedisLoss),
                (48900, Crash(1, 1807)),
                (57245, RedisDropReplies(2)),
            ],
        ),
    ];
    for (seed, faults) in before {
        let scenario = Scenario::draw(seed, before_outages());
        assert_eq!(others(&scenario), faults, "seed {seed:#x}");
    }
    // Two of them now have partitions, in their place by instant.
    assert_eq!(
        partitions(&Scenario::draw(0x5eed0000, before_outages())),
        vec![(39405, Fault::Partition(2, Cut::Redis, 1108))]
    );
    assert_eq!(
        partitions(&Scenario::draw(0x5eed0003, before_outages())),
        vec![
            (633, Fault::Partition(1, Cut::Store, 240)),
            (30243, Fault::Partition(1, Cut::Both, 2638)),
        ]
    );
}

#[test]
fn partitions_cut_one_of_several_instances_on_redis_for_up_to_six_seconds() {
    let drawn: Vec<Scenario> = (0x5eed0000..0x5eed0000 + 200)
        .map(|seed| Scenario::draw(seed, before_outages()))
        .collect();
    let cut: Vec<&Scenario> = drawn.iter().filter(|s| !partitions(s).is_empty()).collect();
    assert!(
        cut.len() >= 20,
        "{} of 200 seeds have a partition",
        cut.len()
    );
    for scenario in &cut {
        assert!(scenario.engine == Engine::Redis && scenario.instances >= 2);
        for (at, fault) in partitions(scenario) {
            let Fault::Partition(instance, _, for_ms) = fault else {
                unreachable!()
            };
            assert!(instance < scenario.instances && (100..=6_000).contains(&for_ms));
            assert!(at < scenario.size.span_ms);
        }
    }
    for kind in [Cut::Redis, Cut::Store, Cut::Both] {
        assert!(
            cut.iter()
                .flat_map(|s| partitions(s))
                .any(|(_, f)| matches!(f, Fault::Partition(_, k, _) if k == kind)),
            "no partition from {}",
            kind.name()
        );
    }
    let no_faults = Size {
        faults: 0,
        ..Size::default()
    };
    assert!(
        cut.iter()
            .all(|s| Scenario::draw(s.seed, no_faults).faults.is_empty()),
        "a run without faults has no partition"
    );
}
