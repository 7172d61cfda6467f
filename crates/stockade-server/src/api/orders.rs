//! Looking up, cancelling and listing orders.

use std::str::FromStr;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use stockade_core::OrderId;
use utoipa::IntoParams;

use super::auth::require_admin;
use super::dto::{ErrorBody, OrderBody, OrderPage};
use super::error::ApiError;
use super::sales::{sale_id, unknown_sale};
use crate::state::AppState;
use crate::store::releases::Cancel;

fn order_id(raw: &str) -> Result<OrderId, ApiError> {
    OrderId::from_str(raw).map_err(|e| ApiError::invalid("order_id", e.reason))
}

fn unknown_order(id: OrderId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_order",
        format!("there is no order {id}"),
    )
}

/// Reads an order: committed ones from the store, accepted ones still being
/// committed as `pending`.
#[utoipa::path(
    get, path = "/v1/orders/{order_id}", tag = "orders",
    params(("order_id" = String, Path, description = "order id (UUID)")),
    responses(
        (status = 200, body = OrderBody),
        (status = 404, description = "unknown_order, or order_failed: refused by the store, nothing sold", body = ErrorBody),
    )
)]
pub async fn get_order(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<OrderBody>, ApiError> {
    let id = order_id(&raw)?;
    if let Some(order) = state.store().order(id).await? {
        return Ok(Json(OrderBody::from_order(&order)));
    }
    match state.queue().in_flight(id) {
        Some(order) => Ok(Json(OrderBody::with_status(&order, "pending"))),
        None if state.store().is_void(id).await? => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "order_failed",
            format!("order {id} was refused by the order store: nothing was sold"),
        )),
        None => Err(unknown_order(id)),
    }
}

/// Cancels an order: its items go back to stock and to the buyer's
/// allowance. Cancelling again changes nothing.
#[utoipa::path(
    post, path = "/v1/orders/{order_id}/cancel", tag = "orders",
    params(("order_id" = String, Path, description = "order id (UUID)")),
    responses(
        (status = 200, description = "the cancelled order", body = OrderBody),
        (status = 404, description = "unknown_order", body = ErrorBody),
        (status = 409, description = "order_pending: not committed yet, retry shortly", body = ErrorBody),
    )
)]
pub async fn cancel_order(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<OrderBody>, ApiError> {
    let id = order_id(&raw)?;
    let cancel = state
        .store()
        .cancel(id, state.clock().now(), state.engine().is_some())
        .await?;
    match cancel {
        Cancel::Cancelled { order, release } => {
            // The store has cancelled it (the truth) and recorded the
            // release the engine owes; apply it now. If the engine is
            // unreachable, or this process dies, the reconciler applies it.
            if release.is_some() {
                crate::recovery::apply_pending_releases(&state, Some(&order.sale_id)).await;
            }
            // The items are back (in the store, and in the engine unless
            // it was unreachable): this instance stops answering sold_out
            // at once; the others within the rejection ttl.
            state.stock_returned(&order.sale_id);
            Ok(Json(OrderBody::from_order(&order)))
        }
        Cancel::AlreadyCancelled(order) => Ok(Json(OrderBody::from_order(&order))),
        Cancel::Unknown if state.queue().in_flight(id).is_some() => Err(ApiError::new(
            StatusCode::CONFLICT,
            "order_pending",
            "the order is still being committed; retry the cancel shortly",
        )),
        Cancel::Unknown => Err(unknown_order(id)),
    }
}

/// Paging parameters of the order list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Return orders after this order id (from `next_after`).
    pub after: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<u32>,
}

/// Lists a sale's committed orders in creation order (admin), for export
/// and audit.
#[utoipa::path(
    get, path = "/v1/sales/{id}/orders", tag = "orders",
    params(("id" = String, Path, description = "sale id"), PageQuery),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = OrderPage),
        (status = 401, body = ErrorBody),
        (status = 404, description = "unknown_sale", body = ErrorBody),
    )
)]
pub async fn list_orders(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<OrderPage>, ApiError> {
    require_admin(&state, &headers)?;
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
