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

use chrono::{DateTime, Utc};
use stockade_core::sale::Window;
use stockade_core::{Purchase, SaleSpec, rule};

use super::{OUTSTANDING_GRACE, QueueBackend, RoomLookup, TicketId};
use stockade_core::SaleId;
use stockade_store::StoreError;

use super::QueueError;
use crate::state::AppState;

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

/// The `Admission-Token` a purchase carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionToken {
    /// No header.
    Missing,
    /// A header that is not visible ASCII.
    Unreadable,
    /// The token.
    Given(String),
    /// Not a buyer's purchase: the draw's own, buying a winner's order on
    /// a draw sale (never sent by a client).
    Drawn,
}

/// Why the waiting room turned a purchase away.
#[derive(Debug)]
pub enum AdmissionError {
    /// No valid admission for this buyer and sale (`why` says what is
    /// wrong with the token).
    Required {
        /// The sale.
        sale: SaleId,
        /// What is wrong with the token.
        why: String,
    },
    /// The admission has bought already, or another purchase with it is
    /// being decided.
    Spent {
        /// The sale.
        sale: SaleId,
        /// Which of the two.
        why: &'static str,
    },
    /// There is no such sale.
    UnknownSale(SaleId),
    /// The sale is allocated by a draw: nobody buys it, buyers enter it.
    DrawSale(SaleId),
    /// The queue backend failed.
    Queue(QueueError),
    /// The store failed (reading the sale's room).
    Store(StoreError),
}

impl AdmissionError {
    /// The code the API answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Required { .. } => ErrorCode::AdmissionRequired,
            Self::Spent { .. } => ErrorCode::AdmissionSpent,
            Self::UnknownSale(_) => ErrorCode::UnknownSale,
            Self::DrawSale(_) => ErrorCode::DrawSale,
            Self::Queue(QueueError::Unavailable(_)) => ErrorCode::QueueUnavailable,
            Self::Queue(QueueError::Failed(_)) => ErrorCode::Internal,
            Self::Store(StoreError::Unavailable(_)) => ErrorCode::StoreUnavailable,
            Self::Store(StoreError::Failed(_)) => ErrorCode::Internal,
        }
    }
}

impl From<QueueError> for AdmissionError {
    fn from(error: QueueError) -> Self {
        Self::Queue(error)
    }
}

impl From<StoreError> for AdmissionError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// Whether the buyer's tier window is open while the sale's own has not
/// started: the room meters the sale's opening (its queue admits nobody
/// before the sale's `starts_at`), so a tier that starts earlier buys in
/// its own window without an admission, bounded by its reserve and
/// limits; from the sale's start its buyers queue like everyone else.
fn early_tier(spec: &SaleSpec, purchase: &Purchase, now: DateTime<Utc>) -> bool {
    let tier = rule::tier(spec, purchase.tier());
    tier.is_some()
        && spec.window_at(now) == Window::NotStarted
        && spec.window_for(tier, now) == Window::Open
}

/// Passes purchases of sales without a waiting room, purchases of a
/// buyer in their tier's early window (`early_tier`), and purchases with a
/// valid token for this buyer and sale that no other purchase has spent or
/// is spending; anything else is 403 `admission_required` or
/// `admission_spent`. Costs no engine or store work (the room is read from
/// the store once per sale) and one backend step to reserve the token.
pub async fn check_admission(
    state: &AppState,
    purchase: &Purchase,
    token: &AdmissionToken,
) -> Result<Admission, AdmissionError> {
    let rooms = state.waiting_rooms();
    let sale = purchase.sale_id();
    // An unknown sale is remembered by the lookup, so a flood of unknown
    // ids costs one store read each, not two.
    match rooms.lookup(state.book(), state.store(), sale).await? {
        RoomLookup::Room(room) if early_tier(&room.spec, purchase, state.clock().now()) => {
            return Ok(Admission::free());
        }
        RoomLookup::Room(_) => {}
        RoomLookup::NoRoom => return Ok(Admission::free()),
        RoomLookup::Draw if *token == AdmissionToken::Drawn => return Ok(Admission::free()),
        RoomLookup::Draw => return Err(AdmissionError::DrawSale(sale.clone())),
        RoomLookup::UnknownSale => return Err(AdmissionError::UnknownSale(sale.clone())),
    }
    let refuse = |why: String| AdmissionError::Required {
        sale: sale.clone(),
        why,
    };
    let token = match token {
        AdmissionToken::Missing | AdmissionToken::Drawn => {
            return Err(refuse("no Admission-Token header".to_owned()));
        }
        AdmissionToken::Unreadable => {
            return Err(refuse(
                "the Admission-Token is not visible ASCII".to_owned(),
            ));
        }
        AdmissionToken::Given(token) => token,
    };
    let now_ms = state.clock().now().timestamp_millis();
    let (ticket, expires_ms) = rooms
        .signer()
        .verify(token, sale, purchase.user_id(), now_ms)
        .map_err(|error| refuse(error.to_string()))?;
    let key = purchase.idempotency_key().map_or("", |k| k.as_str());
    let nonce: u64 = stockade_core::entropy::random();
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
            Err(AdmissionError::Spent {
                sale: sale.clone(),
                why,
            })
        }
    }
}
