//! What the live dashboard shows of each sale's recent traffic: answers by
//! outcome since this process started, purchases and rejections in 5-second
//! slots over the last five minutes (the chart, and purchases per second),
//! and purchase latency quantiles over the last 30 to 60 seconds; and the
//! store's commit latency over the same window.
//!
//! Process-wide, like the Prometheus recorder it sits next to: one service
//! per process. A sale's activity is dropped once it has been idle for the
//! metrics retention, so the board stays as small as the set of sales that
//! are being bought.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use dashmap::DashMap;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;

use crate::purchase::{Answered, Class};

/// One slot of the chart.
pub const SLOT: Duration = Duration::from_secs(5);
/// Slots kept: five minutes.
pub const SLOTS: usize = 60;
/// Each latency window covers this long; two are kept.
const LATENCY_WINDOW: Duration = Duration::from_secs(30);

/// Purchases and rejections of one slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SlotCounts {
    /// Purchases that sold (201 or 202).
    pub purchased: u32,
    /// Purchases refused because of the sale or the buyer (sold out, limit, window...).
    pub rejected: u32,
    /// Purchases answered with an error (overloaded, rebuilding, unavailable, invalid).
    pub failed: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Which slot (since [`base`]) these counts belong to.
    index: u64,
    counts: SlotCounts,
}

/// Latency quantiles over the last 30 to 60 seconds, from two rotating
/// 30-second histograms (microseconds, two significant digits).
#[derive(Debug)]
struct LatencyWindow {
    current: Histogram<u32>,
    previous: Histogram<u32>,
    started: Instant,
}

impl LatencyWindow {
    fn new(now: Instant) -> Self {
        let histogram =
            || Histogram::new_with_bounds(1, 120_000_000, 2).expect("valid histogram bounds");
        Self {
            current: histogram(),
            previous: histogram(),
            started: now,
        }
    }

    fn rotate(&mut self, now: Instant) {
        let age = now.saturating_duration_since(self.started);
        if age >= LATENCY_WINDOW * 2 {
            self.previous.reset();
            self.current.reset();
            self.started = now;
        } else if age >= LATENCY_WINDOW {
            std::mem::swap(&mut self.previous, &mut self.current);
            self.current.reset();
            self.started += LATENCY_WINDOW;
        }
    }

    fn record(&mut self, seconds: f64, now: Instant) {
        self.rotate(now);
        self.current
            .saturating_record((seconds * 1_000_000.0).round().max(1.0) as u64);
    }

    /// p50 and p99 in milliseconds; None without samples.
    fn quantiles(&mut self, now: Instant) -> Option<Latency> {
        self.rotate(now);
        let mut both = self.current.clone();
        both.add(&self.previous).ok()?;
        if both.is_empty() {
            return None;
        }
        let ms = |q: f64| both.value_at_quantile(q) as f64 / 1_000.0;
        Some(Latency {
            p50_ms: ms(0.50),
            p99_ms: ms(0.99),
            samples: both.len(),
        })
    }
}

/// Latency quantiles of a recent window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// How many observations the window holds.
    pub samples: u64,
}

#[derive(Debug)]
struct SaleActivity {
    totals: BTreeMap<&'static str, u64>,
    slots: [Slot; SLOTS],
    latency: LatencyWindow,
    last_event: Instant,
}

/// What the dashboard shows of one sale's traffic.
#[derive(Debug, Clone, Serialize)]
pub struct SaleReport {
    /// Answers by outcome since this process started.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Purchases per second over the last 10 seconds.
    pub purchases_per_second: f64,
    /// Rejections per second over the last 10 seconds.
    pub rejections_per_second: f64,
    /// Purchase latency (None: no purchase in the last minute).
    pub latency: Option<Latency>,
    /// The chart: one entry per 5-second slot, oldest first, the last one
    /// the slot under way.
    pub history: Vec<SlotCounts>,
}

/// The process-wide board.
#[derive(Debug)]
pub struct Board {
    base: Instant,
    sales: DashMap<String, Arc<Mutex<SaleActivity>>>,
    commits: Mutex<LatencyWindow>,
    last_sweep: Mutex<Instant>,
}

/// How a purchase outcome is drawn on the chart.
fn class(answered: Answered) -> fn(&mut SlotCounts) {
    match answered.class() {
        Class::Sold => |c| c.purchased += 1,
        // A replay sold nothing new and refused nothing.
        Class::Replayed => |_| {},
        Class::Rejected => |c| c.rejected += 1,
        Class::Failed => |c| c.failed += 1,
    }
}

impl Default for Board {
    fn default() -> Self {
        Self::new(Instant::now())
    }
}

impl Board {
    fn new(now: Instant) -> Self {
        Self {
            base: now,
            sales: DashMap::new(),
            commits: Mutex::new(LatencyWindow::new(now)),
            last_sweep: Mutex::new(now),
        }
    }

