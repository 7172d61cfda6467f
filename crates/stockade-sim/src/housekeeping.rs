//! The store's housekeeping, judged: the views of the engine that
//! processes report (`engine_views`) are forgotten once their process has
//! been silent for a day. Each start of a process reports under a new
//! name, so without the pruning the table grows by a row per start,
//! forever, and every move to the fallback reads it.
//!
//! A run's store starts with the view of a process that last reported two
//! days earlier (yesterday's sale). Each instance's reporter prunes a
//! minute after its start, then hourly; an instance that has run for
//! [`DUE_AFTER`] when the run ends must have forgotten it.

use std::time::Duration;

use chrono::TimeDelta;
use stockade_store::engine_views::InFlightOrders;
use stockade_store::{Calls, OrderStore, StoreOptions};

use crate::clock::{SimClock, TrueTime};

/// The name yesterday's process reported under.
const YESTERDAY: &str = "a-process-of-yesterday";

/// How long yesterday's view is older than the run.
const AGE: TimeDelta = TimeDelta::days(2);

/// How long an instance must have run for its first pruning to be done: a
/// minute of one-second reports, with room for reports that a frozen
/// Redis or a store outage held up.
pub const DUE_AFTER: Duration = Duration::from_secs(120);

/// Leaves the view of a process two days silent in the store at `url`
/// (run before the instances start; the store is created if need be).
pub async fn leave_yesterdays_view(url: &str, time: TrueTime) -> Result<(), String> {
    let options = StoreOptions {
        clock: Some(std::sync::Arc::new(SimClock::new(time, -AGE, 0))),
        calls: Calls::Inline,
        outage: None,
    };
    let store = OrderStore::open_with(url, options)
        .await
        .map_err(|e| format!("opening the store to leave yesterday's view: {e}"))?;
    store
        .report_engine_view(YESTERDAY, true, InFlightOrders::default)
        .await
        .map_err(|e| format!("leaving yesterday's view in the store: {e}"))
}

/// A violation if, though an instance has run for `ran` (the longest of
/// those running at the end), the store still holds the view of a process
/// silent for over a day.
pub async fn judge(store: &OrderStore, ran: Option<Duration>) -> Option<String> {
    let ran = ran.filter(|ran| *ran >= DUE_AFTER)?;
    let day = Duration::from_secs(86_400);
    let (all, recent) = match (
        store.live_instances(day * 400).await,
        store.live_instances(day).await,
    ) {
        (Ok(all), Ok(recent)) => (all, recent),
        (Err(e), _) | (_, Err(e)) => return Some(format!("reading the engine views: {e}")),
    };
    (all > recent).then(|| {
        format!(
            "the store still holds {} engine view(s) of processes silent for over a day, \
             though an instance had run for {} s (pruned a minute after its start)",
            all - recent,
            ran.as_secs()
        )
    })
}
