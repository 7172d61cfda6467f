//! Letting ended sales go: an ended sale sells nothing, so once
//! `--ended-sale-retention-s` has passed after its end, its engine state
//! and its waiting room are forgotten (on Redis, their keys get that time to
//! live as soon as the sale ends). The store keeps every order.
//!
//! A pass runs every [`RETIRE_EVERY`] over the sales that ended within the
//! retention (plus a margin): a sale that has just ended gets its time to
//! live once per instance; a sale whose retention has passed is dropped at
//! once, with the releases still owed for it, once its outbox is empty (an
//! order still there was named to a client and must commit first).

use std::collections::HashMap;
use std::time::Duration;

use stockade_core::SaleId;

use crate::state::AppState;

/// How often ended sales are looked at.
pub const RETIRE_EVERY: Duration = Duration::from_secs(5);

/// How long past its retention a sale is still looked for (a pass that
/// missed it, the process down for a while).
const MARGIN: Duration = Duration::from_secs(3_600);

/// Retires ended sales until the task is aborted.
pub async fn retire_forever(state: AppState, retention: Duration) {
    // The first pass one period after start, not in the start's own burst.
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + RETIRE_EVERY, RETIRE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = HashMap::new();
    loop {
        tick.tick().await;
        if let Err(error) = retire_once(&state, retention, &mut seen).await {
            tracing::warn!(%error, "retiring ended sales failed; retrying");
        }
    }
}

/// What this instance did to an ended sale already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// Its engine state and queue were given their time to live.
    Scheduled,
    /// They are gone.
    Forgotten,
}

/// One pass; `seen` says what was done to each sale before.
pub async fn retire_once(
    state: &AppState,
    retention: Duration,
    seen: &mut HashMap<SaleId, Retired>,
) -> Result<(), String> {
    let now = state.clock().now();
    let window = chrono::TimeDelta::from_std(retention + MARGIN).unwrap_or(chrono::TimeDelta::MAX);
    let ended = state
        .store()
        .ended_between(now - window, now)
        .await
        .map_err(|e| e.to_string())?;
    // Sales older than the window are never listed again.
    let listed: std::collections::HashSet<&SaleId> = ended.iter().map(|(s, _)| s).collect();
    seen.retain(|sale, _| listed.contains(sale));
    for (sale, ends_at) in &ended {
        let due = *ends_at + chrono::TimeDelta::from_std(retention).unwrap_or_default();
        let left = (due - now).to_std().unwrap_or(Duration::ZERO);
        match (seen.get(sale), left.is_zero()) {
            (Some(Retired::Forgotten), _) | (Some(Retired::Scheduled), false) => {}
            (_, true) => {
                if forget_now(state, sale).await? {
                    seen.insert(sale.clone(), Retired::Forgotten);
                }
            }
            (None, false) => {
                forget_later(state, sale, left).await?;
                seen.insert(sale.clone(), Retired::Scheduled);
            }
        }
    }
    Ok(())
}

/// Gives the sale's engine state and queue `left` to live (zero: gone now).
async fn forget_later(state: &AppState, sale: &SaleId, left: Duration) -> Result<(), String> {
    state
        .engine()
        .retire(sale, left)
        .await
        .map_err(|e| e.to_string())?;
    state
        .waiting_rooms()
        .backend()
        .forget(sale, left)
        .await
        .map_err(|e| e.to_string())
}

/// Drops the sale's engine state and queue now, with the releases still
/// owed for it, unless its outbox still holds orders; true once done.
async fn forget_now(state: &AppState, sale: &SaleId) -> Result<bool, String> {
    let outbox = state
        .engine()
        .outbox(sale)
        .await
        .map_err(|e| e.to_string())?;
    if !outbox.is_empty() {
        tracing::info!(%sale, orders = outbox.len(),
            "an ended sale's outbox still holds orders: it is retired once they commit");
        return Ok(false);
    }
    forget_later(state, sale, Duration::ZERO).await?;
    state
        .store()
        .drop_pending_releases(sale)
        .await
        .map_err(|e| e.to_string())?;
    // And what this process cached of it, so that a process serving sale
    // after sale for months holds only the sales still in play.
    state.book().forget_sale(sale);
    state.waiting_rooms().forget_local(sale);
    metrics::counter!("stockade_sales_retired_total").increment(1);
    Ok(true)
}
