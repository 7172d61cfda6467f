//! The admission loop. Every instance runs it; each tick of a room is one
//! atomic backend step, so several tickers admit at the room's rate
//! together (the rate credit is kept by time in the room, not per ticker).

use std::collections::HashSet;
use std::time::Duration;

use stockade_core::SaleId;

use super::{CloseReason, RoomLookup, Tick};
use crate::snapshot::{WhenMissing, snapshot_and_store_left};
use crate::state::AppState;

/// How often rooms are ticked (also at once when stock comes back here).
pub const TICK_INTERVAL: Duration = Duration::from_millis(100);

/// A room closed as sold out is ticked once in this many rounds (and at
/// once when stock comes back on this instance): it admits nobody, and a
/// cancel elsewhere reopens it within a second.
const SOLD_OUT_EVERY: u64 = 10;

/// Ticks every room until the task is aborted.
pub async fn run_forever(state: AppState) {
    let mut interval = tokio::time::interval(TICK_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sold_out = HashSet::new();
    let mut round = 0u64;
    loop {
        let woken = tokio::select! {
            // In order, so a run is the same each time (the simulator's replays).
            biased;
            _ = interval.tick() => false,
            () = state.waiting_rooms().woken() => true,
        };
        if state.is_stopping() {
            return;
        }
        round += 1;
        let periodic = round.is_multiple_of(SOLD_OUT_EVERY);
        tick_all(&state, &mut sold_out, woken || periodic, periodic).await;
    }
}

/// One tick of every listed room; rooms in `sold_out` only if `everyone`;
/// with `relisting`, the store's open rooms the backend forgot are listed
/// again first ([`relist`]).
async fn tick_all(
    state: &AppState,
    sold_out: &mut HashSet<SaleId>,
    everyone: bool,
    relisting: bool,
) {
    let mut sales = match state.waiting_rooms().backend().rooms().await {
        Ok(sales) => sales,
        Err(error) => {
            tracing::warn!(%error, "cannot list the waiting rooms");
            return;
        }
    };
    if relisting {
        relist(state, &mut sales).await;
    }
    sold_out.retain(|sale| sales.contains(sale));
    for sale in sales {
        if !everyone && sold_out.contains(&sale) {
            continue;
        }
        match tick_sale(state, &sale).await {
            Ok(Some(CloseReason::SoldOut)) => {
                sold_out.insert(sale);
            }
            Ok(_) => {
                sold_out.remove(&sale);
            }
            Err(error) => tracing::warn!(%error, %sale, "waiting room tick failed"),
        }
    }
}

/// Lists again the rooms the store has open and the backend forgot (Redis
/// restarted empty, or failed over to a replica that had not caught up):
/// otherwise nobody would tick them, and their buyers would wait forever.
async fn relist(state: &AppState, listed: &mut Vec<SaleId>) {
    let open = match state.store().open_rooms(state.clock().now()).await {
        Ok(open) => open,
        Err(error) => {
            tracing::debug!(%error, "cannot read the open waiting rooms from the store; later");
            return;
        }
    };
    for sale in open {
        if listed.contains(&sale) {
            continue;
        }
        match state.waiting_rooms().backend().register(&sale).await {
            Ok(()) => {
                tracing::warn!(%sale, "the waiting room was not listed (its queue backend lost it): listed again");
                listed.push(sale);
            }
            Err(error) => {
                tracing::warn!(%error, %sale, "cannot list the waiting room again; later")
            }
        }
    }
}

/// One tick of the room; why it is closed after it, if it is.
async fn tick_sale(state: &AppState, sale: &SaleId) -> Result<Option<CloseReason>, String> {
    let rooms = state.waiting_rooms();
    let lookup = rooms
        .lookup(state.book(), state.store(), sale)
        .await
        .map_err(|e| e.to_string())?;
    let RoomLookup::Room(room) = lookup else {
        // Listed by an older deployment of this store, or not a room.
        rooms
            .backend()
            .retire(sale)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(None);
    };
    // Used admissions first, then the stock: see the module docs of
    // `waiting_room` (a stale stock figure can only admit fewer).
    let used_before = rooms
        .backend()
        .used(sale)
        .await
        .map_err(|e| e.to_string())?;
    // A room is listed before its sale reaches the engine: not a lost sale.
    let Some((snapshot, store_left)) =
        snapshot_and_store_left(state, sale, WhenMissing::AnswerFromStore)
            .await
            .map_err(|e| format!("{e:?}"))?
    else {
        return Ok(None);
    };
    let now = state.clock().now();
    let tick = Tick {
        now_ms: now.timestamp_millis(),
        started: room.spec.starts_at().is_none_or(|at| now >= at),
        ended: room.spec.ends_at().is_some_and(|at| now >= at),
        remaining: snapshot.remaining,
        // The engine reads 0 while it is rebuilt or after it lost its
        // data; only the store says the sale is sold out.
        sold_out: store_left == 0,
        used_before,
        expired_before_ms: now.timestamp_millis() - super::OUTSTANDING_GRACE.as_millis() as i64,
        config: room.config,
    };
    let report = rooms
        .backend()
        .tick(sale, &tick)
        .await
        .map_err(|e| e.to_string())?;
    rooms.record_waiting(sale, report.waiting);
    let label = sale.to_string();
    metrics::counter!("stockade_waiting_room_admitted_total", "sale" => label.clone())
        .increment(report.admitted.len() as u64);
    metrics::gauge!("stockade_waiting_room_waiting", "sale" => label.clone())
        .set(report.waiting as f64);
    metrics::gauge!("stockade_waiting_room_outstanding", "sale" => label)
        .set(report.outstanding as f64);
    if report.closed == Some(CloseReason::Ended) {
        rooms
            .backend()
            .retire(sale)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(report.closed)
}