    fn slot_index(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.base).as_millis() / SLOT.as_millis()) as u64
    }

    /// Records one answered purchase of a known sale.
    pub fn record_purchase(&self, sale: &str, answered: Answered, seconds: f64) {
        self.record_purchase_at(sale, answered, seconds, Instant::now());
    }

    fn record_purchase_at(&self, sale: &str, answered: Answered, seconds: f64, now: Instant) {
        let outcome = answered.label();
        self.sweep(now);
        let index = self.slot_index(now);
        let activity = match self.sales.get(sale) {
            Some(activity) => Arc::clone(&activity),
            None => Arc::clone(
                self.sales
                    .entry(sale.to_owned())
                    .or_insert_with(|| {
                        Arc::new(Mutex::new(SaleActivity {
                            totals: BTreeMap::new(),
                            slots: [Slot::default(); SLOTS],
                            latency: LatencyWindow::new(now),
                            last_event: now,
                        }))
                    })
                    .value(),
            ),
        };
        let mut activity = activity.lock();
        *activity.totals.entry(outcome).or_default() += 1;
        let slot = &mut activity.slots[(index % SLOTS as u64) as usize];
        if slot.index != index {
            *slot = Slot {
                index,
                counts: SlotCounts::default(),
            };
        }
        class(answered)(&mut slot.counts);
        if outcome != "duplicate" {
            activity.latency.record(seconds, now);
        }
        activity.last_event = now;
    }

    /// Records one batch commit's duration.
    pub fn record_commit(&self, seconds: f64) {
        self.commits.lock().record(seconds, Instant::now());
    }

    /// Commit latency over the last 30 to 60 seconds.
    pub fn commit_latency(&self) -> Option<Latency> {
        self.commits.lock().quantiles(Instant::now())
    }

    /// The sale's recent traffic; None if this process has not answered a
    /// purchase of it within the retention.
    pub fn sale(&self, sale: &str) -> Option<SaleReport> {
        self.sale_at(sale, Instant::now())
    }

    fn sale_at(&self, sale: &str, now: Instant) -> Option<SaleReport> {
        let activity = Arc::clone(&*self.sales.get(sale)?);
        let mut activity = activity.lock();
        let index = self.slot_index(now);
        let counts = |i: u64| {
            let slot = activity.slots[(i % SLOTS as u64) as usize];
            if slot.index == i {
                slot.counts
            } else {
                SlotCounts::default()
            }
        };
        let first = index.saturating_sub(SLOTS as u64 - 1);
        let history: Vec<SlotCounts> = (first..=index).map(counts).collect();
        // The slot under way and the one before: 5 to 10 seconds.
        let into_slot = now.saturating_duration_since(self.base).as_secs_f64()
            - (index as f64 * SLOT.as_secs_f64());
        let span = if index == 0 {
            into_slot.max(1.0)
        } else {
            SLOT.as_secs_f64() + into_slot
        };
        let recent: Vec<SlotCounts> = history.iter().rev().take(2).copied().collect();
        let per_second =
            |pick: fn(&SlotCounts) -> u32| recent.iter().map(pick).sum::<u32>() as f64 / span;
        Some(SaleReport {
            outcomes: activity.totals.clone(),
            purchases_per_second: per_second(|c| c.purchased),
            rejections_per_second: per_second(|c| c.rejected),
            latency: activity.latency.quantiles(now),
            history,
        })
    }

    /// Drops sales idle for longer than the metrics retention (at most once
    /// a second).
    fn sweep(&self, now: Instant) {
        {
            let mut last = self.last_sweep.lock();
            if now.saturating_duration_since(*last) < Duration::from_secs(1) {
                return;
            }
            *last = now;
        }
        let retention = crate::metrics::retention();
        self.sales.retain(|_, activity| {
            now.saturating_duration_since(activity.lock().last_event) < retention
        });
    }

    /// How many sales the board holds.
    pub fn len(&self) -> usize {
        self.sales.len()
    }

    /// Whether the board holds no sale.
    pub fn is_empty(&self) -> bool {
        self.sales.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_api::ErrorCode;

    #[test]
    fn slots_count_by_class_and_old_slots_roll_off() {
        let t0 = Instant::now();
        let board = Board::new(t0);
        board.record_purchase_at("s", Answered::Purchased, 0.002, t0);
        board.record_purchase_at("s", Answered::Purchased, 0.004, t0);
        board.record_purchase_at("s", Answered::Refused(ErrorCode::SoldOut), 0.001, t0);
        board.record_purchase_at("s", Answered::Refused(ErrorCode::Overloaded), 0.001, t0);
        board.record_purchase_at("s", Answered::Duplicate, 0.001, t0);
        let report = board.sale_at("s", t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(report.history.len(), 1);
        assert_eq!(
            report.history[0],
            SlotCounts {
                purchased: 2,
                rejected: 1,
                failed: 1
            }
        );
        assert_eq!(report.outcomes["purchased"], 2);
        assert_eq!(report.outcomes["duplicate"], 1);
        assert_eq!(report.purchases_per_second, 2.0);
        let latency = report.latency.unwrap();
        assert_eq!(latency.samples, 4);
        assert!((3.9..=4.1).contains(&latency.p99_ms), "{latency:?}");

        // Six minutes later the chart has 60 empty slots, the totals stay,
        // and the latency window is empty.
        let later = t0 + Duration::from_secs(360);
        let report = board.sale_at("s", later).unwrap();
        assert_eq!(report.history.len(), SLOTS);
        assert!(report.history.iter().all(|c| *c == SlotCounts::default()));
        assert_eq!(report.outcomes["purchased"], 2);
        assert_eq!(report.latency, None);
        assert_eq!(report.purchases_per_second, 0.0);
    }

    #[test]
    fn a_slot_reused_after_five_minutes_starts_from_zero() {
        let t0 = Instant::now();
        let board = Board::new(t0);
        board.record_purchase_at("s", Answered::Purchased, 0.001, t0);
        let lap = t0 + SLOT * SLOTS as u32;
        board.record_purchase_at("s", Answered::Refused(ErrorCode::SoldOut), 0.001, lap);
        let report = board.sale_at("s", lap).unwrap();
        assert_eq!(
            *report.history.last().unwrap(),
            SlotCounts {
                purchased: 0,
                rejected: 1,
                failed: 0
            }
        );
        assert_eq!(report.history.iter().map(|c| c.purchased).sum::<u32>(), 0);
    }
}
