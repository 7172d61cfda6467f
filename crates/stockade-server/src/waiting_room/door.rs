//! The door of the purchase path: a sale with a waiting room sells only to
//! buyers who present their `Admission-Token`, and each token buys once
//! (see the [module](super) docs).
//!
//! Passing the door reserves the token's spend record (one atomic step on
//! the queue backend, shared by every instance). The purchase then
//! [`Admission::settle`]s it: spent if it named an order, released if it
//! was refused or failed. A token already reserved or spent is 403
//! `admission_spent`, except for a retry with the `Idempotency-Key` of the
//! purchase that spent it (the engine answers that with the same order).

use std::sync::Arc;
use stockade_api::ErrorCode;

use axum::http::HeaderMap;
use stockade_core::Purchase;

use super::{OUTSTANDING_GRACE, QueueBackend, RoomLookup, TicketId};
use crate::api::error::ApiError;
use crate::state::AppState;

/// The header that carries the token.
pub const ADMISSION_TOKEN: &str = "admission-token";

/// An admission a purchase passed the door with. [`Admission::arm`] it
/// once the purchase goes to be decided, and [`Admission::settle`] it with
/// the answer. Dropped unsettled: released if it was never armed (503
/// `overloaded`), spent if it was (the request was abandoned while being
/// decided: the engine may have sold, so fewer purchases, never more).
#[must_use = "arm it when the purchase goes to be decided, and settle it with the answer"]
pub struct Admission {
    reserved: Option<Reservation>,
    armed: bool,
}

/// A reserved spend record.
struct Reservation {
    backend: Arc<dyn QueueBackend>,
    ticket: TicketId,
    held: String,
    spent: String,
}

impl Admission {
    /// No admission to spend: a sale without a waiting room, or a retry of
    /// the purchase that spent it.
    fn free() -> Self {
        Self {
            reserved: None,
            armed: false,
        }
    }

    /// The purchase goes to the engine or the store now.
    pub fn arm(&mut self) {
        self.armed = true;
    }

    /// The purchase is answered: `sold` if it named an order (the token is
    /// spent), else the token buys again. Settled before the answer goes
    /// out, so a buyer who retries a refused purchase at once finds the
    /// token free.
    pub async fn settle(mut self, sold: bool) {
        if let Some(reservation) = self.reserved.take() {
            reservation.settle(sold).await;
        }
    }
}

impl Reservation {
    /// Should the backend fail, the reservation stays until the token
    /// expires: fewer purchases, never more.
    async fn settle(self, sold: bool) {
        let spent = sold.then_some(self.spent.as_str());
        if let Err(error) = self
            .backend
            .settle_admission(&self.ticket, &self.held, spent)
            .await
        {
            tracing::warn!(%error, ticket = %self.ticket, sold, "cannot settle the admission");
        }
        if sold {
            // No longer outstanding: off the answer's path.
            tokio::spawn(async move {
                if let Err(error) = self.backend.consume(&self.ticket).await {
                    tracing::warn!(%error, ticket = %self.ticket, "cannot mark the admission used");
                }
            });
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(reservation) = self.reserved.take() {
            let sold = self.armed;
            tokio::spawn(reservation.settle(sold));
        }
    }
}

/// The spend record of a purchase with idempotency key `key` (empty: none).
fn spent_record(key: &str) -> String {
    format!("spent:{key}")
}

/// Passes purchases of sales without a waiting room, and purchases with a
/// valid token for this buyer and sale that no other purchase has spent or
/// is spending; anything else is 403 `admission_required` or
/// `admission_spent`. Costs no engine or store work (the room is read from
/// the store once per sale) and one backend step to reserve the token.
pub async fn check_admission(
    state: &AppState,
    purchase: &Purchase,
    headers: &HeaderMap,
) -> Result<Admission, ApiError> {
    let rooms = state.waiting_rooms();
    let sale = purchase.sale_id();
    let read = state.rejections().unknown_ticket();
    match rooms.lookup(state.store(), sale).await? {
        RoomLookup::Room(_) => {}
        RoomLookup::NoRoom => return Ok(Admission::free()),
        RoomLookup::UnknownSale => {
            // Remembered like the purchase path does, so a flood of
            // unknown ids costs one store read each, not two.
            state.rejections().learn_unknown(sale, read);
            return Err(crate::api::unknown_sale(sale));
        }
    }
    let refuse = |why: String| {
        ApiError::new(
            ErrorCode::AdmissionRequired,
            format!(
                "{why}: sale {sale} has a waiting room; join it with POST /v1/sales/{sale}/queue, poll GET /v1/queue/{{ticket}} until admitted, and send its admission_token in the Admission-Token header"
            ),
        )
    };
    let Some(value) = headers.get(ADMISSION_TOKEN) else {
        return Err(refuse("no Admission-Token header".to_owned()));
    };
    let token = value
        .to_str()
        .map_err(|_| refuse("the Admission-Token is not visible ASCII".to_owned()))?;
    let now_ms = state.clock().now().timestamp_millis();
    let (ticket, expires_ms) = rooms
        .signer()
        .verify(token, sale, purchase.user_id(), now_ms)
        .map_err(|error| refuse(error.to_string()))?;
    let key = purchase.idempotency_key().map_or("", |k| k.as_str());
    let nonce: u64 = rand::random();
    let held = format!("held:{nonce:016x}:{key}");
    let until_ms = expires_ms + OUTSTANDING_GRACE.as_millis() as i64;
    let backend = rooms.backend();
    match backend
        .reserve_admission(&ticket, &held, until_ms, now_ms)
        .await?
    {
        None => Ok(Admission {
            reserved: Some(Reservation {
                backend: Arc::clone(backend),
                ticket,
                held,
                spent: spent_record(key),
            }),
            armed: false,
        }),
        // The retry of the keyed purchase that spent it: its order again.
        Some(record) if !key.is_empty() && record == spent_record(key) => Ok(Admission::free()),
        Some(record) => {
            let why = if record.starts_with("held:") {
                "another purchase with this Admission-Token is being decided"
            } else {
                "this Admission-Token has bought already"
            };
            Err(ApiError::new(
                ErrorCode::AdmissionSpent,
                format!(
                    "{why}: an admission buys once (a refused purchase leaves it usable); to buy again, join the queue with POST /v1/sales/{sale}/queue once this admission has expired"
                ),
            ))
        }
    }
}
