//! `POST /v1/sales/{id}/purchases`: the purchase path of DESIGN.md.
//!
//! engine gate (one atomic step, order in the outbox) → group-commit queue
//! → 201 only after the batch committed. Past the commit deadline the answer
//! is 202 `pending` with the order id; a failed commit releases the
//! reservation and answers 503 (or, when the store cannot even say whether
//! the order is there, keeps it in the outbox for the reconciler and says
//! so).

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use stockade_core::{
    IdempotencyKey, Order, OrderId, OrderStatus, Purchase, PurchaseOutcome, UserId,
};

use super::dto::{ErrorBody, OrderBody, PurchaseRequest};
use super::error::ApiError;
use super::json::ApiJson;
use super::sales::{sale_id, unknown_sale};
use crate::state::AppState;

/// Buys `quantity` items for `user_id`. Send an `Idempotency-Key` header to
/// make retries safe.
#[utoipa::path(
    post, path = "/v1/sales/{id}/purchases", tag = "purchases",
    params(
        ("id" = String, Path, description = "sale id"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 128 bytes; a replay returns the same order"),
    ),
    request_body = PurchaseRequest,
    responses(
        (status = 201, description = "purchased and committed", body = OrderBody),
        (status = 200, description = "replay of an idempotency key: the original order", body = OrderBody),
        (status = 202, description = "accepted, commit not confirmed within the deadline: status pending", body = OrderBody),
        (status = 404, description = "unknown_sale", body = ErrorBody),
        (status = 409, description = "sold_out, insufficient_stock, limit_exceeded, not_started, ended, order_failed", body = ErrorBody),
        (status = 422, description = "invalid_request or idempotency_key_reused", body = ErrorBody),
        (status = 503, description = "engine_unavailable, store_unavailable or rebuilding; see Retry-After", body = ErrorBody),
    )
)]
pub async fn purchase(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<PurchaseRequest>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let result = decide(&state, &id, &headers, body).await;
    let label = match &result {
        Ok((outcome, _)) => outcome.label(),
        Err(_) => "error",
    };
    metrics::counter!("stockade_purchases_total", "outcome" => label).increment(1);
    metrics::histogram!("stockade_purchase_seconds").record(started.elapsed().as_secs_f64());
    result.map(|(_, response)| response)
}

async fn decide(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
    body: PurchaseRequest,
) -> Result<(PurchaseOutcome, Response), ApiError> {
    let sale = sale_id(id)?;
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => {
            let text = value
                .to_str()
                .map_err(|_| ApiError::invalid("Idempotency-Key", "must be visible ASCII"))?;
            Some(
                IdempotencyKey::new(text)
                    .map_err(|e| ApiError::invalid("Idempotency-Key", e.reason))?,
            )
        }
    };
    let user = UserId::new(body.user_id)?;
    let mut purchase = Purchase::from_parts(sale.clone(), user, body.quantity)?;
    if let Some(key) = key {
        purchase = purchase.with_key(key);
    }
    // Held until this purchase has answered, so a rebuild never races it.
    let Some(_selling) = state.selling() else {
        return Err(rebuilding());
    };
    // Fail fast while the engine is known to be unreachable.
    if !state.breaker().allow(Instant::now()) {
        return Err(ApiError::unavailable(
            "engine_unavailable",
            "the stock engine is unavailable; retry shortly (with the same Idempotency-Key)",
            1,
        ));
    }
    let engine_started = Instant::now();
    let outcome = match state.engine().purchase(&purchase).await {
        Ok(outcome) => {
            state.breaker().succeeded();
            outcome
        }
        Err(error) => {
            if error.is_retryable() {
                state.breaker().failed(Instant::now());
            }
            return Err(error.into());
        }
    };
    metrics::histogram!("stockade_engine_seconds", "op" => "purchase")
        .record(engine_started.elapsed().as_secs_f64());
    let rejected = |code: &'static str, message: String| {
        Err(ApiError::new(StatusCode::CONFLICT, code, message))
    };
    let response = match outcome {
        PurchaseOutcome::Purchased {
            order_id,
            remaining,
        } => {
            metrics::gauge!("stockade_sale_remaining", "sale" => sale.to_string())
                .set(f64::from(remaining));
            commit(state, &purchase, order_id, remaining).await?
        }
        PurchaseOutcome::Duplicate { order_id } => replay(state, &purchase, order_id).await?,
        PurchaseOutcome::SoldOut => {
            return rejected("sold_out", format!("sale {sale} is sold out"));
        }
        PurchaseOutcome::InsufficientStock { remaining } => {
            return rejected(
                "insufficient_stock",
                format!(
                    "only {remaining} left, fewer than the {} asked for",
                    purchase.quantity()
                ),
            );
        }
        PurchaseOutcome::LimitExceeded { already } => {
            return rejected(
                "limit_exceeded",
                format!(
                    "buyer already holds {already} of this sale; the per-user limit does not allow {} more",
                    purchase.quantity()
                ),
            );
        }
        PurchaseOutcome::NotStarted => {
            return rejected("not_started", format!("sale {sale} has not started"));
        }
        PurchaseOutcome::Ended => return rejected("ended", format!("sale {sale} has ended")),
        PurchaseOutcome::UnknownSale => {
            // The engine may have lost its data (Redis restarted): if the
            // store knows the sale, rebuild before selling again.
            if state.store().sale(&sale).await?.is_some() {
                state.request_recovery();
                return Err(rebuilding());
            }
            return Err(unknown_sale(&sale));
        }
    };
    Ok((outcome, response))
}

