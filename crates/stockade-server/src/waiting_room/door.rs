//! The door of the purchase path: a sale with a waiting room sells only to
//! buyers who present their `Admission-Token`; the purchase uses the
//! admission up once it is decided (see the [module](super) docs).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use stockade_core::Purchase;

use super::{QueueBackend, RoomLookup, TicketId};
use crate::api::error::ApiError;
use crate::state::AppState;

/// The header that carries the token.
pub const ADMISSION_TOKEN: &str = "admission-token";

/// An admission a purchase passed the door with. [`Admission::arm`] it
/// once the purchase goes to be decided and hold it until it is: dropping
/// an armed admission marks it used. A purchase turned away before (503
/// `overloaded`) leaves it outstanding.
#[must_use = "arm it when the purchase goes to be decided, and hold it until it is"]
pub struct Admission {
    used: Option<(Arc<dyn QueueBackend>, TicketId)>,
    armed: bool,
}

impl Admission {
    /// The purchase goes to the engine or the store now.
    pub fn arm(&mut self) {
        self.armed = true;
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let Some((backend, ticket)) = self.used.take().filter(|_| self.armed) else {
            return;
        };
        // After the decision: the engine has taken the stock by now.
        tokio::spawn(async move {
            if let Err(error) = backend.consume(&ticket).await {
                // It stays outstanding until it expires: fewer admissions,
                // never more.
                tracing::warn!(%error, %ticket, "cannot mark the admission used");
            }
        });
    }
}

/// Passes purchases of sales without a waiting room, and purchases with a
/// valid token for this buyer and sale; anything else is 403
/// `admission_required`. Costs no engine or store work (the room is read
/// from the store once per sale).
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
        RoomLookup::NoRoom => {
            return Ok(Admission {
                used: None,
                armed: false,
            });
        }
        RoomLookup::UnknownSale => {
            // Remembered like the purchase path does, so a flood of
            // unknown ids costs one store read each, not two.
            state.rejections().learn_unknown(sale, read);
            return Err(crate::api::unknown_sale(sale));
        }
    }
    let refuse = |why: String| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "admission_required",
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
    let ticket = rooms
        .signer()
        .verify(token, sale, purchase.user_id(), now_ms)
        .map_err(|error| refuse(error.to_string()))?;
    Ok(Admission {
        used: Some((Arc::clone(rooms.backend()), ticket)),
        armed: false,
    })
}
