//! An order the engine accepted, from the writer to the store's verdict:
//! 201 only once it is committed, 202 past the commit deadline (or early,
//! at the buyer's request), kept when the store is down, and nothing sold
//! when the store refuses it.

use stockade_core::{Order, Purchase};
use stockade_store::arbiter::{Verdict, VoidReason};
use tracing::Span;

use super::{Decision, PurchaseError, replay};
use crate::recovery::request_rebuild;
use crate::sale_book::Route;
use crate::state::AppState;

/// An order the engine accepted, to be committed.
pub(super) struct Accepted {
    /// The order, as the store will record it.
    pub order: Order,
    /// Items left right after it.
    pub remaining: u32,
    /// The route it was decided under.
    pub route: Route,
    /// The buyer asked for an answer before the commit.
    pub early: bool,
}

/// Hands the accepted order to the writer and decides with the store's
/// verdict ([`store_verdict`]), or at once when the buyer asked for an
/// early answer. The writer's commit links to `request`, the request's
/// span; the verdict is recorded on the current (`settle`) span.
pub(super) async fn settle(
    state: &AppState,
    purchase: &Purchase,
    accepted: Accepted,
    request: &Span,
) -> Result<Decision, PurchaseError> {
    let Accepted {
        order,
        remaining,
        route,
        early,
    } = accepted;
    if early {
        // Queued for the writer, and durable in the engine's outbox (or,
        // on the memory engine, in the intake journal) whatever happens to
        // this process.
        drop(
            state
                .queue()
                .submit_from(order.clone(), request.clone())
                .await,
        );
        keep_named(state, &order).await?;
        return Ok(Decision::Pending {
            order,
            remaining,
            early: true,
        });
    }
    let awaited = store_verdict(state, &order, request).await;
    Span::current().record("verdict", awaited.label());
    match awaited {
        Awaited::Committed => Ok(Decision::Committed { order, remaining }),
        Awaited::Void(reason) => voided(state, purchase, &order, reason, route, request).await,
        // The store could not be reached: the order stays in the engine's
        // outbox, and the reconciler commits it (or voids it) later.
        Awaited::StoreDown => {
            keep_named(state, &order).await?;
            Err(PurchaseError::Kept(order.id))
        }
        Awaited::Deadline => {
            keep_named(state, &order).await?;
            Ok(Decision::Pending {
                order,
                remaining,
                early: false,
            })
        }
    }
}

/// What the store made of an order handed to the writer, as far as the
/// commit deadline lets one wait.
pub(super) enum Awaited {
    Committed,
    Void(VoidReason),
    /// The store could not be reached (or the writer stopped).
    StoreDown,
    /// No verdict within the commit deadline.
    Deadline,
}

impl Awaited {
    /// A short name, for traces.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Void(reason) => reason.label(),
            Self::StoreDown => "store_down",
            Self::Deadline => "deadline",
        }
    }
}

/// Hands `order` to the writer and waits for the store's verdict until the
/// commit deadline, which starts before the order is queued (a full queue
/// counts against it). The commit links to `request`.
pub(super) async fn store_verdict(state: &AppState, order: &Order, request: &Span) -> Awaited {
    let deadline = tokio::time::Instant::now() + state.commit_deadline();
    let verdict = state
        .queue()
        .submit_from(order.clone(), request.clone())
        .await;
    match tokio::time::timeout_at(deadline, verdict).await {
        Ok(Ok(Ok(Verdict::Committed))) => Awaited::Committed,
        Ok(Ok(Ok(Verdict::Void(reason)))) => Awaited::Void(reason),
        Ok(Ok(Err(_)) | Err(_)) => Awaited::StoreDown,
        Err(_) => Awaited::Deadline,
    }
}

/// Makes an order about to be named before its commit survive this
/// process: on the memory engine, whose outbox dies with it, the order is
/// synced to the intake journal first (on Redis it is in Redis's outbox
/// already). If the journal fails, the order is not named: 503 without
/// an id (it may still commit; a keyed retry finds it).
async fn keep_named(state: &AppState, order: &Order) -> Result<(), PurchaseError> {
    let Some(journal) = state.journal() else {
        return Ok(());
    };
    journal.record(order).await.map_err(|error| {
        tracing::error!(%error, order = %order.id, "cannot journal an order before naming it");
        PurchaseError::NotDurable
    })
}

/// The store refused the order: nothing was sold.
async fn voided(
    state: &AppState,
    purchase: &Purchase,
    order: &Order,
    reason: VoidReason,
    route: Route,
    request: &Span,
) -> Result<Decision, PurchaseError> {
    let sale = purchase.sale_id();
    match reason {
        // The buyer's key names an order the engine had forgotten (one the
        // store voided after the engine's last rebuild read the orders, as
        // when instances briefly write to two Redis primaries during a
        // Sentinel failover), and the engine took stock for this refused
        // order: it is out of line, like an oversell.
        VoidReason::KeyTaken { original } => {
            request_rebuild(state, sale, route.epoch, "store_refused");
            replay::replay(state, purchase, original, request).await
        }
        // Another authority decides the sale now.
        VoidReason::StaleEpoch { .. } => {
            state.book().forget_route(sale);
            Err(refused(purchase, order))
        }
        // The engine sold what the store does not have: it is out of line.
        VoidReason::Oversold | VoidReason::OverLimit | VoidReason::UnknownSku => {
            request_rebuild(state, sale, route.epoch, "store_refused");
            Err(refused(purchase, order))
        }
        VoidReason::UnknownSale | VoidReason::Earlier => Err(refused(purchase, order)),
    }
}

/// An order the store refused: nothing was sold. A keyed purchase's key
/// stays bound to the failed order (a replay gets the same answer), so the
/// buyer retries with a new key; without a key, a plain retry will do.
fn refused(purchase: &Purchase, order: &Order) -> PurchaseError {
    if purchase.idempotency_key().is_some() {
        PurchaseError::OrderFailed(order.id)
    } else {
        PurchaseError::StoreRefused
    }
}
