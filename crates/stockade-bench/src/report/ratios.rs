//! The ratios between strategies of one run that issue 9's targets are
//! stated in.

use serde::Serialize;

use super::{BenchReport, BenchResult};
use crate::strategy::StrategyKind;

/// The ratios issue 9's targets are stated in, between strategies of the
/// same run. Each is None unless both strategies ran, kept every invariant
/// and have the figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// `stockade-redis` requests/s over `redis-lua`'s (higher is better).
    pub stockade_redis_to_redis_lua_per_second: Option<f64>,
    /// `stockade-redis` Redis µs per purchase (`INFO commandstats`) over
    /// `redis-lua`'s (lower is better).
    pub stockade_redis_to_redis_lua_redis_us: Option<f64>,
    /// The same from `INFO cpu` (lower is better).
    pub stockade_redis_to_redis_lua_redis_cpu_us: Option<f64>,
    /// `stockade-redis` requests/s over `pg-for-update`'s (higher is
    /// better).
    pub stockade_redis_to_pg_for_update_per_second: Option<f64>,
}

impl Ratios {
    pub(super) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl BenchReport {
    /// The ratios between strategies that the targets use.
    pub fn ratios(&self) -> Ratios {
        use StrategyKind::{PgForUpdate, RedisLua, StockadeRedis};
        Ratios {
            stockade_redis_to_redis_lua_per_second: self.ratio(StockadeRedis, RedisLua),
            stockade_redis_to_redis_lua_redis_us: self
                .figure_ratio(StockadeRedis, RedisLua, |r| r.redis_us_per_purchase),
            stockade_redis_to_redis_lua_redis_cpu_us: self.figure_ratio(
                StockadeRedis,
                RedisLua,
                |r| r.redis_cpu_us_per_purchase,
            ),
            stockade_redis_to_pg_for_update_per_second: self.ratio(StockadeRedis, PgForUpdate),
        }
    }

    /// `figure` of `top` over `figure` of `bottom`, if both ran, kept the
    /// invariants and have it.
    fn figure_ratio(
        &self,
        top: StrategyKind,
        bottom: StrategyKind,
        figure: impl Fn(&BenchResult) -> Option<f64>,
    ) -> Option<f64> {
        let (top, bottom) = (self.find(top)?, self.find(bottom)?);
        if !(top.ok && bottom.ok) {
            return None;
        }
        let (top, bottom) = (figure(top)?, figure(bottom)?);
        (bottom > 0.0).then(|| top / bottom)
    }

    /// How many times faster `fast` was than `slow` (requests per second),
    /// if both ran and kept the invariants.
    pub fn ratio(&self, fast: StrategyKind, slow: StrategyKind) -> Option<f64> {
        let (fast, slow) = (self.find(fast)?, self.find(slow)?);
        (fast.ok && slow.ok && slow.per_second > 0.0).then(|| fast.per_second / slow.per_second)
    }
}
