//! The draw itself: the entry set frozen, the winners bought for in the
//! draw's order, the results and the seed published.

// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use stockade_core::SaleId;
use stockade_core::draw::EntryResult;
use stockade_store::StoreError;
use stockade_store::draws::{Entry, EntryUpdate, Freeze};

use super::buy::{Bought, buy_in_order};
use crate::purchase::PurchaseError;
use crate::state::AppState;

/// Why a run stopped (it is run again, by any instance).
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A winner's purchase failed for a reason that may pass (the engine
    /// or the store unavailable, the sale being rebuilt).
    #[error("buying an entry's items failed: {0:?}")]
    Purchase(PurchaseError),
    /// Another instance holds the draw's lease now.
    #[error("the draw's lease passed to another instance")]
    LeaseLost,
    /// The store's draw does not fit (no seed, duplicate entry ids).
    #[error("the draw cannot be made: {0}")]
    Corrupt(String),
}

/// Makes the draw of `sale`: freezes its entry set in the store (their
/// places from the seed, once: a re-run reuses them), buys for the entries
/// in that order, and records the results and the draw's instant
/// (publishing the seed), if `owner` still holds the lease.
pub async fn draw(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    let started = Instant::now();
    match state
        .store()
        .freeze_draw(sale, owner, state.draw_key())
        .await?
    {
        Freeze::Frozen { .. } => {}
        Freeze::NotClosed => return Ok(()),
        Freeze::LeaseLost => return Err(DrawError::LeaseLost),
    }
    let entries = state.store().entries(sale).await?;
    if let Some(entry) = entries.iter().find(|e| e.position.is_none()) {
        return Err(DrawError::Corrupt(format!(
            "entry {} of a frozen draw has no place",
            entry.id
        )));
    }
    let frozen = started.elapsed();
    let ordered: Vec<&Entry> = entries.iter().collect();
    let bought = buy_in_order(state, sale, owner, &ordered).await?;
    let buying = started.elapsed() - frozen;
    let updates: Vec<EntryUpdate> = entries
        .iter()
        .zip(bought)
        .map(|(entry, bought)| update(entry, bought))
        .collect();
    if !state
        .store()
        .record_draw(sale, owner, true, &updates, false)
        .await?
    {
        return Err(DrawError::LeaseLost);
    }
    let won = updates
        .iter()
        .filter(|u| u.result == EntryResult::Won)
        .count();
    tracing::info!(
        %sale,
        entries = entries.len(),
        won,
        frozen_and_read_ms = frozen.as_millis(),
        bought_ms = buying.as_millis(),
        total_ms = started.elapsed().as_millis(),
        "draw made"
    );
    Ok(())
}

/// What a run writes for an entry it bought for.
pub(super) fn update(entry: &Entry, bought: Bought) -> EntryUpdate {
    let (result, order_id) = match bought {
        Bought::Won(order) => (EntryResult::Won, Some(order)),
        Bought::Waitlisted | Bought::SoldOut => (EntryResult::Waitlisted, None),
        Bought::Lost => (EntryResult::Lost, None),
    };
    EntryUpdate {
        id: entry.id.clone(),
        result,
        order_id,
    }
}
