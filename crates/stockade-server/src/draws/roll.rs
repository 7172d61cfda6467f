//! A roll-down pass of a drawn sale, judged from the store.
//!
//! - Winners whose order lapsed (hold expired, cancelled, or voided by the
//!   store) lose.
//! - The waitlisted are tried in the draw's order, but only those the
//!   store's stock fits (its sold counts, as it would judge their orders):
//!   a pass buys for as many entries as stock came back, never for the
//!   whole list.
//! - The draw settles (the waitlisted lose, the draw is closed) only when
//!   the store says nothing more can roll down: every winner's order is
//!   confirmed or lapsed, no release the store recorded is still owed to
//!   the engine, and the store's stock fits no waitlisted entry. An engine
//!   refusal proves nothing: an engine that has not caught up with the
//!   store (a release on its way, a rebuild due) answers `sold_out` while
//!   the store has the items, and the entry waits for the next pass.
//!
//! A pass reads the winners' orders once, at its start: a hold that
//! expires while it runs is seen by the next pass, which the expiry itself
//! brings about (see [`super::run_forever`]).

use std::collections::HashSet;

use stockade_core::draw::{EntryId, EntryResult};
use stockade_core::rule;
use stockade_core::sale::Window;
use stockade_core::{OrderStatus, SaleId};
use stockade_store::draws::{Entry, EntryOrder, EntryUpdate};

use super::buy::{Bought, buy_in_order};
use super::run::{DrawError, update};
use crate::state::AppState;

/// One roll-down pass of the drawn sale `sale`, as the holder `owner` of
/// its lease.
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
    // purchases below. The counts are read after the orders too: a lapse
    // seen above has its items counted back.
    let releases_owed = !state.store().pending_releases_of(sale, 1).await?.is_empty();
    let store_state = state
        .store()
        .sale_state(sale)
        .await?
        .ok_or_else(|| DrawError::Corrupt(format!("the draw's sale {sale} left the store")))?;
    let spec = &store_state.spec;
    let now = state.clock().now();
    // The waitlisted the store's stock fits, in the draw's order, each
    // counted as sold before the next is judged.
    let mut counts = store_state.counts.clone();
    let fitting: Vec<&Entry> = entries
        .iter()
        .map(|(entry, _)| entry)
        .filter(|entry| entry.result == EntryResult::Waitlisted)
        .filter(|entry| {
            let tier = rule::tier(spec, entry.tier.as_ref());
            let Some(items) = rule::resolve_order(spec, &entry.items) else {
                return false;
            };
            let fits = rule::stock(spec, now, tier, &counts, &items).is_ok();
            if fits {
                counts.take(tier, &items);
            }
            fits
        })
        .collect();
    let bought = buy_in_order(state, sale, owner, &fitting).await?;
    // The store had the stock and the engine refused it: the engine has
    // not caught up; a later pass tries again.
    let mut engine_behind = false;
    for (entry, bought) in fitting.iter().zip(bought) {
        match bought {
            Bought::Waitlisted | Bought::SoldOut => engine_behind = true,
            Bought::Won(_) => {
                holds_outstanding = true;
                updates.push(update(entry, bought));
            }
            Bought::Lost => updates.push(update(entry, bought)),
        }
    }
    let ended = spec.window_at(now) == Window::Ended;
    let settled = ended || !(holds_outstanding || releases_owed || engine_behind);
    if settled {
        let rolled: HashSet<EntryId> = updates.iter().map(|u| u.id.clone()).collect();
        for (entry, _) in &entries {
            if entry.result == EntryResult::Waitlisted && !rolled.contains(&entry.id) {
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
    tracing::debug!(%sale, tried = fitting.len(), updates = updates.len(), settled, "roll-down pass");
    if settled {
        tracing::info!(%sale, "draw settled");
    }
    Ok(())
}
