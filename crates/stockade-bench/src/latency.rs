//! Latency recording with an HDR histogram (microsecond resolution, three
//! significant digits), so percentiles are exact to 0.1 % at any scale.
//!
//! Every histogram has the same fixed range (1 µs to one hour): histograms
//! of different ranges cannot always be added, and a lost merge would
//! report the wrong percentiles.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The largest recordable answer time: one hour. Longer ones are clamped.
const MAX_MICROS: u64 = 3_600_000_000;

/// Answer times of one run.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            histogram: Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .expect("1 µs to 1 h at 3 significant digits is a valid histogram"),
        }
    }
}

impl Latencies {
    /// Records one answer time.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(MAX_MICROS)
            .clamp(1, MAX_MICROS);
        self.histogram.saturating_record(micros);
    }

    /// Adds another run's answer times to this one.
    pub fn merge(&mut self, other: &Latencies) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms of the same fixed range always add");
    }

    /// The `quantile` (0.0–1.0) answer time in microseconds.
    pub fn quantile_us(&self, quantile: f64) -> u64 {
        self.histogram.value_at_quantile(quantile)
    }

    /// The slowest answer time in microseconds.
    pub fn max_us(&self) -> u64 {
        self.histogram.max()
    }

    /// How many answers were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_values() {
        let mut latencies = Latencies::default();
        for micros in 1..=1000u64 {
            latencies.record(Duration::from_micros(micros));
        }
        assert_eq!(latencies.count(), 1000);
        let p50 = latencies.quantile_us(0.5);
        assert!((499..=501).contains(&p50), "{p50}");
        let p99 = latencies.quantile_us(0.99);
        assert!((989..=991).contains(&p99), "{p99}");
        assert_eq!(latencies.max_us(), 1000);
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    /// A merge once dropped the other histogram silently; the report then
    /// showed 2 µs medians for PostgreSQL.
    #[test]
    fn merging_keeps_large_values() {
        let mut a = Latencies::default();
        a.record(Duration::from_millis(1500));
        a.record(Duration::from_millis(1500));
        let mut total = Latencies::default();
        total.merge(&a);
        let mut b = Latencies::default();
        b.record(Duration::from_micros(2));
        total.merge(&b);
        assert_eq!(total.count(), 3);
        assert!(
            total.quantile_us(0.5) > 1_000_000,
            "{}",
            total.quantile_us(0.5)
        );
    }
}
