//! `POST /v1/sales/{id}/purchases`: the purchase path of DESIGN.md.
//!
//! route (the sale's epoch and authority) → engine gate under that epoch
//! (one atomic step, order in the outbox) → group-commit queue → the
//! store's verdict on this order → 201 only once it is committed. Past the
//! commit deadline the answer is 202 `pending` with the order id. When the
//! store cannot be reached the order stays in the outbox and the reconciler
//! commits it later (503 with the order id). When the store refuses the
//! order (decided under an epoch that is no longer the sale's, or by an
//! engine out of line), nothing was sold: 503, retry (409 `order_failed`
//! for a keyed purchase, whose key stays bound to the failed order).
//!
//! Sales under the fallback authority, and every sale with
//! `--engine postgres`, are decided by the store itself in one transaction
//! that also commits the order.
//!
//! Before any of that, a purchase this instance already knows will be
//! refused (sold out, not started, ended, unknown sale: see
//! [`crate::rejections`]) is answered at once, with the same answer the
//! engine would give, at no cost to the engine or the store. Every other
//! purchase takes one of the instance's places in flight
//! ([`crate::shedding`]) or is answered 503 `overloaded` at once.

use std::sync::Arc;
use std::time::Instant;
use stockade_api::ErrorCode;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use stockade_core::{
    Engine, IdempotencyKey, Order, OrderId, Purchase, PurchaseOutcome, SaleId, UserId,
};

use super::error::ApiError;
use super::identity::Caller;
use super::json::{ApiJson, ApiPath};
use super::sales::{sale_id, unknown_sale};
use crate::purchase::Answered;
use crate::recovery::{FallbackMove, move_to_fallback, request_rebuild};
use crate::routing::Route;
use crate::state::AppState;
use stockade_api::{ErrorBody, OrderBody, PurchaseRequest};
use stockade_store::Stored;
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::authority::Authority;

