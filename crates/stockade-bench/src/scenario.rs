//! What a benchmark run sends: a named scenario, optionally adjusted with
//! `--buyers`, `--stock`, `--concurrency`, `--duration` and `--taps`,
//! validated into a [`Workload`].
//!
//! A workload is either a **burst** (a fixed crowd of buyers, all sent at
//! once unless `--concurrency` limits how many are in flight) or **timed**
//! (new buyers keep arriving, `concurrency` at a time, until the duration
//! is up). The seeds' scenarios are bursts with distinct buyers, exactly as
//! the founding article ran them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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

/// Adjustments from the command line; `None` keeps the scenario's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--buyers`: the size of a burst.
    pub buyers: Option<usize>,
    /// `--stock`: items on sale.
    pub stock: Option<u32>,
    /// `--concurrency`: requests in flight at once.
    pub concurrency: Option<usize>,
    /// `--duration`: makes the run timed.
    pub duration: Option<Duration>,
    /// `--taps`: requests each buyer sends at once.
    pub taps: Option<usize>,
}

/// A bad combination of scenario and adjustments; the message says what to
/// change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WorkloadError(pub String);

/// How the crowd arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A fixed number of buyers.
    Burst {
        /// Distinct buyers.
        buyers: usize,
    },
    /// New buyers until the time is up.
    Timed {
        /// How long to keep sending.
        duration: Duration,
    },
}

/// A validated workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// The scenario's name for reports (`custom` when none was named).
    pub scenario: String,
    /// How buyers arrive.
    pub arrival: Arrival,
    /// Items on sale.
    pub stock: u32,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests each buyer sends at once (1 unless double taps are wanted).
    pub taps: usize,
}

impl Workload {
    /// The scenario `scenario` (or a custom one when `None`), adjusted by
    /// `overrides`, checked.
    pub fn new(scenario: Option<Scenario>, overrides: &Overrides) -> Result<Self, WorkloadError> {
        let invalid = |message: String| Err(WorkloadError(message));
        let (name, preset) = match scenario {
            Some(scenario) => (scenario.as_str().to_owned(), scenario.preset()),
            None => {
                if overrides.buyers.is_none() && overrides.duration.is_none() {
                    return invalid(
                        "name a --scenario (seed-100, seed-150, crowd, sustained, double-tap), \
                         or give --buyers (a burst) or --duration (a timed run)"
                            .into(),
                    );
                }
                let stock = overrides.stock.ok_or_else(|| {
                    WorkloadError("a custom run needs --stock (items on sale)".into())
                })?;
                (
                    "custom".to_owned(),
                    Preset {
                        buyers: None,
                        stock,
                        taps: 1,
                        duration: None,
                    },
                )
            }
        };
        if overrides.buyers.is_some() && overrides.duration.is_some() {
            return invalid(
                "--buyers and --duration exclude each other: a burst sends a fixed crowd, \
                 a timed run sends new buyers until the time is up"
                    .into(),
            );
        }
        let timed_preset = preset.duration.is_some();
        if timed_preset && overrides.buyers.is_some() {
            return invalid(format!(
                "the {name} scenario is timed: use --duration, not --buyers"
            ));
        }
        if let Some(buyers) = overrides.buyers {
            if buyers == 0 {
                return invalid("--buyers must be at least 1".into());
            }
            if buyers > MAX_BUYERS {
                return invalid(format!("--buyers must be at most {MAX_BUYERS}"));
            }
        }
        let stock = overrides.stock.unwrap_or(preset.stock);
        if stock == 0 || stock > MAX_STOCK {
            return invalid(format!(
                "--stock must be between 1 and {MAX_STOCK}, not {stock}"
            ));
        }
        let taps = overrides.taps.unwrap_or(preset.taps);
        if taps == 0 || taps > MAX_TAPS {
            return invalid(format!(
                "--taps must be between 1 and {MAX_TAPS}, not {taps}"
            ));
        }
        // --duration turns any scenario into a timed run; --buyers was
        // refused above for timed ones.
        let arrival = match overrides.duration.or(preset.duration) {
            Some(duration) => {
                if duration.is_zero() || duration > MAX_DURATION {
                    return invalid(format!(
                        "--duration must be more than 0 s and at most {} s",
                        MAX_DURATION.as_secs()
                    ));
                }
                Arrival::Timed { duration }
            }
            None => Arrival::Burst {
                buyers: overrides
                    .buyers
                    .or(preset.buyers)
                    .expect("a burst preset names its buyers, a custom burst has --buyers"),
            },
        };
        let concurrency = match overrides.concurrency {
            Some(0) => return invalid("--concurrency must be at least 1".into()),
            Some(concurrency) => concurrency,
            None => match arrival {
                Arrival::Burst { buyers } => (buyers * taps).min(DEFAULT_BURST_CONCURRENCY_CAP),
                Arrival::Timed { .. } => DEFAULT_TIMED_CONCURRENCY,
            },
        };
        let concurrency = match arrival {
            Arrival::Burst { buyers } => concurrency.min(buyers * taps),
            Arrival::Timed { .. } => concurrency,
        };
        Ok(Self {
            scenario: name,
            arrival,
            stock,
            concurrency,
            taps,
        })
    }

    /// The number of requests of a burst (None for a timed run).
    pub fn requests(&self) -> Option<usize> {
        match self.arrival {
            Arrival::Burst { buyers } => Some(buyers * self.taps),
            Arrival::Timed { .. } => None,
        }
    }

