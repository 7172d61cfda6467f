//! What a benchmark run sends: a named scenario, optionally adjusted with
//! `--buyers`, `--stock`, `--concurrency`, `--duration`, `--taps` and
//! `--skus`, validated into a [`Workload`].
//!
//! A workload is either a **burst** (a fixed crowd of buyers, all sent at
//! once unless `--concurrency` limits how many are in flight) or **timed**
//! (new buyers keep arriving, `concurrency` at a time, until the duration
//! is up). The seeds' scenarios are bursts with distinct buyers, exactly as
//! the founding article ran them.
//!
//! - `workload`: the adjustments and the validated [`Workload`].
//! - [`skus`]: a sale split over several SKUs, and which one a buyer asks
//!   for.

pub mod skus;
mod workload;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use workload::{Arrival, Overrides, Workload, WorkloadError};

/// The largest stock a sale may have (the engines' limit).
pub const MAX_STOCK: u32 = 1_000_000_000;
/// The largest crowd of a burst: every buyer's answers are kept in memory.
pub const MAX_BUYERS: usize = 10_000_000;
/// The longest timed run.
pub const MAX_DURATION: Duration = Duration::from_secs(3_600);
/// The most requests one buyer may send (`--taps`).
pub const MAX_TAPS: usize = 10;
/// In-flight requests of a burst when `--concurrency` is not given: all of
/// them, up to this many.
pub const DEFAULT_BURST_CONCURRENCY_CAP: usize = 10_000;
/// In-flight requests of a timed run when `--concurrency` is not given (the
/// engine criterion benchmark uses the same).
pub const DEFAULT_TIMED_CONCURRENCY: usize = 64;
/// Length of a timed run when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// The named scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The founding article's first test: 100 buyers at once for 100 items.
    Seed100,
    /// The article's over-demand test: 150 buyers at once for 100 items.
    Seed150,
    /// A real crowd: 10,000 buyers at once for 1,000 items.
    Crowd,
    /// Stock that never runs out, buyers arriving for a fixed time: the
    /// throughput and latency a strategy sustains, second by second.
    Sustained,
    /// 1,000 impatient buyers who each tap "buy" twice at once, for 1,000
    /// items: every buyer should get exactly one.
    DoubleTap,
}

impl Scenario {
    /// Every named scenario.
    pub const ALL: [Scenario; 5] = [
        Self::Seed100,
        Self::Seed150,
        Self::Crowd,
        Self::Sustained,
        Self::DoubleTap,
    ];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Seed100 => "seed-100",
            Self::Seed150 => "seed-150",
            Self::Crowd => "crowd",
            Self::Sustained => "sustained",
            Self::DoubleTap => "double-tap",
        }
    }

    fn preset(self) -> Preset {
        let burst = |buyers, stock| Preset {
            buyers: Some(buyers),
            stock,
            taps: 1,
            duration: None,
        };
        match self {
            Self::Seed100 => burst(100, 100),
            Self::Seed150 => burst(150, 100),
            Self::Crowd => burst(10_000, 1_000),
            Self::DoubleTap => Preset {
                taps: 2,
                ..burst(1_000, 1_000)
            },
            Self::Sustained => Preset {
                buyers: None,
                stock: MAX_STOCK,
                taps: 1,
                duration: Some(DEFAULT_DURATION),
            },
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scenario| scenario.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|s| s.as_str()).collect();
                format!("unknown scenario {s:?}: choose one of {}", names.join(", "))
            })
    }
}

struct Preset {
    buyers: Option<usize>,
    stock: u32,
    taps: usize,
    duration: Option<Duration>,
}

/// Parses a duration for `--duration`: `10` or `10s` (seconds), `500ms`,
/// `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: write 10s, 500ms or 2m"))?;
    let seconds = match unit {
        "s" => value,
        "ms" => value / 1e3,
        "m" => value * 60.0,
        _ => return Err(format!("{text:?}: the unit must be ms, s or m")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is not a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3h").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
