//! Per-buyer and per-client rate limits, the instances that share them,
//! and the proxies trusted to name the client.

use super::group::settings_group;
use super::{ConfigError, Sources, invalid};
use crate::rate_limit::{Limit, RateLimits, TrustedProxies};

settings_group! {
    /// Rate limits.
    #[command(next_help_heading = "Rate limits")]
    pub struct RateLimitSettings {
        /// Requests per buyer, e.g. 5/s, 60/m, 1000/h; over it 429
        /// rate_limited. Shared by every instance through Redis with
        /// --engine redis. Default: no limit.
        #[arg(long, env = "STOCKADE_RATE_LIMIT_BUYER", value_name = "RATE")]
        pub rate_limit_buyer: Option<String>,
        /// A buyer's requests accepted at once after a quiet spell.
        /// Default: the rate's count.
        #[arg(long, env = "STOCKADE_RATE_LIMIT_BUYER_BURST", value_name = "N")]
        pub rate_limit_buyer_burst: Option<u64>,
        /// Requests per client address (an IPv6 client by its /64), e.g.
        /// 50/s. The admin token is never limited. Default: no limit.
        #[arg(long, env = "STOCKADE_RATE_LIMIT_IP", value_name = "RATE")]
        pub rate_limit_ip: Option<String>,
        /// A client's requests accepted at once. Default: the rate's count.
        #[arg(long, env = "STOCKADE_RATE_LIMIT_IP_BURST", value_name = "N")]
        pub rate_limit_ip_burst: Option<u64>,
        /// The fewest instances taken to share the rate limits in Redis (1
        /// to 1000); above it, the live instances the store counts (each
        /// reports once a second): while Redis does not answer a limit check
        /// within 50 ms, each instance enforces 1/N of every limit alone.
        /// Leave it at 1 unless instances start far apart.
        #[arg(long, env = "STOCKADE_RATE_LIMIT_INSTANCES", value_name = "N", default_value = "1")]
        pub rate_limit_instances: Option<u64>,
        /// Proxies whose X-Forwarded-For names the client: comma-separated
        /// addresses and CIDR ranges, e.g. 10.0.0.0/8,192.168.1.7.
        /// Default: none, the header is ignored.
        #[arg(long, env = "STOCKADE_TRUSTED_PROXIES", value_name = "LIST")]
        pub trusted_proxies: Option<String>,
    }
}

impl RateLimitSettings {
    /// Each limit from its rate and burst (a burst needs a rate), the
    /// trusted proxies, the instances sharing the limits.
    pub(super) fn resolve(&self, sources: &Sources) -> Result<RateLimits, ConfigError> {
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        let limit = |rate: Option<&str>,
                     burst: Option<u64>,
                     setting: &str,
                     burst_setting: &str|
         -> Result<Option<Limit>, ConfigError> {
            match rate.map(str::trim).filter(|r| !r.is_empty()) {
                None if burst.is_some() => Err(bad(
                    burst_setting,
                    format!("needs a rate: set {} too (e.g. 5/s)", sources.name(setting)),
                )),
                None => Ok(None),
                Some(rate) => Limit::parse(rate, burst)
                    .map(Some)
                    .map_err(|reason| bad(setting, reason.to_string())),
            }
        };
        let buyer = limit(
            self.rate_limit_buyer.as_deref(),
            self.rate_limit_buyer_burst,
            "rate_limit_buyer",
            "rate_limit_buyer_burst",
        )?;
        let ip = limit(
            self.rate_limit_ip.as_deref(),
            self.rate_limit_ip_burst,
            "rate_limit_ip",
            "rate_limit_ip_burst",
        )?;
        let trusted_proxies = TrustedProxies::parse(self.trusted_proxies.as_deref().unwrap_or(""))
            .map_err(|reason| bad("trusted_proxies", reason.to_string()))?;
        let instances = self.rate_limit_instances.unwrap_or_default();
        if !(1..=1_000).contains(&instances) {
            return Err(bad(
                "rate_limit_instances",
                format!("must be between 1 and 1000 (it is {instances})"),
            ));
        }
        Ok(RateLimits {
            buyer,
            ip,
            trusted_proxies,
            instances: instances as u32,
        })
    }
}
