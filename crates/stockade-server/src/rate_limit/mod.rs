//! Rate limits at the front door: per client IP and per buyer, each a GCRA
//! (generic cell rate algorithm) with a burst.
//!
//! A request over a limit is answered 429 `rate_limited` with
//! `Retry-After` and the IETF draft's `RateLimit-Policy` and `RateLimit`
//! headers before any engine or store work. On the embedded default the
//! limits live in this process ([`governor`]); with the Redis engine they
//! live in Redis, one atomic script call per check (`gcra.lua`), so every
//! instance on that Redis shares them. A check waits at most 50 ms for
//! Redis; then this instance's share of the limit decides, until Redis
//! answers again (see `shared`).
//!
//! # Layout
//! - [`policy`]: a limit's rate and burst, parsed from settings, and the
//!   answer to a request over it.
//! - [`client_ip`]: who the client is, believing `X-Forwarded-For` only
//!   from trusted proxies.
//! - `local` and `shared`: the in-process and the Redis backends.

pub mod client_ip;
mod local;
pub mod policy;
mod shared;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use stockade_core::{Clock, UserId};

pub use client_ip::TrustedProxies;
pub use policy::{Limit, Limited};

/// The limits of one service, as configured.
#[derive(Debug, Clone)]
pub struct RateLimits {
    /// Requests per buyer (None: unlimited).
    pub buyer: Option<Limit>,
    /// Requests per client IP (None: unlimited).
    pub ip: Option<Limit>,
    /// The proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// The fewest instances taken to share the limits in Redis (at least
    /// 1); the live ones the store counts decide above it
    /// ([`RateLimiter::set_instances`]): while Redis does not answer, each
    /// enforces `1/instances` of every limit by itself.
    pub instances: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            buyer: None,
            ip: None,
            trusted_proxies: TrustedProxies::default(),
            instances: 1,
        }
    }
}

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One buyer (the JWT's `sub`, or the body's `user_id` when identity
    /// is off).
    Buyer,
    /// One client address (an IPv6 client by its /64).
    Ip,
}

impl Scope {
    /// The policy name in the `RateLimit-Policy` header.
    pub fn name(self) -> &'static str {
        match self {
            Self::Buyer => "buyer",
            Self::Ip => "ip",
        }
    }
}

/// Where the limits' state lives.
enum Backend {
    /// In this process.
    Local(local::LocalLimits),
    /// In Redis, shared by every instance.
    Shared(Box<shared::SharedLimits>),
}

/// The service's rate limiter. Cheap to clone.
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    limits: RateLimits,
    backend: Backend,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limits", &self.inner.limits)
            .field(
                "backend",
                &match self.inner.backend {
                    Backend::Local(_) => "local",
                    Backend::Shared(_) => "redis",
                },
            )
            .finish()
    }
}

impl RateLimiter {
    /// Limits kept in this process, on `clock`.
    pub fn local(limits: RateLimits, clock: Arc<dyn Clock>) -> Self {
        let backend = Backend::Local(local::LocalLimits::new(&limits, clock));
        Self {
            inner: Arc::new(Inner { limits, backend }),
        }
    }

    /// Limits kept in the Redis on the other end of `connection` (the
    /// engine's), shared by every instance using it, with this instance's
    /// share of them to fall back on; keys start with `prefix` (see
    /// [`crate::config::RedisKeyPrefix::rate_limits`]); the time is
    /// `clock`'s (keep instances' clocks in sync).
    pub fn shared(
        limits: RateLimits,
        connection: stockade_engine::redis::SharedConnection,
        prefix: String,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let backend = Backend::Shared(Box::new(shared::SharedLimits::new(
            &limits, connection, prefix, clock,
        )));
        Self {
            inner: Arc::new(Inner { limits, backend }),
        }
    }

    /// No limits at all.
    pub fn unlimited(clock: Arc<dyn Clock>) -> Self {
        Self::local(RateLimits::default(), clock)
    }

    /// The configured limits.
    pub fn limits(&self) -> &RateLimits {
        &self.inner.limits
    }

    /// Whether a per-IP limit is set.
    pub fn limits_ips(&self) -> bool {
        self.inner.limits.ip.is_some()
    }

    /// `instances` share the limits (the live instances the store counts):
    /// sets this instance's share for when Redis does not answer. Nothing
    /// for limits kept in this process alone.
    pub fn set_instances(&self, instances: u32) {
        if let Backend::Shared(shared) = &self.inner.backend {
            shared.set_instances(instances);
        }
    }

    /// How many instances this one takes to share the limits now.
    pub fn instances(&self) -> u32 {
        match &self.inner.backend {
            Backend::Shared(shared) => shared.instances(),
            Backend::Local(_) => self.inner.limits.instances,
        }
    }

    /// Counts one request of `buyer`; Err when the buyer is over the limit.
    pub async fn check_buyer(&self, buyer: &UserId) -> Result<(), Limited> {
        match self.inner.limits.buyer {
            Some(limit) => self.check(Scope::Buyer, limit, buyer.as_str()).await,
            None => Ok(()),
        }
    }

    /// Counts one request from `ip`; Err when that client is over the limit.
    pub async fn check_ip(&self, ip: IpAddr) -> Result<(), Limited> {
        match self.inner.limits.ip {
            Some(limit) => {
                let key = client_ip::limit_key(ip);
                self.check(Scope::Ip, limit, &key).await
            }
            None => Ok(()),
        }
    }

    async fn check(&self, scope: Scope, limit: Limit, key: &str) -> Result<(), Limited> {
        let wait: Option<Duration> = match &self.inner.backend {
            Backend::Local(local) => local.check(scope, key),
            Backend::Shared(shared) => shared.check(scope, limit, key).await,
        };
        match wait {
            None => Ok(()),
            Some(wait) => {
                metrics::counter!("stockade_rate_limited_total", "scope" => scope.name())
                    .increment(1);
                Err(Limited { scope, limit, wait })
            }
        }
    }
}
