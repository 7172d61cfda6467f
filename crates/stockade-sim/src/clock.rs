//! Simulated time. The runtime's clock (tokio's, paused) is the one true
//! time of a run; each instance and the store read their own [`SimClock`]
//! over it: an offset, a drift, and jumps made while the run goes on.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use parking_lot::Mutex;
use stockade_core::Clock;
use tokio::time::Instant;

/// Where every run's time starts: a fixed instant, so a seed replays the
/// same dates.
pub fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0)
        .single()
        .expect("a valid date")
}

/// The instant `ms` milliseconds after [`epoch`]: where a scenario's
/// times (given from the run's start) fall on the calendar.
pub fn at(ms: u64) -> DateTime<Utc> {
    epoch() + TimeDelta::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The true time of the run: [`epoch`] plus the runtime's elapsed time.
#[derive(Debug, Clone, Copy)]
pub struct TrueTime {
    started: Instant,
}

impl TrueTime {
    /// Starts counting now (call inside the run's runtime).
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
        }
    }

    /// The true instant now.
    pub fn now(&self) -> DateTime<Utc> {
        epoch() + elapsed(self.started)
    }

    /// Milliseconds since the run started.
    pub fn millis(&self) -> u64 {
        u64::try_from(elapsed(self.started).num_milliseconds()).unwrap_or_default()
    }
}

/// Time since `since` on the run's runtime. Inside a store call (which
/// runs to its end while the run's time stands still, with another
/// runtime's clock current) it is the time the call started.
fn elapsed(since: Instant) -> TimeDelta {
    let now = stockade_store::inline_call_started().unwrap_or_else(Instant::now);
    TimeDelta::from_std(now.saturating_duration_since(since)).unwrap_or(TimeDelta::MAX)
}

/// One machine's clock: true time, moved by `offset`, running fast or slow
/// by `drift_ppm` parts per million, and moved again by each jump.
#[derive(Debug, Clone)]
pub struct SimClock {
    time: TrueTime,
    drift_ppm: i64,
    offset: Arc<Mutex<TimeDelta>>,
}

impl SimClock {
    /// A clock `offset` from true time, drifting by `drift_ppm`.
    pub fn new(time: TrueTime, offset: TimeDelta, drift_ppm: i64) -> Self {
        Self {
            time,
            drift_ppm,
            offset: Arc::new(Mutex::new(offset)),
        }
    }

    /// Moves the clock by `by` (forward or back), as an operator or NTP
    /// stepping it would.
    pub fn jump(&self, by: TimeDelta) {
        *self.offset.lock() += by;
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        let true_elapsed = elapsed(self.time.started);
        let drift =
            true_elapsed.num_microseconds().unwrap_or(i64::MAX) / 1_000_000 * self.drift_ppm;
        epoch() + true_elapsed + TimeDelta::microseconds(drift) + *self.offset.lock()
    }
}
