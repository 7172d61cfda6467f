//! Metrics, through the [`metrics`] facade: install any recorder (Prometheus,
//! StatsD, …) in the application and these appear; without one they cost
//! next to nothing.
//!
//! | name | type | meaning |
//! | --- | --- | --- |
//! | `stockade_lock_acquire_seconds` | histogram, `outcome` = `acquired`/`busy`/`timeout`/`error` | time from the call to its result, waiting included |
//! | `stockade_lock_wait_seconds` | histogram | for acquisitions that had to wait: time spent waiting |
//! | `stockade_lock_contended_total` | counter | acquire attempts that found the lock held by someone else |
//! | `stockade_lock_acquired_total` | counter | locks acquired |
//! | `stockade_lock_released_total` | counter, `outcome` = `released`/`not_held`/`error`/`dropped` | explicit releases by outcome; `dropped`: guards dropped unreleased (released in the background) |
//! | `stockade_lock_extensions_total` | counter, `outcome` = `extended`/`not_held`/`error` | watchdog and manual extensions |
//! | `stockade_lock_lost_total` | counter, `reason` = `expired`/`taken` | guards that lost their lock while held |
//!
//! Lock names are not used as labels: they are unbounded.

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};

use crate::LostReason;

/// `stockade_lock_acquire_seconds`
pub const ACQUIRE_SECONDS: &str = "stockade_lock_acquire_seconds";
/// `stockade_lock_wait_seconds`
pub const WAIT_SECONDS: &str = "stockade_lock_wait_seconds";
/// `stockade_lock_contended_total`
pub const CONTENDED_TOTAL: &str = "stockade_lock_contended_total";
/// `stockade_lock_acquired_total`
pub const ACQUIRED_TOTAL: &str = "stockade_lock_acquired_total";
/// `stockade_lock_released_total`
pub const RELEASED_TOTAL: &str = "stockade_lock_released_total";
/// `stockade_lock_extensions_total`
pub const EXTENSIONS_TOTAL: &str = "stockade_lock_extensions_total";
/// `stockade_lock_lost_total`
pub const LOST_TOTAL: &str = "stockade_lock_lost_total";

/// Registers units and descriptions of every metric with the installed
/// recorder. Optional; call it once after installing the recorder.
pub fn describe() {
    describe_histogram!(
        ACQUIRE_SECONDS,
        Unit::Seconds,
        "Time from an acquire call to its result, waiting included"
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "Time spent waiting for a lock held by someone else"
    );
    describe_counter!(
        CONTENDED_TOTAL,
        "Acquire attempts that found the lock held by someone else"
    );
    describe_counter!(ACQUIRED_TOTAL, "Locks acquired");
    describe_counter!(RELEASED_TOTAL, "Lock releases, by outcome");
    describe_counter!(EXTENSIONS_TOTAL, "Lease extensions, by outcome");
    describe_counter!(LOST_TOTAL, "Guards that lost their lock while held");
}

pub(crate) fn acquire_finished(outcome: &'static str, elapsed: Duration) {
    histogram!(ACQUIRE_SECONDS, "outcome" => outcome).record(elapsed.as_secs_f64());
    if outcome == "acquired" {
        counter!(ACQUIRED_TOTAL).increment(1);
    }
}

pub(crate) fn waited(waited: Duration) {
    histogram!(WAIT_SECONDS).record(waited.as_secs_f64());
}

pub(crate) fn contended() {
    counter!(CONTENDED_TOTAL).increment(1);
}

pub(crate) fn released(outcome: &'static str) {
    counter!(RELEASED_TOTAL, "outcome" => outcome).increment(1);
}

pub(crate) fn extension(outcome: &'static str) {
    counter!(EXTENSIONS_TOTAL, "outcome" => outcome).increment(1);
}

pub(crate) fn lost(reason: LostReason) {
    let reason = match reason {
        LostReason::Expired => "expired",
        LostReason::Taken => "taken",
    };
    counter!(LOST_TOTAL, "reason" => reason).increment(1);
}
