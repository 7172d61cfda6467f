//! Limits kept in this process: one keyed [`governor`] limiter per scope,
//! on the service's clock.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use stockade_core::Clock;

use super::{Limit, RateLimits, Scope};

/// How often (in checks) keys whose whole burst is back are dropped.
const SWEEP_EVERY: u64 = 4_096;

/// The service's [`Clock`] as a governor clock: time since the Unix epoch,
/// so a test's manual clock moves the limits too.
#[derive(Debug, Clone)]
struct ServiceClock(Arc<dyn Clock>);

impl GovernorClock for ServiceClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let micros = self.0.now().timestamp_micros().max(0) as u64;
        Duration::from_micros(micros)
    }
}

type Keyed = RateLimiter<String, DashMapStateStore<String>, ServiceClock, NoOpMiddleware<Duration>>;

/// The in-process limits.
pub(super) struct LocalLimits {
    buyer: Option<Keyed>,
    ip: Option<Keyed>,
    clock: ServiceClock,
    checks: AtomicU64,
}

fn keyed(limit: Option<Limit>, clock: &ServiceClock) -> Option<Keyed> {
    let limit = limit?;
    let burst = NonZeroU32::new(limit.burst).expect("a validated burst is at least 1");
    let quota = Quota::with_period(limit.interval())
        .expect("a validated rate has a non-zero interval")
        .allow_burst(burst);
    Some(RateLimiter::dashmap_with_clock(quota, clock.clone()))
}

impl LocalLimits {
    pub(super) fn new(limits: &RateLimits, clock: Arc<dyn Clock>) -> Self {
        let clock = ServiceClock(clock);
        Self {
            buyer: keyed(limits.buyer, &clock),
            ip: keyed(limits.ip, &clock),
            clock,
            checks: AtomicU64::new(0),
        }
    }

    /// None if the request conforms, else how long until it would.
    pub(super) fn check(&self, scope: Scope, key: &str) -> Option<Duration> {
        let limiter = match scope {
            Scope::Buyer => self.buyer.as_ref(),
            Scope::Ip => self.ip.as_ref(),
        }?;
        let verdict = limiter.check_key(&key.to_owned());
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            // A crowd of one-time buyers would otherwise grow the map forever.
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        verdict
            .err()
            .map(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}
