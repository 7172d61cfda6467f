//! Throughput and latency over time, for timed runs: answers are grouped by
//! the second (since the start) in which they arrived.
//!
//! Each worker fills a histogram for its current second and hands it to the
//! shared [`Timeline`] when the second changes, so the shared lock is taken
//! about once per worker per second, not once per answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::latency::Latencies;

/// The width of one window.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The answers of every worker, by window.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    windows: Arc<Mutex<BTreeMap<u64, Latencies>>>,
}

/// One worker's share of the current window.
#[derive(Debug)]
pub struct WindowRecorder {
    timeline: Timeline,
    current: Option<(u64, Latencies)>,
}

impl Timeline {
    /// A recorder for one worker.
    pub fn recorder(&self) -> WindowRecorder {
        WindowRecorder {
            timeline: self.clone(),
            current: None,
        }
    }

    /// The windows, oldest first. `elapsed` is the length of the run, so
    /// that the last, partial window's rate is computed over its real width.
    pub fn summarize(&self, elapsed: Duration) -> Vec<WindowSummary> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows
            .iter()
            .map(|(&index, latencies)| {
                let start = WINDOW * index as u32;
                let width = elapsed.saturating_sub(start).min(WINDOW);
                let width = width.as_secs_f64().max(1e-3);
                WindowSummary {
                    second: index + 1,
                    answers: latencies.count(),
                    per_second: latencies.count() as f64 / width,
                    p50_us: latencies.quantile_us(0.5),
                    p99_us: latencies.quantile_us(0.99),
                }
            })
            .collect()
    }

    fn add(&self, index: u64, latencies: &Latencies) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows.entry(index).or_default().merge(latencies);
    }
}

impl WindowRecorder {
    /// Records an answer that took `latency` and arrived `since_start`
    /// after the run started.
    pub fn record(&mut self, since_start: Duration, latency: Duration) {
        let index = (since_start.as_nanos() / WINDOW.as_nanos()) as u64;
        match &mut self.current {
            Some((current, latencies)) if *current == index => latencies.record(latency),
            _ => {
                self.flush();
                let mut latencies = Latencies::default();
                latencies.record(latency);
                self.current = Some((index, latencies));
            }
        }
    }

    /// Hands the current window to the timeline.
    pub fn flush(&mut self) {
        if let Some((index, latencies)) = self.current.take() {
            self.timeline.add(index, &latencies);
        }
    }
}

impl Drop for WindowRecorder {
    fn drop(&mut self) {
        self.flush();
    }
}

/// One window of a timed run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowSummary {
    /// Which second of the run (1 is the first).
    pub second: u64,
    /// Answers that arrived in it.
    pub answers: u64,
    /// Answers per second over the window.
    pub per_second: f64,
    /// Median answer time in it.
    pub p50_us: u64,
    /// 99th percentile answer time in it.
    pub p99_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_land_in_the_second_they_arrived_from_every_worker() {
        let timeline = Timeline::default();
        let mut a = timeline.recorder();
        let mut b = timeline.recorder();
        a.record(Duration::from_millis(100), Duration::from_micros(10));
        b.record(Duration::from_millis(900), Duration::from_micros(30));
        a.record(Duration::from_millis(1_100), Duration::from_micros(20));
        drop(a);
        drop(b);
        let windows = timeline.summarize(Duration::from_millis(1_500));
        assert_eq!(windows.len(), 2);
        assert_eq!(windows[0].second, 1);
        assert_eq!(windows[0].answers, 2);
        assert_eq!(windows[1].answers, 1);
        // The last window is half a second wide.
        assert!((windows[1].per_second - 2.0).abs() < 1e-9);
    }
}