/// Buys `quantity` items for `user_id`. Send an `Idempotency-Key` header to
/// make retries safe.
#[utoipa::path(
    post, path = "/v1/sales/{id}/purchases", tag = "purchases",
    params(
        ("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 128 bytes; a replay returns the same order", min_length = 1, max_length = 128),
        ("Prefer" = Option<String>, Header, description = "`respond-async`: answer 202 `pending` as soon as the engine accepted the order, without waiting for its commit; poll `GET /v1/orders/{order_id}?wait=N`"),
        ("Admission-Token" = Option<String>, Header, description = "required on a sale with a waiting room: the admission_token of the buyer's admitted queue ticket"),
    ),
    request_body = PurchaseRequest,
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 201, description = "purchased and committed: status `confirmed`, or `held` until `expires_at` for a sale with a payment hold", body = OrderBody),
        (status = 200, description = "replay of an idempotency key: the original order with its current status", body = OrderBody),
        (status = 202, description = "accepted, not committed yet (`Prefer: respond-async`, or the commit deadline passed): status `pending`; `Location` names the order", body = OrderBody),
        (status = 401, description = "unauthenticated: identity is on and the buyer's JWT is missing or invalid", body = ErrorBody),
        (status = 403, description = "user_mismatch: user_id names another buyer than the JWT's sub", body = ErrorBody),
        (status = 403, description = "admission_required: the sale has a waiting room and the Admission-Token is missing, expired, forged, or issued to another buyer or sale; admission_spent: the token has bought already (an admission buys once; a refused purchase leaves it usable), or another purchase with it is being decided", body = ErrorBody),
        (status = 404, description = "unknown_sale", body = ErrorBody),
        (status = 409, description = "sold_out, insufficient_stock, limit_exceeded, not_started, ended, order_failed", body = ErrorBody),
        (status = 422, description = "invalid_request or idempotency_key_reused", body = ErrorBody),
        (status = 503, description = "engine_unavailable, store_unavailable (with order_id: kept, committed later), rebuilding or overloaded (nothing sold); see Retry-After", body = ErrorBody,
            headers(("Retry-After" = u32, description = "seconds to wait"))),
    )
)]
pub async fn purchase(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    caller: Caller,
    body: Result<ApiJson<PurchaseRequest>, ApiError>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    // A body that is not a valid purchase is answered (and counted) here
    // too, under its error code; so is a buyer turned away at the door
    // (who buys, and their rate limit), before any other work.
    let result = match body {
        Ok(ApiJson(body)) => match caller.buyer(&state, body.user_id).await {
            Ok(user) => decide(&state, &id, &headers, user, body.quantity).await,
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    let outcome = match &result {
        Ok((PurchaseOutcome::Duplicate { .. }, _)) => Answered::Duplicate,
        // Sold, but not committed yet (the commit deadline passed, or the
        // buyer asked for an early answer).
        Ok((_, response)) if response.status() == StatusCode::ACCEPTED => Answered::Pending,
        Ok(_) => Answered::Purchased,
        Err(error) => Answered::Refused(error.code()),
    };
    let seconds = started.elapsed().as_secs_f64();
    // Per-sale series only for sales this instance has seen in the store:
    // made-up sale ids must not create series.
    let known = SaleId::new(id.as_str())
        .ok()
        .filter(|sale| state.routing().get(sale).is_some());
    let sale = known.as_ref().map(SaleId::as_str);
    crate::metrics::record_purchase(sale, outcome, seconds);
    if let Some(sale) = sale {
        crate::activity::board().record_purchase(sale, outcome, seconds);
    }
    result.map(|(_, response)| response)
}

async fn decide(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
    user: UserId,
    quantity: u32,
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
    let respond_async = prefers_async(headers);
    let mut purchase = Purchase::from_parts(sale.clone(), user, quantity)?;
    if let Some(key) = key {
        purchase = purchase.with_key(key);
    }
    // Without a fallback nothing but the rebuild can sell it: answer before
    // the door and the shedder do any work (with one, see
    // `while_rebuilding`).
    if !state.has_fallback() && state.routing().is_rebuilding(&sale) {
        return Err(rebuilding());
    }
    let keyed = purchase.idempotency_key().is_some();
    if let Some(outcome) = state.rejections().answer(&sale, keyed, state.clock().now()) {
        metrics::counter!("stockade_rejections_cached_total", "reason" => outcome.label())
            .increment(1);
        return Err(rejection(&purchase, outcome));
    }
    // Reserved for this purchase: spent if it names an order, released if
    // it is refused or fails (see `waiting_room::door`).
    let mut admission =
        crate::waiting_room::door::check_admission(state, &purchase, headers).await?;
    // Held until the answer: the engine call, the commit and its wait.
    let _in_flight = state.shedder().admit()?;
    admission.arm();
    let decided = decide_admitted(state, sale, purchase, respond_async).await;
    admission.settle(names_an_order(&decided)).await;
    decided
}

/// Whether a purchase's answer names an order the buyer has (201, 202,
/// 503 `store_unavailable` with its id): what spends an admission.
fn names_an_order(decided: &Result<(PurchaseOutcome, Response), ApiError>) -> bool {
    match decided {
        Ok((PurchaseOutcome::Purchased { .. }, _)) => true,
        Ok(_) => false,
        // Kept in the outbox, committed later.
        Err(error) => {
            error.code() == ErrorCode::StoreUnavailable && error.field("order_id").is_some()
        }
    }
}

/// [`decide`] once the purchase passed the door and took its place in
/// flight.
async fn decide_admitted(
    state: &AppState,
    sale: SaleId,
    mut purchase: Purchase,
    respond_async: bool,
) -> Result<(PurchaseOutcome, Response), ApiError> {
    let mut route = known_route(state, &sale).await?;
    if route.authority == Authority::Primary && state.routing().is_rebuilding(&sale) {
        route = while_rebuilding(state, &sale, route).await?;
    }
    let mut refreshed = false;
    // A route goes stale when another instance moves the sale; the answers
    // say so, and the purchase is tried once more on the fresh route.
    for _ in 0..3 {
        purchase = purchase.at_epoch(route.epoch);
        let ticket = state.rejections().ticket(&sale);
        // When the order was made: the instant the store records for it,
        // and so the one its answer shows.
        let (outcome, decider, accepted_at) = match decider(state, route) {
            Some(engine) => {
                let Some(outcome) = engine_gate(state, engine, &purchase).await? else {
                    // The breaker is open and there is a fallback: move.
                    route = to_fallback(state, &sale, route, engine_unavailable).await?;
                    continue;
                };
                (outcome, Decider::Engine, state.clock().now())
            }
            None => {
                let started = Instant::now();
                let now = state.clock().now();
                let outcome = state
                    .store()
                    .purchase(&purchase, OrderId::generate(), now)
                    .await?;
                metrics::histogram!("stockade_engine_seconds", "op" => "store_purchase")
                    .record(started.elapsed().as_secs_f64());
                (outcome, Decider::Store, now)
            }
        };
        state.rejections().learn(&sale, ticket, &outcome);
        match outcome {
            PurchaseOutcome::WrongEpoch { engine } => {
                let current = fresh_route(state, &sale).await?;
                if current != route && !refreshed {
                    refreshed = true;
                    route = current;
                    continue;
                }
                // The store agrees with this instance: the engine is the
                // one out of line (closed for a rebuild elsewhere, or an
                // old copy). Rebuild it; the lock makes one instance do it.
                tracing::info!(%sale, route = %route.epoch, %engine, "engine holds another epoch");
                request_rebuild(state, &sale, route.epoch, "wrong_epoch");
                return Err(rebuilding());
            }
            PurchaseOutcome::UnknownSale => {
                state.routing().forget(&sale);
                let read = state.rejections().unknown_ticket();
                if decider == Decider::Engine && state.store().sale(&sale).await?.is_some() {
                    // The engine lost its data (Redis restarted empty).
                    request_rebuild(state, &sale, route.epoch, "engine_lost_sale");
                    return Err(rebuilding());
                }
                state.rejections().learn_unknown(&sale, read);
                return Err(unknown_sale(&sale));
            }
            outcome => {
                let response = answer(
                    state,
                    &purchase,
                    route,
                    outcome,
                    decider,
                    accepted_at,
                    respond_async,
                )
                .await?;
                return Ok((outcome, response));
            }
        }
    }
    Err(rebuilding())
}

/// A sale this instance is rebuilding: its purchases wait (503
/// `rebuilding`) unless there is a fallback and no instance has reached
/// the engine lately (the rebuild cannot reach Redis): the fallback then
/// sells it.
async fn while_rebuilding(
    state: &AppState,
    sale: &SaleId,
    route: Route,
) -> Result<Route, ApiError> {
    if !state.has_fallback() {
        return Err(rebuilding());
    }
    to_fallback(state, sale, route, rebuilding).await
}

/// Moves the sale to the fallback (see [`move_to_fallback`]); while some
/// instance still reaches the engine, the sale stays and the answer is
/// `refused()`.
async fn to_fallback(
    state: &AppState,
    sale: &SaleId,
    route: Route,
    refused: fn() -> ApiError,
) -> Result<Route, ApiError> {
    match move_to_fallback(state, sale, route.epoch).await? {
        FallbackMove::Routed(route) => Ok(route),
        FallbackMove::Refused => Err(refused()),
        FallbackMove::UnknownSale => Err(unknown_sale(sale)),
    }
}

/// 503: the engine is unreachable from this instance and the sale cannot
/// move to a fallback (there is none, or other instances still reach the
/// engine).
fn engine_unavailable() -> ApiError {
    ApiError::new(
        ErrorCode::EngineUnavailable,
        "the stock engine is unavailable; retry shortly (with the same Idempotency-Key)",
    )
}

/// Who decided a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decider {
    /// The engine: the order still has to be committed.
    Engine,
    /// The store: the order is committed already.
    Store,
}

/// The engine that decides the sale's purchases, or None when the store
/// does (fallback authority, or `--engine postgres`).
fn decider(state: &AppState, route: Route) -> Option<&Arc<dyn Engine>> {
    match route.authority {
        Authority::Primary => state.engine(),
        Authority::Fallback => None,
    }
}

/// The engine's gate behind the circuit breaker. None: the breaker is open
/// and the sale should move to the fallback.
async fn engine_gate(
    state: &AppState,
    engine: &Arc<dyn Engine>,
    purchase: &Purchase,
) -> Result<Option<PurchaseOutcome>, ApiError> {
    // Fail fast while the engine is known to be unreachable.
    if !state.breaker().allow(Instant::now()) {
        if state.has_fallback() {
            return Ok(None);
        }
        return Err(engine_unavailable());
    }
    let started = Instant::now();
    match engine.purchase(purchase).await {
        Ok(outcome) => {
            state.breaker().succeeded();
            metrics::histogram!("stockade_engine_seconds", "op" => "purchase")
                .record(started.elapsed().as_secs_f64());
            Ok(Some(outcome))
        }
        Err(error) => {
            if error.is_retryable() {
                state.breaker().failed(Instant::now());
                // Another instance may move the sale meanwhile: read the
                // route again before trusting the engine.
                state.routing().forget_primaries();
            } else {
                // It answered: it is reachable.
                state.breaker().succeeded();
            }
            Err(error.into())
        }
    }
}

/// The sale's route as this instance knows it, read from the store the
/// first time (with the sale's spec, which answers its window from then on).
async fn known_route(state: &AppState, sale: &SaleId) -> Result<Route, ApiError> {
    match state.routing().get(sale) {
        Some(route) if state.rejections().knows(sale) => Ok(route),
        _ => fresh_route(state, sale).await,
    }
}

/// The sale's route as the store has it now. A sale the store does not
/// have is remembered as unknown for a while.
async fn fresh_route(state: &AppState, sale: &SaleId) -> Result<Route, ApiError> {
    let read = state.rejections().unknown_ticket();
    let Some(current) = state.store().sale_state(sale).await? else {
        state.rejections().learn_unknown(sale, read);
        return Err(unknown_sale(sale));
    };
    state.rejections().learn_spec(&current.spec);
    let route = Route {
        epoch: current.epoch,
        authority: current.authority,
    };
    state.routing().learn(sale, route);
    Ok(route)
}

/// The HTTP answer to a decided purchase.
async fn answer(
    state: &AppState,
    purchase: &Purchase,
    route: Route,
    outcome: PurchaseOutcome,
    decider: Decider,
    accepted_at: chrono::DateTime<chrono::Utc>,
    respond_async: bool,
) -> Result<Response, ApiError> {
    let sale = purchase.sale_id();
    match outcome {
        PurchaseOutcome::Purchased {
            order_id,
            remaining,
        } => {
            metrics::gauge!("stockade_sale_remaining", "sale" => sale.to_string())
                .set(f64::from(remaining));
            // The store applies the same hold when it commits the order.
            let order = Order::accepted(purchase, order_id, accepted_at)
                .under_hold(state.rejections().hold(sale));
            let mut body = OrderBody::from_order(&order);
            body.remaining = Some(remaining);
            match decider {
                // Committed already: the preference for an early answer
                // has nothing to save.
                Decider::Store => Ok((StatusCode::CREATED, Json(body)).into_response()),
                Decider::Engine if respond_async => {
                    // Queued for the writer, and durable in the engine's
                    // outbox (or, on the memory engine, in the intake
                    // journal) whatever happens to this process.
                    drop(state.queue().submit(order.clone()).await);
                    keep_named(state, &order).await?;
                    let mut response = pending(body);
                    response.headers_mut().insert(
                        "preference-applied",
                        HeaderValue::from_static("respond-async"),
                    );
                    Ok(response)
                }
                Decider::Engine => commit(state, purchase, order, body, route).await,
            }
        }
        PurchaseOutcome::Duplicate { order_id } => replay(state, purchase, order_id).await,
        PurchaseOutcome::UnknownSale | PurchaseOutcome::WrongEpoch { .. } => Err(rebuilding()),
        rejected => Err(rejection(purchase, rejected)),
    }
}

/// The answer to a refused purchase, the same whether the engine, the
/// store or this instance's own knowledge refused it.
fn rejection(purchase: &Purchase, outcome: PurchaseOutcome) -> ApiError {
    let sale = purchase.sale_id();
    let conflict = |code: ErrorCode, message: String| ApiError::new(code, message);
    match outcome {
        PurchaseOutcome::SoldOut => {
            conflict(ErrorCode::SoldOut, format!("sale {sale} is sold out"))
        }
        PurchaseOutcome::InsufficientStock { remaining } => conflict(
            ErrorCode::InsufficientStock,
            format!(
                "only {remaining} left, fewer than the {} asked for",
                purchase.quantity()
            ),
        ),
        PurchaseOutcome::LimitExceeded { already } => conflict(
            ErrorCode::LimitExceeded,
            format!(
                "buyer already holds {already} of this sale; the per-user limit does not allow {} more",
                purchase.quantity()
            ),
        ),
        PurchaseOutcome::NotStarted => conflict(
            ErrorCode::NotStarted,
            format!("sale {sale} has not started"),
        ),
        PurchaseOutcome::Ended => conflict(ErrorCode::Ended, format!("sale {sale} has ended")),
        PurchaseOutcome::UnknownSale => unknown_sale(sale),
        PurchaseOutcome::Purchased { .. }
        | PurchaseOutcome::Duplicate { .. }
        | PurchaseOutcome::WrongEpoch { .. } => {
            ApiError::internal(format!("{} is not a rejection", outcome.label()))
        }
    }
}

/// 503 while the engine is being rebuilt from the store.
pub fn rebuilding() -> ApiError {
    ApiError::new(
        ErrorCode::Rebuilding,
        "the stock engine is being rebuilt from the order store; nothing was sold; retry shortly",
    )
}

/// Hands the accepted order to the writer and answers with the store's
/// verdict ([`store_verdict`]).
async fn commit(
    state: &AppState,
    purchase: &Purchase,
    order: Order,
    body: OrderBody,
    route: Route,
) -> Result<Response, ApiError> {
    match store_verdict(state, &order).await {
        Awaited::Committed => Ok((StatusCode::CREATED, Json(body)).into_response()),
        Awaited::Void(reason) => voided(state, purchase, &order, reason, route).await,
        // The store could not be reached: the order stays in the engine's
        // outbox, and the reconciler commits it (or voids it) later.
        Awaited::StoreDown => {
            keep_named(state, &order).await?;
            Err(ApiError::new(
                ErrorCode::StoreUnavailable,
                "the order store is unavailable; the order is kept and will be committed when it returns: check it with GET /v1/orders/{order_id}")
            .with("order_id", Value::String(order.id.to_string())))
        }
        Awaited::Deadline => {
            keep_named(state, &order).await?;
            Ok(pending(body))
        }
    }
}

/// What the store made of an order handed to the writer, as far as the
/// commit deadline lets one wait.
enum Awaited {
    Committed,
    Void(VoidReason),
    /// The store could not be reached (or the writer stopped).
    StoreDown,
    /// No verdict within the commit deadline.
    Deadline,
}

/// Hands `order` to the writer and waits for the store's verdict until the
/// commit deadline, which starts before the order is queued (a full queue
/// counts against it).
async fn store_verdict(state: &AppState, order: &Order) -> Awaited {
    let deadline = tokio::time::Instant::now() + state.commit_deadline();
    let verdict = state.queue().submit(order.clone()).await;
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
async fn keep_named(state: &AppState, order: &Order) -> Result<(), ApiError> {
    let Some(journal) = state.journal() else {
        return Ok(());
    };
    journal.record(order).await.map_err(|error| {
        tracing::error!(%error, order = %order.id, "cannot journal an order before naming it");
        ApiError::new(
            ErrorCode::StoreUnavailable,
            "the order could not be recorded durably; retry with the same Idempotency-Key",
        )
    })
}

/// Whether the request asks for an answer before the commit
/// (`Prefer: respond-async`, RFC 7240; other preferences are ignored).
fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|preference| preference.trim().eq_ignore_ascii_case("respond-async"))
}

