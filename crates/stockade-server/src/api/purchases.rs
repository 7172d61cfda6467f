//! `POST /v1/sales/{id}/purchases`: parses the request into an
//! [`Attempt`], lets the pipeline ([`crate::purchase`]) decide it, and
//! renders the decision or the refusal with its message.

// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use stockade_api::ErrorCode;
use stockade_api::{ErrorBody, OrderBody, OrderView, PurchaseRequest};
use stockade_core::{IdempotencyKey, Purchase, PurchaseOutcome, SaleId, SkuId, UserId, WantedItem};

use super::error::ApiError;
use super::identity::Caller;
use super::json::{ApiJson, ApiPath, answer};
use super::sales::{sale_id, unknown_sale};
use crate::purchase::{Answered, Attempt, Decision, PurchaseError, Purchases};
use crate::state::AppState;
use crate::waiting_room::door::{AdmissionError, AdmissionToken};

/// The header that carries a waiting room's admission. The purchase's
/// headers are named once, not parsed from text on every request.
static ADMISSION_TOKEN: HeaderName = HeaderName::from_static("admission-token");
static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
static PREFER: HeaderName = HeaderName::from_static("prefer");

/// Buys `quantity` items of `sku` (or of the sale's only SKU), or a bundle
/// of `items` taken all or nothing, for `user_id`. Send an
/// `Idempotency-Key` header to make retries safe.
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
        (status = 404, description = "unknown_sale, or unknown_sku (with the `sku`)", body = ErrorBody),
        (status = 409, description = "sold_out (every SKU), insufficient_stock (with the short `sku` and its `remaining`; nothing was taken), limit_exceeded (with `sku` and `already` for the per-SKU limit), not_started, ended, order_failed", body = ErrorBody),
        (status = 422, description = "invalid_request, sku_required (the sale has several SKUs and none was named) or idempotency_key_reused", body = ErrorBody),
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
    let result = async {
        let ApiJson(body) = body?;
        let items = body.wanted();
        let user = caller.buyer(&state, body.user_id).await?;
        let tier = caller.tier(body.tier)?;
        let items = items?;
        let mut attempt = attempt(&id, &headers, user, items)?;
        if let Some(tier) = tier {
            attempt.purchase = attempt.purchase.with_tier(tier);
        }
        Ok::<_, ApiError>(Purchases::new(&state).decide(attempt).await?)
    }
    .await;
    let answered = match &result {
        Ok(decision) => decision.answered(),
        Err(error) => Answered::Refused(error.code()),
    };
    let seconds = started.elapsed().as_secs_f64();
    // Per-sale series only for sales this instance has seen in the store:
    // made-up sale ids must not create series.
    let known = SaleId::new(id.as_str())
        .ok()
        .filter(|sale| state.book().knows(sale));
    let sale = known.as_ref().map(SaleId::as_str);
    crate::metrics::record_purchase(sale, answered, seconds);
    if let Some(sale) = sale {
        state.activity().record_purchase(sale, answered, seconds);
    }
    result.map(render)
}

/// The purchase the request asks for.
fn attempt(
    id: &str,
    headers: &HeaderMap,
    user: UserId,
    items: Vec<WantedItem>,
) -> Result<Attempt, ApiError> {
    let sale = sale_id(id)?;
    let mut purchase = Purchase::of_items(sale, user, items)?;
    if let Some(value) = headers.get(&IDEMPOTENCY_KEY) {
        let text = value
            .to_str()
            .map_err(|_| ApiError::invalid("Idempotency-Key", "must be visible ASCII"))?;
        let key = IdempotencyKey::new(text)
            .map_err(|e| ApiError::invalid("Idempotency-Key", e.reason))?;
        purchase = purchase.with_key(key);
    }
    let admission = match headers.get(&ADMISSION_TOKEN).map(HeaderValue::to_str) {
        None => AdmissionToken::Missing,
        Some(Err(_)) => AdmissionToken::Unreadable,
        Some(Ok(token)) => AdmissionToken::Given(token.to_owned()),
    };
    Ok(Attempt {
        purchase,
        respond_async: prefers_async(headers),
        admission,
    })
}

/// Whether the request asks for an answer before the commit
/// (`Prefer: respond-async`, RFC 7240; other preferences are ignored).
fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all(&PREFER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|preference| preference.trim().eq_ignore_ascii_case("respond-async"))
}

/// The HTTP answer to a decision, rendered from the order as it is (the
/// purchase's answer is the hot path: no copy of it is made to render it).
fn render(decision: Decision) -> Response {
    match decision {
        Decision::Committed { order, remaining } => answer(
            StatusCode::CREATED,
            &OrderView::of(&order).with_remaining(remaining),
        ),
        Decision::Pending {
            order,
            remaining,
            early,
        } => {
            let mut response = pending(OrderView::pending(&order).with_remaining(remaining));
            if early {
                response.headers_mut().insert(
                    "preference-applied",
                    HeaderValue::from_static("respond-async"),
                );
            }
            response
        }
        Decision::Replayed {
            order,
            committed: true,
        } => answer(StatusCode::OK, &OrderView::of(&order)),
        Decision::Replayed {
            order,
            committed: false,
        } => answer(StatusCode::ACCEPTED, &OrderView::pending(&order)),
    }
}

/// 202 for an accepted order that is not committed yet: status `pending`,
/// and `Location` where to follow it.
fn pending(view: OrderView<'_>) -> Response {
    let location = format!("/v1/orders/{}", view.order_id());
    let mut response = answer(StatusCode::ACCEPTED, &view);
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert("location", location);
    }
    response
}

