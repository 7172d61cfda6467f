//! Looking up (and long-polling), confirming, cancelling and listing
//! orders.

use std::str::FromStr;
use std::time::Duration;
use stockade_api::ErrorCode;

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::Value;
use stockade_core::OrderId;
use utoipa::IntoParams;

use super::auth::{Admin, PaymentService};
use super::error::ApiError;
use super::identity::Caller;
use super::json::ApiPath;
use super::order_lookup::{
    Lookup, ensure_own_order, look_up, not_committed_yet, not_in_store, order_failed, unknown_order,
};
use super::sales::{sale_id, unknown_sale};
use crate::releases::items_returned_awaited;
use crate::state::AppState;
use stockade_api::{ErrorBody, OrderBody, OrderPage};
use stockade_store::Stored;
use stockade_store::holds::Confirm;
use stockade_store::releases::Cancel;

/// Parses an order id from the path.
pub fn order_id(raw: &str) -> Result<OrderId, ApiError> {
    OrderId::from_str(raw).map_err(|e| ApiError::invalid("order_id", e.reason))
}

/// The longest `?wait=` of an order lookup, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 30;

/// Options of an order lookup.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Long poll: while the order is `pending`, wait up to this many
    /// seconds (0 to 30) for its commit before answering.
    #[param(minimum = 0, maximum = 30)]
    pub wait: Option<u64>,
}

/// Reads an order: committed ones from the store with their status,
/// accepted ones still being committed as `pending`. With `?wait=N`, a
/// pending order is watched for up to N seconds and answered as soon as it
/// is committed (long poll).
#[utoipa::path(
    get, path = "/v1/orders/{order_id}", tag = "orders",
    params(("order_id" = uuid::Uuid, Path, description = "order id"), WaitQuery),
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 200, body = OrderBody),
        (status = 401, description = "unauthenticated: identity is on and the buyer's JWT is missing or invalid", body = ErrorBody),
        (status = 404, description = "unknown_order (also another buyer's order; for an id minted in the last ten minutes, with Retry-After: 1 and a hint to retry, since another instance may not have committed it yet), or order_failed: refused by the store, nothing sold", body = ErrorBody),
    )
)]
pub async fn get_order(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    caller: Caller,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<OrderBody>, ApiError> {
    let id = order_id(&raw)?;
    let Query(query) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let wait = query.wait.unwrap_or(0);
    if wait > MAX_WAIT_SECONDS {
        return Err(ApiError::invalid(
            "wait",
            format!("must be between 0 and {MAX_WAIT_SECONDS} seconds"),
        ));
    }
    let pending = match look_up(&state, &caller, id).await? {
        Lookup::Committed(order) => return Ok(Json(OrderBody::from_order(&order))),
        Lookup::Pending(order) => order,
        Lookup::Void => return Err(order_failed(id)),
        Lookup::NotYet => return Err(not_committed_yet(id)),
        Lookup::Unknown => return Err(unknown_order(id)),
    };
    if wait == 0 {
        return Ok(Json(OrderBody::pending(&pending)));
    }
    // Pending here: the writer's decision wakes the poll (no store reads
    // meanwhile), then one read tells what the store decided.
    if let Some((_, decided)) = state.queue().watch(id) {
        let deadline = Duration::from_secs(wait);
        if tokio::time::timeout(deadline, decided.wait())
            .await
            .is_err()
        {
            return Ok(Json(OrderBody::pending(&pending)));
        }
    }
    match state.store().stored(id).await? {
        Some(Stored::Order(order)) => Ok(Json(OrderBody::from_order(&order))),
        Some(Stored::Void) => Err(order_failed(id)),
        // The writer stopped before the store took it.
        None => Ok(Json(OrderBody::pending(&pending))),
    }
}

/// Confirms a held order: the payment arrived. This is the payment
/// service's callback: it needs the payments token (`STOCKADE_PAYMENTS_TOKEN`)
/// or the admin token, never a buyer's own credential (a buyer who could
/// confirm would hold items without paying). `held` becomes `confirmed` if
/// its hold has not run out; confirming again, or an order of a sale
/// without holds, answers the confirmed order and changes nothing, so the
/// payment service may retry freely.
#[utoipa::path(
    post, path = "/v1/orders/{order_id}/confirm", tag = "orders",
    params(("order_id" = uuid::Uuid, Path, description = "order id")),
    security(("payments_token" = []), ("admin_token" = [])),
    responses(
        (status = 401, description = "unauthenticated: no credential, or a bearer token that is neither the payments token nor the admin token (without STOCKADE_PAYMENTS_TOKEN only the admin confirms)", body = ErrorBody),
        (status = 403, description = "forbidden: a buyer's JWT; only the payment service (or the admin) confirms", body = ErrorBody),
        (status = 200, description = "the confirmed order", body = OrderBody),
        (status = 404, description = "unknown_order (also another buyer's order; Retry-After: 1 for a recent id, possibly not committed yet by another instance)", body = ErrorBody),
        (status = 409, description = "hold_expired (the hold ran out first: its items went back on sale), order_cancelled, or order_pending (not committed yet, retry shortly)", body = ErrorBody),
    )
)]
pub async fn confirm_order(
    State(state): State<AppState>,
    _payments: PaymentService,
    ApiPath(raw): ApiPath<String>,
) -> Result<Json<OrderBody>, ApiError> {
    let id = order_id(&raw)?;
    // The payment service acts on any order, like the admin.
    let caller = Caller::Admin;
    let confirm = state
        .store()
        .confirm(id, state.clock().now(), state.engine_apart())
        .await?;
    match confirm {
        Confirm::Confirmed(order) => {
            // A paid winner may be what a draw waits for to settle.
            state.draws_woken().wake(&order.sale_id);
            Ok(Json(OrderBody::from_order(&order)))
        }
        Confirm::AlreadyConfirmed(order) => Ok(Json(OrderBody::from_order(&order))),
        Confirm::HoldExpired { order, release } => {
            items_returned_awaited(&state, &order.sale_id, release.is_some()).await;
            Err(ApiError::new(ErrorCode::HoldExpired,
                format!(
                    "the hold of order {id} ran out before it was confirmed; its items went back on sale"
                ),
            )
            .with("order_id", Value::String(id.to_string())))
        }
        Confirm::Cancelled(_) => Err(ApiError::new(
            ErrorCode::OrderCancelled,
            format!("order {id} was cancelled; it cannot be confirmed"),
        )
        .with("order_id", Value::String(id.to_string()))),
        Confirm::Unknown => Err(not_in_store(&state, &caller, id, "confirm").await?),
    }
}