/// 202 for an accepted order that is not committed yet: status `pending`,
/// and `Location` where to follow it.
fn pending(mut body: OrderBody) -> Response {
    body.status = stockade_api::OrderStatus::Pending;
    let location = format!("/v1/orders/{}", body.order_id);
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert("location", location);
    }
    response
}

/// The store refused the order: nothing was sold.
async fn voided(
    state: &AppState,
    purchase: &Purchase,
    order: &Order,
    reason: VoidReason,
    route: Route,
) -> Result<Response, ApiError> {
    let sale = purchase.sale_id();
    match reason {
        // The buyer's key names an order the engine had forgotten (one the
        // store voided after the engine's last rebuild read the orders, as
        // when instances briefly write to two Redis primaries during a
        // Sentinel failover), and the engine took stock for this refused
        // order: it is out of line, like an oversell.
        VoidReason::KeyTaken { original } => {
            request_rebuild(state, sale, route.epoch, "store_refused");
            replay(state, purchase, original).await
        }
        // Another authority decides the sale now.
        VoidReason::StaleEpoch { .. } => {
            state.routing().forget(sale);
            Err(refused(purchase, order))
        }
        // The engine sold what the store does not have: it is out of line.
        VoidReason::Oversold | VoidReason::OverLimit => {
            request_rebuild(state, sale, route.epoch, "store_refused");
            Err(refused(purchase, order))
        }
        VoidReason::UnknownSale | VoidReason::Earlier => Err(refused(purchase, order)),
    }
}

