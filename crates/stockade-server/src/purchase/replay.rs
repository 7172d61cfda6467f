//! A replayed idempotency key: the original order if the request is the
//! same, `idempotency_key_reused` if the key is reused for something else.
//!
//! Committed: 200. Refused by the store: 409 `order_failed`. Being
//! committed by this instance's writer: 202 (a move to the fallback waits
//! for it). Only in the engine's outbox (its first request was never
//! answered with it, or another instance is committing it): committed here
//! first, and answered with the store's verdict, because an outbox entry of
//! an epoch the sale has left may be refused when it is drained.
//!
//! Nowhere this instance can see (another instance's writer holds it and
//! the outbox read here lacks it: around a Sentinel failover the key was
//! read from one primary and the outbox from another, or the primary that
//! had the entry lost it): it may still commit, so 503, retry with the key,
//! until the store has it or no longer accepts the epoch it was decided
//! under (then it never will: 409 `order_failed`).

use stockade_core::{Item, Order, OrderId, Purchase, PurchaseOutcome};
use stockade_store::Stored;
use tracing::Span;

use super::pipeline::terms_of;
use super::settle::{Awaited, store_verdict};
use super::{Decision, PurchaseError};
use crate::state::AppState;

/// The answer to a purchase whose key names `order_id`; a commit it makes
/// links to `request`, the request's span.
pub(super) async fn replay(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
    request: &Span,
) -> Result<Decision, PurchaseError> {
    let (order, committed) = match state.store().stored(order_id).await? {
        Some(Stored::Order(order)) => (order, true),
        Some(Stored::Void) => return Err(PurchaseError::OrderFailed(order_id)),
        None => {
            if let Some(order) = state.queue().in_flight(order_id) {
                (order, false)
            } else if let Some(order) = outbox_entry(state, purchase, order_id).await? {
                same_purchase(state, purchase, &order).await?;
                (commit_found(state, order, request).await?, true)
            } else {
                (unseen(state, purchase, order_id).await?, true)
            }
        }
    };
    same_purchase(state, purchase, &order).await?;
    Ok(Decision::Replayed { order, committed })
}

/// The answer to a purchase refused with `outcome` by an engine that can
/// lag the store (Redis). A keyed one is a replay if the store has an
/// order under its key: that engine can lack the key (a failover to a
/// replica without its write, or a primary the failover deposed still
/// serving), and a buyer whose answer was lost must not read `sold_out`
/// for an order they have. One indexed store read per such refusal;
/// unkeyed ones cost nothing more.
pub(super) async fn refused(
    state: &AppState,
    purchase: &Purchase,
    outcome: PurchaseOutcome,
    request: &Span,
) -> Result<Decision, PurchaseError> {
    if let Some(key) = purchase.idempotency_key()
        && let Some(order_id) = state
            .store()
            .key_owner(purchase.sale_id(), purchase.user_id(), key)
            .await?
    {
        return replay(state, purchase, order_id, request).await;
    }
    Err(PurchaseError::refused(
        purchase.sale_id(),
        purchase.quantity(),
        outcome,
    ))
}

/// An order its key names that neither the store, this instance's writer
/// nor the engine's outbox held at the looks above: the order if the store
/// has it now (another instance committed it meanwhile), `order_failed` if
/// it never will, `ReplayNotCommitted` while it still may.
///
/// The engine named it under the purchase's epoch, so it was decided under
/// that epoch (a rebuild binds keys only to orders the store has). The
/// sale's epoch is read before the order: once the store no longer accepts
/// that epoch, every later commit of the order is void, and an earlier one
/// is in the read that follows.
async fn unseen(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
) -> Result<Order, PurchaseError> {
    let settled = state
        .store()
        .sale_state(purchase.sale_id())
        .await?
        .is_none_or(|sale| !sale.accepts(purchase.epoch()));
    match state.store().stored(order_id).await? {
        Some(Stored::Order(order)) => Ok(order),
        Some(Stored::Void) => Err(PurchaseError::OrderFailed(order_id)),
        None if settled => Err(PurchaseError::OrderFailed(order_id)),
        None => Err(PurchaseError::ReplayNotCommitted),
    }
}

/// `KeyReused` unless `order` is what the purchase its key is replayed
/// with would make: the same buyer, the same quantity of each SKU (in any
/// order) and the same tier, as the sale's spec resolves them (a tier the
/// sale does not name is no tier, as when buying).
async fn same_purchase(
    state: &AppState,
    purchase: &Purchase,
    order: &Order,
) -> Result<(), PurchaseError> {
    if order.user_id != *purchase.user_id() {
        return Err(PurchaseError::KeyReused);
    }
    let Some(terms) = terms_of(state, purchase).await? else {
        return Err(PurchaseError::KeyReused);
    };
    let sorted = |items: &[Item]| {
        let mut items = items.to_vec();
        items.sort_by(|a, b| a.sku.cmp(&b.sku));
        items
    };
    if terms.tier != order.tier || sorted(&terms.items) != sorted(&order.items) {
        return Err(PurchaseError::KeyReused);
    }
    Ok(())
}

/// The order `order_id` in the engine's outbox of the purchase's sale.
async fn outbox_entry(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
) -> Result<Option<Order>, PurchaseError> {
    Ok(state
        .engine()
        .outbox(purchase.sale_id())
        .await?
        .into_iter()
        .find(|o| o.id == order_id))
}

/// Commits an order found in the engine's outbox: the order once
/// committed, `order_failed` if refused, `ReplayNotCommitted` (without
/// naming it) if the store does not decide within the commit deadline; a
/// retry with the same key finds it again.
async fn commit_found(
    state: &AppState,
    order: Order,
    request: &Span,
) -> Result<Order, PurchaseError> {
    match store_verdict(state, &order, request).await {
        Awaited::Committed => Ok(order),
        Awaited::Void(_) => Err(PurchaseError::OrderFailed(order.id)),
        Awaited::StoreDown | Awaited::Deadline => Err(PurchaseError::ReplayNotCommitted),
    }
}
