//! The waiting room's routes: joining a sale's queue, polling a ticket,
//! and the waiting page that does both in a browser.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use stockade_api::ErrorCode;
use stockade_core::SaleId;

use super::error::ApiError;
use super::identity::Caller;
use super::json::{ApiJson, ApiPath, answer};
use super::sales::{sale_id, unknown_sale};
use crate::state::AppState;
use crate::waiting_room::{
    CloseReason, JoinOutcome, QueueError, RoomConfig, RoomInfo, RoomLookup, TicketId, TicketState,
    TicketView,
};
use stockade_api::{ErrorBody, JoinQueue, QueueTicket, TicketStatus};

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> Self {
        match error {
            QueueError::Unavailable(_) => {
                tracing::warn!(%error, "waiting room unavailable");
                Self::new(
                    ErrorCode::QueueUnavailable,
                    "the waiting room is unavailable; retry shortly (your ticket is kept)",
                )
            }
            QueueError::Failed(_) => Self::internal(error),
        }
    }
}

fn closed(sale: &SaleId, reason: CloseReason) -> ApiError {
    let message = match reason {
        CloseReason::Ended => format!("sale {sale} has ended: its queue is closed"),
        _ => format!("sale {sale} is sold out: its queue is closed"),
    };
    let code = match reason {
        CloseReason::Ended => ErrorCode::Ended,
        _ => ErrorCode::SoldOut,
    };
    ApiError::new(code, message)
}

/// The sale's room; 404 `unknown_sale`, or 409 `no_waiting_room` (the sale
/// exists, and is bought without a queue).
async fn room_of(state: &AppState, sale: &SaleId) -> Result<std::sync::Arc<RoomInfo>, ApiError> {
    match state
        .waiting_rooms()
        .lookup(state.book(), state.store(), sale)
        .await?
    {
        RoomLookup::Room(room) => Ok(room),
        RoomLookup::NoRoom | RoomLookup::Draw => Err(ApiError::new(
            ErrorCode::NoWaitingRoom,
            format!(
                "sale {sale} has no waiting room: buy directly with POST /v1/sales/{sale}/purchases"
            ),
        )),
        RoomLookup::UnknownSale => Err(unknown_sale(sale)),
    }
}

/// Joins the sale's queue. The same buyer again gets the same ticket
/// while it is waiting or admitted.
#[utoipa::path(
    post, path = "/v1/sales/{id}/queue", tag = "waiting room",
    params(("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")),
    request_body = JoinQueue,
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 401, description = "unauthenticated: identity is on and the buyer's JWT is missing or invalid", body = ErrorBody),
        (status = 403, description = "user_mismatch: user_id names another buyer than the JWT's sub", body = ErrorBody),
        (status = 201, description = "a new ticket", body = QueueTicket),
        (status = 200, description = "the buyer's ticket (joined before)", body = QueueTicket),
        (status = 404, description = "unknown_sale", body = ErrorBody),
        (status = 400, description = "invalid_json", body = ErrorBody),
        (status = 409, description = "sold_out or ended: the queue is closed; no_waiting_room: the sale has none, buy directly", body = ErrorBody),
        (status = 413, description = "payload_too_large", body = ErrorBody),
        (status = 415, description = "unsupported_media_type: send JSON", body = ErrorBody),
        (status = 422, description = "invalid_request", body = ErrorBody),
        (status = 503, description = "queue_unavailable or store_unavailable: retry (a ticket is kept)", body = ErrorBody),
    )
)]
pub async fn join_queue(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    caller: Caller,
    ApiJson(body): ApiJson<JoinQueue>,
) -> Result<Response, ApiError> {
    // The door, as for a purchase: who joins, and their rate limit.
    let user = caller.buyer(&state, body.user_id).await?;
    let sale = sale_id(&id)?;
    let room = room_of(&state, &sale).await?;
    let now = state.clock().now();
    if room.spec.ends_at().is_some_and(|at| now >= at) {
        return Err(closed(&sale, CloseReason::Ended));
    }
    let prequeue = room.spec.starts_at().is_some_and(|at| now < at);
    let rooms = state.waiting_rooms();
    let fresh = rooms.fresh_ticket(&sale, &user, now.timestamp_millis(), prequeue);
    let outcome = rooms
        .backend()
        .join(&fresh, now.timestamp_millis(), prequeue)
        .await?;
    match outcome {
        JoinOutcome::Closed(reason) => Err(closed(&sale, reason)),
        JoinOutcome::Joined { view, created } => {
            crate::metrics::count_join(created);
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(answer(status, &ticket_body(&state, &room, &view, now)))
        }
    }
}