/// 503 while the engine is being rebuilt from the store.
pub fn rebuilding() -> ApiError {
    ApiError::unavailable(
        "rebuilding",
        "the stock engine is being rebuilt from the order store; retry shortly",
        1,
    )
}

/// Hands the accepted order to the writer and answers once it committed.
async fn commit(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
    remaining: u32,
) -> Result<Response, ApiError> {
    // Payment holds are not implemented yet: every order is confirmed.
    let order = Order {
        id: order_id,
        sale_id: purchase.sale_id().clone(),
        user_id: purchase.user_id().clone(),
        quantity: purchase.quantity(),
        idempotency_key: purchase.idempotency_key().cloned(),
        status: OrderStatus::Confirmed,
        created_at: state.clock().now(),
    };
    let committed = state.queue().submit(order.clone()).await;
    let mut body = OrderBody::from_order(&order);
    body.remaining = Some(remaining);
    match tokio::time::timeout(state.commit_deadline(), committed).await {
        Ok(Ok(Ok(()))) => Ok((StatusCode::CREATED, Json(body)).into_response()),
        Ok(Ok(Err(_))) | Ok(Err(_)) => commit_failed(state, &order, body).await,
        Err(_deadline) => {
            body.status = "pending".into();
            Ok((StatusCode::ACCEPTED, Json(body)).into_response())
        }
    }
}

/// The batch failed. If the store says the order is not there, release the
/// reservation: nothing was sold. If the store cannot say, the order stays
/// in the outbox and the reconciler commits it once the store is back.
async fn commit_failed(
    state: &AppState,
    order: &Order,
    body: OrderBody,
) -> Result<Response, ApiError> {
    match state.store().order(order.id).await {
        Ok(Some(_)) => Ok((StatusCode::CREATED, Json(body)).into_response()),
        Ok(None) => {
            state.engine().release(&order.sale_id, order.id).await?;
            Err(ApiError::unavailable(
                "store_unavailable",
                "the order could not be recorded, so nothing was sold; retry shortly",
                1,
            ))
        }
        Err(_) => Err(ApiError::unavailable(
            "store_unavailable",
            "the order store is unavailable; the order is kept and will be committed when it returns: check it with GET /v1/orders/{order_id}",
            1,
        )
        .with("order_id", Value::String(order.id.to_string()))),
    }
}

/// A replayed idempotency key: answer with the original order if the
/// request is the same, 422 if the key is reused for something else.
async fn replay(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
) -> Result<Response, ApiError> {
    let (order, status) = if let Some(order) = state.store().order(order_id).await? {
        (order, StatusCode::OK)
    } else if let Some(order) = state.queue().in_flight(order_id) {
        (order, StatusCode::ACCEPTED)
    } else if let Some(order) = state
        .engine()
        .outbox(purchase.sale_id())
        .await?
        .into_iter()
        .find(|o| o.id == order_id)
    {
        (order, StatusCode::ACCEPTED)
    } else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "order_failed",
            "the order made with this Idempotency-Key was not recorded (the store was unavailable) and nothing was sold; retry with a new key",
        )
        .with("order_id", Value::String(order_id.to_string())));
    };
    if order.user_id != *purchase.user_id() || order.quantity != purchase.quantity() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different purchase; use a new key",
        ));
    }
    let body = if status == StatusCode::ACCEPTED {
        OrderBody::with_status(&order, "pending")
    } else {
        OrderBody::from_order(&order)
    };
    Ok((status, Json(body)).into_response())
}
