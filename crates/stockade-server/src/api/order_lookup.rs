//! Where an order id stands, for every route on one order (read, confirm,
//! cancel), at a bounded cost: this instance's in-flight set (no I/O),
//! then one indexed store read. No outbox is ever scanned on a request, so
//! a made-up id costs one store read, whatever the number of open sales.
//!
//! An order another instance accepted and has not committed yet is in that
//! instance's set and in Redis's outbox only: here it reads as not
//! committed *yet* when its id was minted in the last ten minutes (404
//! `unknown_order` with `Retry-After: 1` and a hint to retry, on a read, a
//! confirm or a cancel), and as plainly unknown after that.
//! See `docs/consistency.md` (asynchronous intake).

use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
use stockade_api::ErrorCode;
use stockade_core::{Order, OrderId};

use super::error::ApiError;
use super::identity::Caller;
use crate::state::AppState;
use stockade_store::Stored;

/// How far back an order id's timestamp may lie for a miss to read as "not
/// committed yet" rather than unknown: an accepted order is committed
/// within moments, by the reconciler after its grace period, or once the
/// store is back.
const RECENT: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// What is known of an order id.
pub(super) enum Lookup {
    /// Committed: its stored status.
    Committed(Order),
    /// Accepted by this instance's engine call, not committed yet.
    Pending(Order),
    /// Refused by the store: nothing was sold.
    Void,
    /// Not in the store, minted recently: possibly another instance's
    /// order on its way to the store.
    NotYet,
    /// Never seen.
    Unknown,
}

/// Where an order is, as `caller` may know it. Another buyer's order is
/// `Unknown`, exactly as a missing one, so order ids reveal nothing; a
/// void order sold nothing and its buyer heard so when buying, so with
/// identity on only the admin learns that it failed.
pub(super) async fn look_up(
    state: &AppState,
    caller: &Caller,
    id: OrderId,
) -> Result<Lookup, ApiError> {
    Ok(match found(state, id).await? {
        Lookup::Committed(ref order) | Lookup::Pending(ref order)
            if !caller.may_access(&order.user_id) =>
        {
            Lookup::Unknown
        }
        Lookup::Void if matches!(caller, Caller::Buyer(_)) => Lookup::Unknown,
        found => found,
    })
}

/// [`look_up`] for anyone: the in-flight set, then one store read. (An
/// order leaves the set only once the store has decided it, so a miss in
/// the set followed by a miss in the store is not a race.)
async fn found(state: &AppState, id: OrderId) -> Result<Lookup, ApiError> {
    if let Some(order) = state.queue().in_flight(id) {
        return Ok(Lookup::Pending(order));
    }
    Ok(match state.store().stored(id).await? {
        Some(Stored::Order(order)) => Lookup::Committed(order),
        Some(Stored::Void) => Lookup::Void,
        None if minted_recently(state, id) => Lookup::NotYet,
        None => Lookup::Unknown,
    })
}

/// Whether the id's UUIDv7 timestamp lies within [`RECENT`] of now.
fn minted_recently(state: &AppState, id: OrderId) -> bool {
    let now = state.clock().now();
    id.as_uuid()
        .get_timestamp()
        .map(|t| t.to_unix())
        .and_then(|(secs, nanos)| chrono::DateTime::from_timestamp(secs as i64, nanos))
        .is_some_and(|at| (now - at).abs() <= RECENT)
}

/// 404 `unknown_order`.
pub(super) fn unknown_order(id: OrderId) -> ApiError {
    ApiError::new(ErrorCode::UnknownOrder, format!("there is no order {id}"))
}

/// 404 `unknown_order` for a recent id: it may be an order another
/// instance accepted moments ago, not committed yet.
pub(super) fn not_committed_yet(id: OrderId) -> ApiError {
    ApiError::new(
        ErrorCode::UnknownOrder,
        format!(
            "there is no committed order {id}; if it was just accepted (202 pending) by another \
             instance, it is not committed yet: retry in a second, or long-poll the instance that \
             accepted it"
        ),
    )
    .with_header(RETRY_AFTER, HeaderValue::from_static("1"))
}

/// 404 `order_failed`: the store refused it (a lookup finds no order,
/// so 404 rather than the 409 of a purchase replay).
pub(super) fn order_failed(id: OrderId) -> ApiError {
    ApiError::new(
        ErrorCode::OrderFailed,
        format!("order {id} was refused by the order store: nothing was sold"),
    )
    .with_status(StatusCode::NOT_FOUND)
}

/// 409 `order_pending`: not committed yet.
pub(super) fn order_pending(what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::OrderPending,
        format!("the order is still being committed; retry the {what} shortly"),
    )
}

/// Why `what` (a confirm, a cancel) found no committed order `id`.
pub(super) async fn not_in_store(
    state: &AppState,
    caller: &Caller,
    id: OrderId,
    what: &str,
) -> Result<ApiError, ApiError> {
    Ok(match look_up(state, caller, id).await? {
        // Committed just now: the next try finds it.
        Lookup::Pending(_) | Lookup::Committed(_) => order_pending(what),
        Lookup::NotYet => not_committed_yet(id),
        Lookup::Void => order_failed(id),
        Lookup::Unknown => unknown_order(id),
    })
}

/// A signed-in buyer confirms and cancels only their own orders; others
/// are told the order does not exist. (The check costs a read, so callers
/// who may act on any order skip it.)
pub(super) async fn ensure_own_order(
    state: &AppState,
    caller: &Caller,
    id: OrderId,
) -> Result<(), ApiError> {
    if !matches!(caller, Caller::Buyer(_)) {
        return Ok(());
    }
    match look_up(state, caller, id).await? {
        Lookup::Unknown => Err(unknown_order(id)),
        Lookup::NotYet => Err(not_committed_yet(id)),
        _ => Ok(()),
    }
}
