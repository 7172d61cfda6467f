//! Partitions of one instance: it alone loses its network to the data
//! tier (Redis, the store or both) for a while, while the load balancer
//! still sends it the crowd.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Engine, Fault, Size};

/// What a partition cuts an instance from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Redis: its connections read and answer nothing, new ones included.
    Redis,
    /// The store: its calls wait.
    Store,
    /// Both.
    Both,
}

impl Cut {
    /// Whether it cuts Redis.
    pub fn redis(self) -> bool {
        matches!(self, Cut::Redis | Cut::Both)
    }

    /// Whether it cuts the store.
    pub fn store(self) -> bool {
        matches!(self, Cut::Store | Cut::Both)
    }

    /// What it cuts, for the event log.
    pub fn name(self) -> &'static str {
        match self {
            Cut::Redis => "Redis",
            Cut::Store => "the store",
            Cut::Both => "Redis and the store",
        }
    }
}

/// Half the seeds with several instances on Redis cut one of them (from
/// Redis, the store or both) once or twice, as many as the size's faults
/// allow: one instance alone loses the data tier while the crowd still
/// reaches it. Not with one instance: cutting the only one is no more
/// than a freeze or an outage.
pub(crate) fn draw_partitions(
    rng: &mut ChaCha8Rng,
    engine: Engine,
    instances: usize,
    size: Size,
) -> Vec<(u64, Fault)> {
    if engine != Engine::Redis || instances < 2 || !rng.random_bool(0.5) {
        return Vec::new();
    }
    let count = rng.random_range(1..=2);
    (0..count)
        .map(|_| {
            let at = rng.random_range(0..size.span_ms.max(1));
            let instance = rng.random_range(0..instances);
            let cut = [Cut::Redis, Cut::Store, Cut::Both][rng.random_range(0..3)];
            (
                at,
                Fault::Partition(instance, cut, rng.random_range(100..=6_000)),
            )
        })
        .take(size.faults)
        .collect()
}
