//! A scenario adjusted from the command line and checked: the
//! [`Workload`] a run sends.

use std::time::Duration;

use super::{
    DEFAULT_BURST_CONCURRENCY_CAP, DEFAULT_TIMED_CONCURRENCY, MAX_BUYERS, MAX_DURATION, MAX_STOCK,
    MAX_TAPS, Preset, Scenario,
};

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
    /// `--skus`: the stock split over this many SKUs (1: one SKU).
    pub skus: Option<u32>,
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
    /// SKUs the stock is split over (see [`super::skus`]): 1 is a sale of
    /// one SKU.
    pub skus: u32,
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
        let skus = overrides.skus.unwrap_or(1);
        if skus == 0 || skus as usize > stockade_core::sku::MAX_SKUS || skus > stock {
            return invalid(format!(
                "--skus must be between 1 and {} and at most --stock ({stock}), not {skus}",
                stockade_core::sku::MAX_SKUS
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
            skus,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::DEFAULT_DURATION;

    fn build(scenario: Option<&str>, overrides: Overrides) -> Result<Workload, WorkloadError> {
        Workload::new(scenario.map(|s| s.parse().unwrap()), &overrides)
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