/// The answer to an order the store refused: nothing was sold. A keyed
/// purchase's key stays bound to the failed order (a replay gets the same
/// answer), so the buyer retries with a new key; without a key, a plain
/// retry will do.
fn refused(purchase: &Purchase, order: &Order) -> ApiError {
    if purchase.idempotency_key().is_some() {
        order_failed(order.id)
    } else {
        ApiError::new(
            ErrorCode::Rebuilding,
            "the order store refused this order (another instance had moved the sale on, or the engine was out of line and is being rebuilt); nothing was sold; retry shortly",
        )
    }
}

/// 409 `order_failed`: the order a key names was refused; nothing was sold.
fn order_failed(order_id: OrderId) -> ApiError {
    ApiError::new(ErrorCode::OrderFailed,
        "the order made with this Idempotency-Key was not recorded and nothing was sold; retry with a new key",
    )
    .with("order_id", Value::String(order_id.to_string()))
}

/// A replayed idempotency key: answer with the original order if the
/// request is the same, 422 if the key is reused for something else.
///
/// Committed: 200. Refused by the store: 409 `order_failed`. Being
/// committed by this instance's writer: 202 (a move to the fallback waits
/// for it). Only in the engine's outbox (its first request was never
/// answered with it, or another instance is committing it): committed here
/// first, and answered with the store's verdict, because an outbox entry of
/// an epoch the sale has left may be refused when it is drained.
async fn replay(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
) -> Result<Response, ApiError> {
    let committed = |order: Order| (order, StatusCode::OK);
    let (order, status) = match state.store().stored(order_id).await? {
        Some(Stored::Order(order)) => committed(order),
        Some(Stored::Void) => return Err(order_failed(order_id)),
        None => {
            if let Some(order) = state.queue().in_flight(order_id) {
                (order, StatusCode::ACCEPTED)
            } else if let Some(order) = outbox_entry(state, purchase, order_id).await? {
                same_purchase(purchase, &order)?;
                commit_found(state, order).await?
            } else {
                // Committed (and gone from the outbox) by another instance
                // between the looks above, or never taken.
                match state.store().stored(order_id).await? {
                    Some(Stored::Order(order)) => committed(order),
                    _ => return Err(order_failed(order_id)),
                }
            }
        }
    };
    same_purchase(purchase, &order)?;
    let body = if status == StatusCode::ACCEPTED {
        OrderBody::pending(&order)
    } else {
        OrderBody::from_order(&order)
    };
    Ok((status, Json(body)).into_response())
}

