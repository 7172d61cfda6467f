//! Buying entries' items through the purchase pipeline, a batch at a
//! time: the engine judges each batch's purchases one after another in
//! the draw's order, and the writer commits them together
//! ([`Purchases::decide_in_order`]); the lease is renewed on the store's
//! clock before each batch.

use stockade_core::{IdempotencyKey, Purchase, PurchaseOutcome, SaleId, WantedItem};
use stockade_store::draws::Entry;

use super::LEASE;
use super::run::DrawError;
use crate::purchase::{Attempt, Decision, PurchaseError, Purchases};
use crate::state::AppState;
use crate::waiting_room::door::AdmissionToken;

/// Entries bought for per batch (at most the instance's purchases in
/// flight): as many as the writer commits in one transaction, so a batch
/// is about one commit, and a runner that lost its lease learns it before
/// the next.
pub const BATCH: usize = 512;

/// What buying one entry's items came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bought {
    /// The entry has this order.
    Won(stockade_core::OrderId),
    /// No stock for it now: it waits.
    Waitlisted,
    /// The whole sale is sold out: every entry after waits, unbought.
    SoldOut,
    /// It can never have an order (the sale ended, the buyer's limit, or
    /// its key names an order the store voided).
    Lost,
}

/// Buys for `entries` in this order, a batch at a time, renewing the lease
/// of `owner` on the store's clock before each batch (a runner that lost
/// it stops before buying more). From the first `sold_out` on, nothing
/// more is bought: those entries are [`Bought::SoldOut`].
pub(super) async fn buy_in_order(
    state: &AppState,
    sale: &SaleId,
    owner: &str,
    entries: &[&Entry],
) -> Result<Vec<Bought>, DrawError> {
    let size = BATCH.min(state.shedder().limit()).max(1);
    let mut bought = Vec::with_capacity(entries.len());
    let mut sold_out = false;
    for batch in entries.chunks(size) {
        if sold_out {
            bought.extend(batch.iter().map(|_| Bought::SoldOut));
            continue;
        }
        renew(state, sale, owner).await?;
        let attempts = batch
            .iter()
            .map(|entry| attempt_for(entry))
            .collect::<Result<Vec<_>, _>>()?;
        for answer in Purchases::new(state).decide_in_order(attempts).await {
            let answer = bought_of(answer)?;
            sold_out |= answer == Bought::SoldOut;
            bought.push(answer);
        }
    }
    Ok(bought)
}

/// The purchase of an entry's items for its buyer, keyed by the entry, so
/// a repeated run names the same order.
fn attempt_for(entry: &Entry) -> Result<Attempt, DrawError> {
    let wanted = entry
        .items
        .iter()
        .map(|item| WantedItem {
            sku: Some(item.sku.clone()),
            quantity: item.quantity,
        })
        .collect();
    let key = IdempotencyKey::new(format!("draw-{}", entry.id))
        .map_err(|e| DrawError::Corrupt(e.to_string()))?;
    let mut purchase = Purchase::of_items(entry.sale_id.clone(), entry.user_id.clone(), wanted)
        .map_err(|e| DrawError::Corrupt(e.to_string()))?
        .with_key(key);
    if let Some(tier) = &entry.tier {
        purchase = purchase.with_tier(tier.clone());
    }
    Ok(Attempt {
        purchase,
        respond_async: false,
        admission: AdmissionToken::Drawn,
    })
}

fn bought_of(answer: Result<Decision, PurchaseError>) -> Result<Bought, DrawError> {
    match answer {
        Ok(decision) => Ok(Bought::Won(decision.order_id())),
        Err(PurchaseError::Refused { outcome, .. }) => Ok(match outcome {
            PurchaseOutcome::SoldOut => Bought::SoldOut,
            PurchaseOutcome::InsufficientStock { .. } => Bought::Waitlisted,
            _ => Bought::Lost,
        }),
        // The entry's key names an order the store refused (voided):
        // nothing was sold and the key stays bound to it, so the entry
        // lapses; the draw goes on.
        Err(PurchaseError::OrderFailed(_)) => Ok(Bought::Lost),
        Err(error) => Err(DrawError::Purchase(error)),
    }
}

/// Renews the lease on the store's clock before a batch: a runner that
/// lost it stops at once.
async fn renew(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    if state.store().claim_draw(sale, owner, LEASE).await? {
        Ok(())
    } else {
        Err(DrawError::LeaseLost)
    }
}
