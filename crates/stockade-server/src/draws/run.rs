//! One run of one draw: the draw itself, or a roll-down pass.

use stockade_core::draw::EntryResult;
use stockade_core::{IdempotencyKey, OrderStatus, Purchase, PurchaseOutcome, SaleId, WantedItem};
use stockade_store::StoreError;
use stockade_store::draws::{Entry, EntryOrder, EntryUpdate, Freeze};

use super::LEASE;
use crate::purchase::{Attempt, PurchaseError, Purchases};
use crate::state::AppState;
use crate::waiting_room::door::AdmissionToken;

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

/// What buying one entry's items came to.
enum Bought {
    /// The entry has this order.
    Won(stockade_core::OrderId),
    /// No stock for it now: it waits.
    Waitlisted,
    /// The whole sale is sold out: every entry after waits.
    SoldOut,
    /// It can never have an order (the sale ended, the buyer's limit, or
    /// its key names an order the store voided).
    Lost,
}

/// Makes the draw of `sale`: freezes its entry set in the store (their
/// places from the seed, once: a re-run reuses them), buys for the entries
/// in that order, and records the results and the draw's instant
/// (publishing the seed), if `owner` still holds the lease.
pub async fn draw(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
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
    let mut updates = Vec::with_capacity(entries.len());
    let mut sold_out = false;
    for entry in &entries {
        if entry.position.is_none() {
            return Err(DrawError::Corrupt(format!(
                "entry {} of a frozen draw has no place",
                entry.id
            )));
        }
        let bought = if sold_out {
            Bought::SoldOut
        } else {
            renew(state, sale, owner).await?;
            buy_for(state, entry).await?
        };
        sold_out |= matches!(bought, Bought::SoldOut);
        updates.push(update(entry, bought));
    }
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
    tracing::info!(%sale, entries = entries.len(), won, "draw made");
    Ok(())
}

/// One roll-down pass of a drawn sale: lapsed winners (hold expired,
/// order cancelled or voided) lose, the freed stock goes to the waitlisted
/// in the draw's order, and the draw settles once nothing more can roll
/// down: no hold outstanding, and no release the store recorded still on
/// its way to the engine (an engine refusal before it arrives says nothing
/// of the stock).
pub async fn roll_down(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    let entries = state.store().entries_with_orders(sale).await?;
    let mut updates = Vec::new();
    let mut holds_outstanding = false;
    for (entry, order) in &entries {
        if entry.result != EntryResult::Won {
            continue;
        }
        match order {
            EntryOrder::Void | EntryOrder::Is(OrderStatus::Expired | OrderStatus::Cancelled) => {
                updates.push(EntryUpdate {
                    id: entry.id.clone(),
                    result: EntryResult::Lost,
                    order_id: entry.order_id,
                })
            }
            EntryOrder::Is(OrderStatus::Held) | EntryOrder::Missing => holds_outstanding = true,
            EntryOrder::Is(OrderStatus::Confirmed) => {}
        }
    }
    // Read after the orders: a release recorded with an expiry seen above
    // is either still owed here, or reached the engine before the
    // purchases below.
    let releases_owed = !state.store().pending_releases_of(sale, 1).await?.is_empty();
    let mut sold_out = false;
    for (entry, _) in &entries {
        if entry.result != EntryResult::Waitlisted {
            continue;
        }
        let bought = if sold_out {
            Bought::SoldOut
        } else {
            renew(state, sale, owner).await?;
            buy_for(state, entry).await?
        };
        sold_out |= matches!(bought, Bought::SoldOut);
        if matches!(bought, Bought::Won(_)) {
            holds_outstanding = true;
        }
        if !matches!(bought, Bought::Waitlisted | Bought::SoldOut) {
            updates.push(update(entry, bought));
        }
    }
    // Settled once no hold can lapse any more (every winner paid or lost),
    // or the sale ended: the waitlisted lose.
    let spec = state.store().sale(sale).await?;
    let ended = spec.is_some_and(|spec| {
        spec.window_at(state.clock().now()) == stockade_core::sale::Window::Ended
    });
    let settled = ended || !(holds_outstanding || releases_owed);
    if settled {
        for (entry, _) in &entries {
            let rolled = updates.iter().any(|u| u.id == entry.id);
            if entry.result == EntryResult::Waitlisted && !rolled {
                updates.push(EntryUpdate {
                    id: entry.id.clone(),
                    result: EntryResult::Lost,
                    order_id: None,
                });
            }
        }
    }
    if updates.is_empty() && !settled {
        return Ok(());
    }
    if !state
        .store()
        .record_draw(sale, owner, false, &updates, settled)
        .await?
    {
        return Err(DrawError::LeaseLost);
    }
    if settled {
        tracing::info!(%sale, "draw settled");
    }
    Ok(())
}

/// Buys an entry's items for its buyer through the purchase pipeline,
/// keyed by the entry, so a repeated run names the same order.
async fn buy_for(state: &AppState, entry: &Entry) -> Result<Bought, DrawError> {
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
    let attempt = Attempt {
        purchase,
        respond_async: false,
        admission: AdmissionToken::Drawn,
    };
    match Purchases::new(state).decide(attempt).await {
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

fn update(entry: &Entry, bought: Bought) -> EntryUpdate {
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

/// Renews the lease on the store's clock before a purchase: a runner that
/// lost it stops at once.
async fn renew(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    if state.store().claim_draw(sale, owner, LEASE).await? {
        Ok(())
    } else {
        Err(DrawError::LeaseLost)
    }
}
