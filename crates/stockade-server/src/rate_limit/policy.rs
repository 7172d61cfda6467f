//! A limit's rate and burst, and the answer to a request over it.

use std::time::Duration;

use super::Scope;

/// A GCRA limit: a sustained rate of `count` requests per `period`, with
/// up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Requests per period.
    pub count: u32,
    /// The period.
    pub period: Duration,
    /// Requests accepted at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl Limit {
    /// Parses a rate like `10/s`, `600/m` or `5000/h`; `burst` defaults to
    /// the count.
    pub fn parse(rate: &str, burst: Option<u64>) -> Result<Self, String> {
        let (count, unit) = rate
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{rate:?} is not a rate like 10/s, 600/m or 5000/h"))?;
        let count: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|n| *n >= 1 && *n <= 1_000_000)
            .ok_or_else(|| {
                format!("{rate:?}: the count must be a whole number from 1 to 1000000")
            })?;
        let period = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => {
                return Err(format!(
                    "{rate:?}: the unit {other:?} is not one of s, m, h (e.g. 10/s)"
                ));
            }
        };
        let burst = match burst {
            None => count,
            Some(b) if (1..=1_000_000).contains(&b) => b as u32,
            Some(b) => return Err(format!("the burst must be from 1 to 1000000 (it is {b})")),
        };
        Ok(Self {
            count,
            period,
            burst,
        })
    }

    /// The time one request uses up: `period / count`.
    pub fn interval(&self) -> Duration {
        self.period / self.count
    }

    /// The time a full burst takes to come back.
    pub fn window(&self) -> Duration {
        self.interval() * self.burst
    }

    /// One of `instances` equal shares of this limit (the rate divided,
    /// the burst too, rounded up to at least 1): what one instance enforces
    /// alone while the shared limits cannot be asked.
    pub fn share(&self, instances: u32) -> Self {
        let instances = instances.max(1);
        Self {
            count: self.count,
            period: self.period * instances,
            burst: self.burst.div_ceil(instances).max(1),
        }
    }
}

/// A request over a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// Which limit.
    pub scope: Scope,
    /// The limit.
    pub limit: Limit,
    /// How long until one more request would be accepted.
    pub wait: Duration,
}

impl Limited {
    /// `Retry-After`: whole seconds, rounded up, at least 1.
    pub fn retry_after_seconds(&self) -> u64 {
        ceil_seconds(self.wait).max(1)
    }

    /// The `RateLimit-Policy` header of the IETF draft: the policy's name,
    /// its quota (the burst) and window in seconds.
    pub fn policy_header(&self) -> String {
        format!(
            "\"{}\";q={};w={}",
            self.scope.name(),
            self.limit.burst,
            ceil_seconds(self.limit.window()).max(1)
        )
    }

    /// The `RateLimit` header of the IETF draft: nothing remains, and the
    /// whole quota is back after `t` seconds (the wait for the next
    /// request plus the rest of the burst).
    pub fn header(&self) -> String {
        let full = self.wait + self.limit.interval() * (self.limit.burst - 1);
        format!("\"{}\";r=0;t={}", self.scope.name(), ceil_seconds(full))
    }
}

fn ceil_seconds(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_units_and_a_default_burst() {
        let limit = Limit::parse("10/s", None).unwrap();
        assert_eq!(limit.interval(), Duration::from_millis(100));
        assert_eq!(limit.burst, 10);
        let limit = Limit::parse(" 30/m ", Some(5)).unwrap();
        assert_eq!(limit.interval(), Duration::from_secs(2));
        assert_eq!(limit.window(), Duration::from_secs(10));
        for bad in ["10", "0/s", "ten/s", "10/d", "-1/s", "10/"] {
            assert!(Limit::parse(bad, None).is_err(), "{bad}");
        }
        assert!(Limit::parse("1/s", Some(0)).is_err());
    }

    #[test]
    fn a_share_divides_the_rate_and_the_burst() {
        let limit = Limit::parse("6/m", Some(5)).unwrap();
        let half = limit.share(2);
        assert_eq!(half.interval(), Duration::from_secs(20));
        assert_eq!(half.burst, 3);
        assert_eq!(limit.share(100).burst, 1);
        assert_eq!(limit.share(0), limit.share(1));
        assert_eq!(limit.share(1), limit);
    }

    #[test]
    fn headers_follow_the_draft() {
        let limited = Limited {
            scope: Scope::Buyer,
            limit: Limit::parse("2/s", Some(4)).unwrap(),
            wait: Duration::from_millis(300),
        };
        assert_eq!(limited.retry_after_seconds(), 1);
        assert_eq!(limited.policy_header(), "\"buyer\";q=4;w=2");
        // 0.3 s for the next one, then 3 more intervals of 0.5 s.
        assert_eq!(limited.header(), "\"buyer\";r=0;t=2");
    }
}