    /// The buyer who sends request number `request`. A buyer's taps are
    /// consecutive requests, so they are in flight together.
    pub fn buyer_of(&self, request: usize) -> usize {
        request / self.taps
    }

    /// One line for the user: what is about to run.
    pub fn describe(&self) -> String {
        let taps = if self.taps > 1 {
            format!(", {} taps each", self.taps)
        } else {
            String::new()
        };
        match self.arrival {
            Arrival::Burst { buyers } => format!(
                "{}: {buyers} buyers{taps} for {} items, {} in flight",
                self.scenario, self.stock, self.concurrency
            ),
            Arrival::Timed { duration } => format!(
                "{}: new buyers{taps} for {:.1} s, {} in flight, {} items",
                self.scenario,
                duration.as_secs_f64(),
                self.concurrency,
                self.stock
            ),
        }
    }
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

    fn build(scenario: Option<&str>, overrides: Overrides) -> Result<Workload, WorkloadError> {
        Workload::new(scenario.map(|s| s.parse().unwrap()), &overrides)
    }

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

    #[test]
    fn the_seeds_are_the_articles_tests() {
        let seed = build(Some("seed-100"), Overrides::default()).unwrap();
        assert_eq!(seed.arrival, Arrival::Burst { buyers: 100 });
        assert_eq!((seed.stock, seed.concurrency, seed.taps), (100, 100, 1));
        let over = build(Some("seed-150"), Overrides::default()).unwrap();
        assert_eq!(over.arrival, Arrival::Burst { buyers: 150 });
        assert_eq!(over.stock, 100);
        let crowd = build(Some("crowd"), Overrides::default()).unwrap();
        assert_eq!(crowd.requests(), Some(10_000));
        assert_eq!(crowd.stock, 1_000);
    }

    #[test]
    fn sustained_is_timed_and_never_sells_out() {
        let sustained = build(Some("sustained"), Overrides::default()).unwrap();
        assert_eq!(
            sustained.arrival,
            Arrival::Timed {
                duration: DEFAULT_DURATION
            }
        );
        assert_eq!(sustained.stock, MAX_STOCK);
        assert_eq!(sustained.concurrency, DEFAULT_TIMED_CONCURRENCY);
        assert_eq!(sustained.requests(), None);
    }

    #[test]
    fn double_taps_are_consecutive_requests_of_one_buyer() {
        let taps = build(Some("double-tap"), Overrides::default()).unwrap();
        assert_eq!(taps.requests(), Some(2_000));
        assert_eq!(taps.buyer_of(0), 0);
        assert_eq!(taps.buyer_of(1), 0);
        assert_eq!(taps.buyer_of(2), 1);
    }

    #[test]
    fn overrides_adjust_a_scenario() {
        let seed = build(
            Some("seed-100"),
            Overrides {
                concurrency: Some(32),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(seed.concurrency, 32);
        assert_eq!(seed.scenario, "seed-100");
        let custom = build(
            None,
            Overrides {
                buyers: Some(500),
                stock: Some(50),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(custom.scenario, "custom");
        assert_eq!(custom.arrival, Arrival::Burst { buyers: 500 });
        let timed = build(
            None,
            Overrides {
                duration: Some(Duration::from_secs(3)),
                stock: Some(10),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(
            timed.arrival,
            Arrival::Timed {
                duration: Duration::from_secs(3)
            }
        );
        // Concurrency above the crowd is capped at the crowd.
        let small = build(
            Some("seed-100"),
            Overrides {
                concurrency: Some(1_000),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(small.concurrency, 100);
    }

    #[test]
    fn bad_input_is_refused_with_what_to_change() {
        let refused = |scenario: Option<&str>, overrides: Overrides, needle: &str| {
            let error = build(scenario, overrides).unwrap_err();
            assert!(error.0.contains(needle), "{error} should mention {needle}");
        };
        refused(
            Some("crowd"),
            Overrides {
                buyers: Some(0),
                ..Overrides::default()
            },
            "--buyers",
        );
        refused(
            Some("crowd"),
            Overrides {
                stock: Some(0),
                ..Overrides::default()
            },
            "--stock",
        );
        refused(
            Some("crowd"),
            Overrides {
                concurrency: Some(0),
                ..Overrides::default()
            },
            "--concurrency",
        );
        refused(
            Some("sustained"),
            Overrides {
                duration: Some(Duration::ZERO),
                ..Overrides::default()
            },
            "--duration",
        );
        refused(
            Some("sustained"),
            Overrides {
                buyers: Some(10),
                ..Overrides::default()
            },
            "--duration",
        );
        refused(
            None,
            Overrides {
                buyers: Some(10),
                duration: Some(Duration::from_secs(1)),
                stock: Some(1),
                ..Overrides::default()
            },
            "exclude",
        );
        refused(None, Overrides::default(), "--scenario");
        refused(
            None,
            Overrides {
                buyers: Some(10),
                ..Overrides::default()
            },
            "--stock",
        );
        refused(
            Some("seed-100"),
            Overrides {
                taps: Some(0),
                ..Overrides::default()
            },
            "--taps",
        );
        assert!(
            "flash"
                .parse::<Scenario>()
                .unwrap_err()
                .contains("seed-100")
        );
    }
}
