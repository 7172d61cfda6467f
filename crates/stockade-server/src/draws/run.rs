//! One run of one draw: the draw itself, or a roll-down pass.

use stockade_core::draw::{EntryResult, draw_order};
use stockade_core::{IdempotencyKey, OrderStatus, Purchase, PurchaseOutcome, SaleId, WantedItem};
use stockade_store::StoreError;
use stockade_store::draws::{Entry, EntryUpdate};

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
    /// It can never have an order (the sale ended, or the buyer's limit).
    Lost,
}

/// Purchases between renewals of the lease.
const RENEW_EVERY: usize = 200;

/// Makes the draw of `sale`: orders its entries from the seed, buys for
/// them in that order, and records the order, the results and the draw's
/// instant (publishing the seed), if `owner` still holds the lease.
pub async fn draw(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    let record = state
        .store()
        .draw(sale)
        .await?
        .ok_or_else(|| DrawError::Corrupt(format!("sale {sale} has no draw")))?;
    let seed = record.seed()?;
    let entries = state.store().entries(sale).await?;
    let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    let order = draw_order(&seed, &ids).map_err(|e| DrawError::Corrupt(e.to_string()))?;
    let by_id = |id: &str| entries.iter().find(|e| e.id.as_str() == id);
    let mut positions = Vec::with_capacity(order.len());
    let mut updates = Vec::with_capacity(order.len());
    let mut sold_out = false;
    for (position, id) in order.iter().enumerate() {
        let entry = by_id(id).ok_or_else(|| DrawError::Corrupt(format!("entry {id} vanished")))?;
        positions.push((entry.id.clone(), position as u32));
        let bought = if sold_out {
            Bought::SoldOut
        } else {
            buy_for(state, entry).await?
        };
        sold_out |= matches!(bought, Bought::SoldOut);
        updates.push(update(entry, bought));
        renew(state, sale, owner, position).await?;
    }
    let now = state.clock().now();
    if !state
        .store()
        .record_draw(sale, owner, &positions, Some(now), &updates, None)
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

/// One roll-down pass of a drawn sale: lapsed winners lose, the freed
/// stock goes to the waitlisted in the draw's order, and the draw settles
/// once nothing more can roll down.
pub async fn roll_down(state: &AppState, sale: &SaleId, owner: &str) -> Result<(), DrawError> {
    let entries = state.store().entries_with_orders(sale).await?;
    let mut updates = Vec::new();
    let mut holds_outstanding = false;
    for (entry, status) in &entries {
        if entry.result != EntryResult::Won {
            continue;
        }
        match status {
            Some(OrderStatus::Expired | OrderStatus::Cancelled) => updates.push(EntryUpdate {
                id: entry.id.clone(),
                result: EntryResult::Lost,
                order_id: entry.order_id,
            }),
            Some(OrderStatus::Held) | None => holds_outstanding = true,
            Some(OrderStatus::Confirmed) => {}
        }
    }
    let mut sold_out = false;
    for (position, (entry, _)) in entries.iter().enumerate() {
        if entry.result != EntryResult::Waitlisted {
            continue;
        }
        let bought = if sold_out {
            Bought::SoldOut
        } else {
            buy_for(state, entry).await?
        };
        sold_out |= matches!(bought, Bought::SoldOut);
        if matches!(bought, Bought::Won(_)) {
            holds_outstanding = true;
        }
        if !matches!(bought, Bought::Waitlisted | Bought::SoldOut) {
            updates.push(update(entry, bought));
        }
        renew(state, sale, owner, position).await?;
    }
    // Settled once no hold can lapse any more (every winner paid or lost),
    // or the sale ended: the waitlisted lose.
    let spec = state.store().sale(sale).await?;
    let ended = spec.is_some_and(|spec| {
        spec.window_at(state.clock().now()) == stockade_core::sale::Window::Ended
    });
    let settled = ended || !holds_outstanding;
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
    let now = state.clock().now();
    let settled_at = settled.then_some(now);
    if !state
        .store()
        .record_draw(sale, owner, &[], None, &updates, settled_at)
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

/// Renews the lease every [`RENEW_EVERY`] purchases of a long run.
async fn renew(state: &AppState, sale: &SaleId, owner: &str, done: usize) -> Result<(), DrawError> {
    if done % RENEW_EVERY != RENEW_EVERY - 1 {
        return Ok(());
    }
    let now = state.clock().now();
    if state
        .store()
        .claim_draw(sale, owner, now, now + LEASE)
        .await?
    {
        Ok(())
    } else {
        Err(DrawError::LeaseLost)
    }
}