/// 422 unless `order` is the purchase its key is replayed with.
fn same_purchase(purchase: &Purchase, order: &Order) -> Result<(), ApiError> {
    if order.user_id != *purchase.user_id() || order.quantity != purchase.quantity() {
        return Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was used for a different purchase; use a new key",
        ));
    }
    Ok(())
}

/// The order `order_id` in the engine's outbox of the purchase's sale.
async fn outbox_entry(
    state: &AppState,
    purchase: &Purchase,
    order_id: OrderId,
) -> Result<Option<Order>, ApiError> {
    let Some(engine) = state.engine() else {
        return Ok(None);
    };
    Ok(engine
        .outbox(purchase.sale_id())
        .await?
        .into_iter()
        .find(|o| o.id == order_id))
}

/// Commits an order found in the engine's outbox and answers with the
/// store's verdict: 200 once committed, 409 `order_failed` if refused, 503
/// (without naming it) if the store does not decide within the commit
/// deadline; a retry with the same key finds it again.
async fn commit_found(state: &AppState, order: Order) -> Result<(Order, StatusCode), ApiError> {
    match store_verdict(state, &order).await {
        Awaited::Committed => Ok((order, StatusCode::OK)),
        Awaited::Void(_) => Err(order_failed(order.id)),
        Awaited::StoreDown | Awaited::Deadline => Err(ApiError::new(
            ErrorCode::StoreUnavailable,
            "the order made with this Idempotency-Key is not committed yet; retry with the same key shortly",
        )),
    }
}
