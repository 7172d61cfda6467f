//! The door of the purchase path: a sale with a waiting room sells only to
//! buyers who present their `Admission-Token`; presenting it uses the
//! admission up (see the [module](super) docs).

use axum::http::{HeaderMap, StatusCode};
use stockade_core::Purchase;

use super::RoomLookup;
use crate::api::error::ApiError;
use crate::state::AppState;

/// The header that carries the token.
pub const ADMISSION_TOKEN: &str = "admission-token";

/// Passes purchases of sales without a waiting room, and purchases with a
/// valid token for this buyer and sale; anything else is 403
/// `admission_required`. Costs no engine or store work (the room is read
/// from the store once per sale).
pub async fn check_admission(
    state: &AppState,
    purchase: &Purchase,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let rooms = state.waiting_rooms();
    let sale = purchase.sale_id();
    let RoomLookup::Room(_) = rooms.lookup(state.store(), sale).await? else {
        // No room; an unknown sale is answered by the purchase path.
        return Ok(());
    };
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
    if let Err(error) = rooms.backend().consume(&ticket).await {
        // It stays outstanding until it expires: fewer admissions, never more.
        tracing::warn!(%error, %ticket, "cannot mark the admission used");
    }
    Ok(())
}
