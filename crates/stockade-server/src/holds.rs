//! The expiry sweeper: unpaid holds become `expired` and their items go
//! back, at most [`EXPIRY_BOUND`] after their deadline while the store is
//! reachable.
//!
//! Every instance sweeps (it runs beside the reconciler): each tick it reads
//! the due holds from the store's deadline index and expires them sale by
//! sale, each in one transaction under the sale's row lock that moves only
//! orders still `held` (see `stockade_store::holds`). So with several instances each
//! hold is expired exactly once, an instance killed mid-expiry leaves either
//! nothing done or everything done plus a pending release, and a Redis
//! restart loses nothing: the deadlines live in the store, and the rebuild
//! counts expired orders as returned. The sweeper never calls the engine:
//! the releases the engine owes are applied by the release applier
//! ([`crate::releases`]), woken at once, so a slow or frozen engine never
//! delays an expiry.

use std::collections::BTreeMap;
use std::time::Duration;

use stockade_core::{OrderId, SaleId};

use crate::releases::items_returned;
use crate::state::AppState;
use stockade_store::StoreError;

/// How often each instance looks for due holds.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(200);

/// The documented lateness bound of an expiry (deadline to `expired`, items
/// back in the store): one sweep interval plus the expiring transaction,
/// with room for a loaded machine. The engine has the items back after one
/// more engine call.
pub const EXPIRY_BOUND: Duration = Duration::from_secs(1);

/// Holds expired per store transaction at most (and per look at the index).
const BATCH: u32 = 1_000;

/// Sweeps until the task is dropped.
pub async fn expire_forever(state: AppState) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(error) = expire_due(&state).await {
            tracing::warn!(%error, "expiring due holds failed; retrying");
        }
    }
}

/// Expires every hold due now; returns how many this instance expired.
pub async fn expire_due(state: &AppState) -> Result<usize, StoreError> {
    let mut expired = 0;
    loop {
        let now = state.clock().now();
        let due = state.store().due_holds(now, BATCH).await?;
        let full = due.len() == BATCH as usize;
        let mut by_sale: BTreeMap<SaleId, Vec<OrderId>> = BTreeMap::new();
        for (sale, order) in due {
            by_sale.entry(sale).or_default().push(order);
        }
        for (sale, orders) in by_sale {
            expired += expire_sale(state, &sale, &orders).await?;
        }
        if !full {
            return Ok(expired);
        }
    }
}

/// Expires `orders` of `sale` that are still held and due.
async fn expire_sale(
    state: &AppState,
    sale: &SaleId,
    orders: &[OrderId],
) -> Result<usize, StoreError> {
    let now = state.clock().now();
    let expired = state
        .store()
        .expire_holds(sale, orders, now, state.engine_apart())
        .await?;
    if expired.orders.is_empty() {
        // Another instance (or a confirm) got there first.
        return Ok(0);
    }
    tracing::debug!(%sale, count = expired.orders.len(), "holds expired");
    items_returned(state, sale, expired.release.is_some()).await;
    Ok(expired.orders.len())
}
