//! Limits kept in Redis and shared by every instance on it: each check is
//! one call of `gcra.lua`, which reads and moves the key's theoretical
//! arrival time atomically.
//!
//! A rate limit is a side path: a request never waits on a sick Redis
//! longer than [`REDIS_TIMEOUT`]. When Redis does not answer in time (or
//! fails), the check is decided by [`LocalShare`]: this instance's share of
//! each limit, kept in this process. It stays local (without asking Redis)
//! until a probe, one request every [`PROBE_EVERY`], finds Redis answering
//! again. Every local decision is counted in
//! `stockade_rate_limit_fallbacks_total`, and each outage is logged once
//! when it starts and once when it ends: never silently open.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use stockade_core::Clock;
use stockade_engine::redis::{Library, LibraryScript, SharedConnection};

use super::local::LocalLimits;
use super::{Limit, RateLimits, Scope};

/// The limiter's one script, as a library of its own
/// (`stockade_rate_limit`, run as a Function or with EVALSHA as the
/// connection chose).
static LIBRARY: LazyLock<Library> =
    LazyLock::new(|| Library::new("stockade_rate_limit", &[("gcra", include_str!("gcra.lua"))]));
static GCRA: LazyLock<LibraryScript> = LazyLock::new(|| LIBRARY.script("gcra"));

/// How long a check waits for Redis before this instance decides alone: a
/// GCRA call takes well under a millisecond on a healthy Redis.
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(50);

/// While Redis is not answering, one request this often asks it again.
pub const PROBE_EVERY: Duration = Duration::from_millis(200);

/// The Redis limits, with this instance's share to fall back on.
pub(super) struct SharedLimits {
    connection: SharedConnection,
    /// `{--redis-key-prefix}:limit:`.
    prefix: String,
    clock: Arc<dyn Clock>,
    /// The whole limits, to take a share of.
    limits: RateLimits,
    /// How many instances share them, and this instance's share.
    instances: AtomicU32,
    local: parking_lot::RwLock<LocalLimits>,
    outage: Outage,
}

fn share(limits: &RateLimits, instances: u32) -> RateLimits {
    RateLimits {
        buyer: limits.buyer.map(|l| l.share(instances)),
        ip: limits.ip.map(|l| l.share(instances)),
        ..limits.clone()
    }
}

/// Whether Redis is failing the limiter, since when, and the last probe.
struct Outage {
    /// The time base of the millisecond stamps below.
    base: Instant,
    down: AtomicBool,
    /// Milliseconds after `base` of the last probe.
    last_probe_ms: AtomicU64,
    /// Checks decided locally during the current outage.
    local_checks: AtomicU64,
}

impl SharedLimits {
    /// Limits on the engine's own connection (standalone, Sentinel or
    /// Cluster alike: each check touches one key); `limits` gives the
    /// local share until the store counts the live instances (see
    /// [`SharedLimits::set_instances`]).
    pub(super) fn new(
        limits: &RateLimits,
        connection: SharedConnection,
        prefix: String,
        clock: Arc<dyn Clock>,
    ) -> Self {
        metrics::gauge!("stockade_rate_limit_instances").set(f64::from(limits.instances));
        Self {
            connection,
            prefix,
            local: parking_lot::RwLock::new(LocalLimits::new(
                &share(limits, limits.instances),
                Arc::clone(&clock),
            )),
            instances: AtomicU32::new(limits.instances),
            limits: limits.clone(),
            clock,
            outage: Outage {
                base: Instant::now(),
                down: AtomicBool::new(false),
                last_probe_ms: AtomicU64::new(0),
                local_checks: AtomicU64::new(0),
            },
        }
    }

    /// None if the request conforms, else how long until it would: Redis's
    /// answer within [`REDIS_TIMEOUT`], else this instance's share's.
    pub(super) async fn check(&self, scope: Scope, limit: Limit, key: &str) -> Option<Duration> {
        if self.outage.down.load(Ordering::Acquire) && !self.probe_due() {
            return self.decide_locally(scope, key);
        }
        match tokio::time::timeout(REDIS_TIMEOUT, self.ask_redis(scope, limit, key)).await {
            Ok(Ok(verdict)) => {
                if self.outage.down.swap(false, Ordering::AcqRel) {
                    let local = self.outage.local_checks.swap(0, Ordering::Relaxed);
                    tracing::info!(
                        local_checks = local,
                        "Redis answers the rate limiter again: the shared limits apply"
                    );
                }
                verdict
            }
            Ok(Err(error)) => self.fall_back(scope, key, &error.to_string()),
            Err(_) => self.fall_back(scope, key, "no answer within the timeout"),
        }
    }

    async fn ask_redis(
        &self,
        scope: Scope,
        limit: Limit,
        key: &str,
    ) -> Result<Option<Duration>, redis::RedisError> {
        let now = self.clock.now().timestamp_micros();
        let interval = limit.interval().as_micros() as i64;
        let mut connection = self.connection.clone();
        let (conforms, wait): (i64, i64) = GCRA
            .key(format!("{}{}:{key}", self.prefix, scope.name()))
            .arg(now)
            .arg(interval.max(1))
            .arg(limit.burst)
            .invoke_async(&mut connection)
            .await?;
        Ok((conforms != 1).then(|| Duration::from_micros(wait.max(0) as u64)))
    }

    /// Whether this request is the one that asks Redis again (at most one
    /// every [`PROBE_EVERY`]).
    fn probe_due(&self) -> bool {
        let now = self.outage.base.elapsed().as_millis() as u64;
        let last = self.outage.last_probe_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= PROBE_EVERY.as_millis() as u64
            && self
                .outage
                .last_probe_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Redis failed this check: the outage starts (logged once), and this
    /// instance's share decides.
    fn fall_back(&self, scope: Scope, key: &str, why: &str) -> Option<Duration> {
        let now = self.outage.base.elapsed().as_millis() as u64;
        self.outage.last_probe_ms.store(now, Ordering::Relaxed);
        if !self.outage.down.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                error = why,
                timeout_ms = REDIS_TIMEOUT.as_millis() as u64,
                "Redis does not answer the rate limiter: limiting with this instance's share of each limit until it does"
            );
        }
        self.decide_locally(scope, key)
    }

    fn decide_locally(&self, scope: Scope, key: &str) -> Option<Duration> {
        self.outage.local_checks.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("stockade_rate_limit_fallbacks_total").increment(1);
        self.local.read().check(scope, key)
    }

    /// How many instances share the limits now.
    pub(super) fn instances(&self) -> u32 {
        self.instances.load(Ordering::Acquire)
    }

    /// `instances` share the limits now (as the store counts the live
    /// ones; never fewer than `--rate-limit-instances`): a change gives
    /// this instance a new share, which starts with its whole burst.
    pub(super) fn set_instances(&self, instances: u32) {
        let instances = instances.max(self.limits.instances).max(1);
        if self.instances.swap(instances, Ordering::AcqRel) == instances {
            return;
        }
        metrics::gauge!("stockade_rate_limit_instances").set(f64::from(instances));
        *self.local.write() =
            LocalLimits::new(&share(&self.limits, instances), Arc::clone(&self.clock));
    }
}