impl From<PurchaseError> for ApiError {
    fn from(error: PurchaseError) -> Self {
        let code = error.code();
        match error {
            PurchaseError::Invalid(error) => error.into(),
            PurchaseError::Refused {
                sale,
                outcome,
                quantity,
            } => refusal(code, &sale, outcome, quantity),
            PurchaseError::UnknownSale(sale) => unknown_sale(&sale),
            PurchaseError::Admission(error) => admission(error),
            PurchaseError::Overloaded { limit } => Self::new(
                code,
                format!(
                    "this instance already has {limit} purchases in flight (--max-purchases-in-flight); nothing was sold; retry shortly"
                ),
            ),
            PurchaseError::Rebuilding => Self::new(
                code,
                "the stock engine is being rebuilt from the order store; nothing was sold; retry shortly",
            ),
            PurchaseError::StoreRefused => Self::new(
                code,
                "the order store refused this order (another instance had moved the sale on, or the engine was out of line and is being rebuilt); nothing was sold; retry shortly",
            ),
            PurchaseError::OrderFailed(order_id) => Self::new(
                code,
                "the order made with this Idempotency-Key was not recorded and nothing was sold; retry with a new key",
            )
            .with("order_id", Value::String(order_id.to_string())),
            PurchaseError::KeyReused => Self::new(
                code,
                "this Idempotency-Key was used for a different purchase; use a new key",
            ),
            PurchaseError::EngineUnavailable => Self::new(
                code,
                "the stock engine is unavailable; retry shortly (with the same Idempotency-Key)",
            ),
            PurchaseError::Engine(error) => error.into(),
            PurchaseError::Store(error) => error.into(),
            PurchaseError::Kept(order_id) => Self::new(
                code,
                "the order store is unavailable; the order is kept and will be committed when it returns: check it with GET /v1/orders/{order_id}",
            )
            .with("order_id", Value::String(order_id.to_string())),
            PurchaseError::NotDurable => Self::new(
                code,
                "the order could not be recorded durably; retry with the same Idempotency-Key",
            ),
            PurchaseError::ReplayNotCommitted => Self::new(
                code,
                "the order made with this Idempotency-Key is not committed yet; retry with the same key shortly",
            ),
            PurchaseError::RunStopped => Self::new(
                code,
                "an earlier purchase of this run failed, so this one was not made; nothing was sold; retry shortly",
            ),
            PurchaseError::Internal(message) => Self::internal(message),
        }
    }
}

/// The answer to a refusal by the sale, the same whether the engine, the
/// store or this instance's own knowledge refused it: a message, and the
/// SKU (and what it has left) when one SKU is the reason.
fn refusal(code: ErrorCode, sale: &SaleId, outcome: PurchaseOutcome, quantity: u32) -> ApiError {
    let sku_and = |sku: &SkuId, field: &'static str, value: u32| {
        vec![
            ("sku", Value::String(sku.to_string())),
            (field, Value::from(value)),
        ]
    };
    let (message, fields) = match &outcome {
        PurchaseOutcome::InsufficientStock { sku, remaining } => (
            format!(
                "only {remaining} of SKU {sku} left, fewer than asked for; nothing was taken (a purchase of several items is all or nothing)"
            ),
            sku_and(sku, "remaining", *remaining),
        ),
        PurchaseOutcome::LimitExceeded { already, sku: None } => (
            format!(
                "buyer already holds {already} of this sale; the per-user limit does not allow {quantity} more"
            ),
            Vec::new(),
        ),
        PurchaseOutcome::LimitExceeded {
            already,
            sku: Some(sku),
        } => (
            format!(
                "buyer already holds {already} of SKU {sku}; the per-SKU limit does not allow that many more"
            ),
            sku_and(sku, "already", *already),
        ),
        PurchaseOutcome::UnknownSku { sku } => (
            format!("sale {sale} has no SKU {sku}; GET /v1/sales/{sale} lists its skus"),
            vec![("sku", Value::String(sku.to_string()))],
        ),
        PurchaseOutcome::SkuRequired => (
            format!(
                "sale {sale} has several SKUs: name one with sku, or several with items; GET /v1/sales/{sale} lists them"
            ),
            Vec::new(),
        ),
        PurchaseOutcome::NotStarted => (format!("sale {sale} has not started"), Vec::new()),
        PurchaseOutcome::Ended => (format!("sale {sale} has ended"), Vec::new()),
        _ => (format!("sale {sale} is sold out"), Vec::new()),
    };
    fields
        .into_iter()
        .fold(ApiError::new(code, message), |error, (field, value)| {
            error.with(field, value)
        })
}

/// The answer to a buyer the waiting room turned away.
fn admission(error: AdmissionError) -> ApiError {
    let code = error.code();
    match error {
        AdmissionError::Required { sale, why } => ApiError::new(
            code,
            format!(
                "{why}: sale {sale} has a waiting room; join it with POST /v1/sales/{sale}/queue, poll GET /v1/queue/{{ticket}} until admitted, and send its admission_token in the Admission-Token header"
            ),
        ),
        AdmissionError::Spent { sale, why } => ApiError::new(
            code,
            format!(
                "{why}: an admission buys once (a refused purchase leaves it usable); to buy again, join the queue with POST /v1/sales/{sale}/queue once this admission has expired"
            ),
        ),
        AdmissionError::UnknownSale(sale) => unknown_sale(&sale),
        AdmissionError::DrawSale(sale) => ApiError::new(
            code,
            format!(
                "sale {sale} allocates its stock by a draw, not to the fastest: enter it with POST /v1/sales/{sale}/entries while entries are open, and read the result from GET /v1/sales/{sale}/entries/me"
            ),
        ),
        AdmissionError::Queue(error) => error.into(),
        AdmissionError::Store(error) => error.into(),
    }
}