/// A ticket: where it stands, and its admission token once admitted.
#[utoipa::path(
    get, path = "/v1/queue/{ticket}", tag = "waiting room",
    params(("ticket" = String, Path, description = "the ticket the join answered: `<sale id>.<place>.<buyer>.<mac>`", min_length = 54, max_length = 286, pattern = r"^[A-Za-z0-9_-]{1,64}\.[0-9a-f]{16}\.[A-Za-z0-9_-]{2,171}\.[0-9a-f]{32}$")),
    responses(
        (status = 200, body = QueueTicket),
        (status = 404, description = "unknown_ticket", body = ErrorBody),
        (status = 422, description = "invalid_request: not a ticket", body = ErrorBody),
        (status = 503, description = "queue_unavailable or store_unavailable: retry", body = ErrorBody),
    )
)]
pub async fn poll_ticket(
    State(state): State<AppState>,
    ApiPath(raw): ApiPath<String>,
) -> Result<Response, ApiError> {
    let ticket = TicketId::parse(&raw)?;
    let unknown = || {
        ApiError::new(
            ErrorCode::UnknownTicket,
            format!(
                "there is no queue ticket {ticket}; join again with POST /v1/sales/{}/queue",
                ticket.sale()
            ),
        )
    };
    // Only a ticket this service minted is looked up (and put back at its
    // place if Redis lost its queue).
    if !state.waiting_rooms().signer().ticket_is_genuine(&ticket) {
        return Err(unknown());
    }
    let RoomLookup::Room(room) = state
        .waiting_rooms()
        .lookup(state.book(), state.store(), &ticket.sale())
        .await?
    else {
        return Err(unknown());
    };
    let now = state.clock().now();
    let view = state
        .waiting_rooms()
        .backend()
        .ticket(&ticket, now.timestamp_millis(), true)
        .await?
        .ok_or_else(unknown)?;
    Ok(answer(
        StatusCode::OK,
        &ticket_body(&state, &room, &view, now),
    ))
}

fn ticket_body(
    state: &AppState,
    room: &RoomInfo,
    view: &TicketView,
    now: DateTime<Utc>,
) -> QueueTicket {
    let sale = room.spec.id();
    let mut body = QueueTicket {
        ticket: view.ticket.to_string(),
        sale_id: sale.to_string(),
        status: TicketStatus::Waiting,
        position: None,
        estimated_wait_seconds: None,
        admission_token: None,
        admission_expires_at: None,
        closed_reason: None,
    };
    match view.state {
        TicketState::Waiting { position } => {
            body.status = TicketStatus::Waiting;
            body.position = Some(position);
            body.estimated_wait_seconds = Some(estimated_wait(room, position, now));
        }
        TicketState::Admitted { until_ms } => {
            body.status = TicketStatus::Admitted;
            body.admission_token = Some(state.waiting_rooms().signer().sign(
                sale,
                &view.user,
                &view.ticket,
                until_ms,
            ));
            body.admission_expires_at = DateTime::from_timestamp_millis(until_ms);
        }
        TicketState::Closed(reason) => {
            body.status = TicketStatus::Closed;
            body.closed_reason = Some(reason);
        }
    }
    body
}

/// Time to the start, plus the buyers ahead at the room's rate.
fn estimated_wait(room: &RoomInfo, position: u64, now: DateTime<Utc>) -> u64 {
    let to_start = room
        .spec
        .starts_at()
        .map_or(0, |at| (at - now).num_seconds().max(0) as u64);
    let RoomConfig {
        admit_per_second, ..
    } = room.config;
    to_start + position.saturating_sub(1) / u64::from(admit_per_second)
}

const PAGE: &str = include_str!("../../assets/queue.html");
const SCRIPT: &str = include_str!("../../assets/queue.js");
const STYLE: &str = include_str!("../../assets/queue.css");

/// The waiting page of a sale: joins its queue, shows the position, and
/// buys once admitted. Plain HTML, CSS and JavaScript, no build step.
#[utoipa::path(
    get, path = "/queue/{id}", tag = "waiting room",
    params(("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")),
    responses(
        (status = 200, description = "the waiting page", content_type = "text/html"),
        (status = 422, description = "invalid_request: not a sale id", body = ErrorBody),
    )
)]
pub async fn waiting_page(ApiPath(id): ApiPath<String>) -> Result<Html<String>, ApiError> {
    // The id is placed in the page only once it is known to be plain
    // `A-Za-z0-9_-`: nothing to escape.
    let sale = sale_id(&id)?;
    Ok(Html(PAGE.replace("{{sale_id}}", sale.as_str())))
}

/// The page's script.
pub async fn waiting_page_script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

/// The page's style sheet.
pub async fn waiting_page_style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}
