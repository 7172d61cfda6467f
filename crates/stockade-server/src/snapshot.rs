//! What a sale looks like now: its engine's numbers while the engine
//! decides it, the store's otherwise (and whenever the engine cannot say).

use stockade_core::sale::Window;
use stockade_core::{SaleId, SaleSnapshot};
use stockade_store::StoreError;
use stockade_store::authority::Authority;

use crate::recovery::request_rebuild;
use crate::state::AppState;

/// What a read does when the engine does not hold a sale the store has
/// under the primary authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenMissing {
    /// The engine lost it (Redis restarted empty): start a rebuild. For
    /// reads a client asked for.
    Rebuild,
    /// Answer from the store and leave it: for background readers (the
    /// waiting-room tickers), which cannot tell a lost sale from one being
    /// created (saved in the store, not yet in the engine) and would
    /// otherwise rebuild a new sale under its first buyers. A lost sale is
    /// found by the next purchase or read, or by the reconciler's restart
    /// check.
    AnswerFromStore,
}

/// The sale's snapshot (the engine's, under the primary authority; the
/// store's otherwise) and what the store, the source of
/// truth, has left: the engine may read 0 while it is rebuilt or after it
/// lost its data, when the sale is not sold out at all.
pub async fn snapshot_and_store_left(
    state: &AppState,
    id: &SaleId,
    missing: WhenMissing,
) -> Result<Option<(SaleSnapshot, u32)>, StoreError> {
    let Some(current) = state.store().sale_state(id).await? else {
        return Ok(None);
    };
    let store_left = current.remaining();
    if current.authority == Authority::Primary && state.engine_apart() {
        match state.engine().snapshot(id).await {
            Ok(Some(snapshot)) => return Ok(Some((snapshot, store_left))),
            // An ended sale the engine let go (see `retirement`) stays
            // gone: it sells nothing, the store answers for it.
            Ok(None) if current.spec.window_at(state.clock().now()) == Window::Ended => {}
            Ok(None) if missing == WhenMissing::Rebuild => {
                request_rebuild(state, id, current.epoch, "engine_lost_sale");
            }
            Ok(None) => {}
            // Unreachable: the store's numbers are the truth anyway.
            Err(error) => {
                tracing::debug!(%error, "engine snapshot failed; answering from the store")
            }
        }
    }
    Ok(Some((
        SaleSnapshot::at(
            current.spec.clone(),
            &current.sku_remaining(),
            state.clock().now(),
        ),
        store_left,
    )))
}
