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

/// An admission a purchase passed the door with. Hold it until the
/// purchase is decided: dropping it marks the admission used.
#[must_use = "the admission is used up when this is dropped: hold it until the purchase is decided"]
pub struct Admission {
    used: Option<(Arc<dyn QueueBackend>, TicketId)>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let Some((backend, ticket)) = self.used.take() else {
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
        RoomLookup::NoRoom => return Ok(Admission { used: None }),
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
    })
}