/// Cancels an order: its items go back to stock and to the buyer's
/// allowance. Cancelling again changes nothing.
#[utoipa::path(
    post, path = "/v1/orders/{order_id}/cancel", tag = "orders",
    params(("order_id" = uuid::Uuid, Path, description = "order id")),
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 401, description = "unauthenticated: identity is on and the buyer's JWT is missing or invalid", body = ErrorBody),
        (status = 200, description = "the cancelled order", body = OrderBody),
        (status = 404, description = "unknown_order (Retry-After: 1 for a recent id, possibly not committed yet by another instance)", body = ErrorBody),
        (status = 409, description = "order_pending: not committed yet, retry shortly", body = ErrorBody),
    )
)]
pub async fn cancel_order(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    caller: Caller,
) -> Result<Json<OrderBody>, ApiError> {
    let id = order_id(&raw)?;
    ensure_own_order(&state, &caller, id).await?;
    let cancel = state
        .store()
        .cancel(id, state.clock().now(), state.engine_apart())
        .await?;
    match cancel {
        Cancel::Cancelled { order, release } => {
            // The store has cancelled it (the truth) and recorded the
            // release the engine owes.
            items_returned_awaited(&state, &order.sale_id, release.is_some()).await;
            Ok(Json(OrderBody::from_order(&order)))
        }
        Cancel::AlreadyCancelled(order) => Ok(Json(OrderBody::from_order(&order))),
        Cancel::Unknown => Err(not_in_store(&state, &caller, id, "cancel").await?),
    }
}

/// Paging parameters of the order list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Return orders after this order id (a UUID, from `next_after`);
    /// absent or empty: the first page.
    #[param(
        pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    pub after: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// Lists a sale's committed orders in creation order (admin), for export
/// and audit.
#[utoipa::path(
    get, path = "/v1/sales/{id}/orders", tag = "orders",
    params(
        ("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$"),
        PageQuery,
    ),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = OrderPage),
        (status = 401, description = "missing or wrong admin token", body = ErrorBody),
        (status = 404, description = "unknown_sale", body = ErrorBody),
    )
)]
pub async fn list_orders(
    _admin: Admin,
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<OrderPage>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let sale = sale_id(&raw)?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    // An empty `after` means the first page.
    let after = query
        .after
        .as_deref()
        .filter(|a| !a.is_empty())
        .map(OrderId::from_str)
        .transpose()
        .map_err(|e| ApiError::invalid("after", e.reason))?;
    if state.store().sale(&sale).await?.is_none() {
        return Err(unknown_sale(&sale));
    }
    let orders = state.store().orders_of_sale(&sale, after, limit).await?;
    let next_after = (orders.len() == limit as usize)
        .then(|| orders.last().map(|o| o.id.to_string()))
        .flatten();
    Ok(Json(OrderPage {
        orders: orders.iter().map(OrderBody::from_order).collect(),
        next_after,
    }))
}
