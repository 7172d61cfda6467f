//! Moving a sale to the store's own decisions while the engine is
//! unavailable.

use std::time::Duration;

use stockade_core::{Epoch, SaleId};

use crate::sale_book::Route;
use crate::state::AppState;
use stockade_store::StoreError;
use stockade_store::authority::{Advance, Authority};
use stockade_store::engine_views::FallbackHold;

/// How long no instance may have reached the engine before a sale moves to
/// the fallback. Longer than an instance's report period (1 s) plus its
/// engine timeout (2 s), so that an instance still selling through Redis
/// has reported so, and every instance has seen the engine fail (and
/// forgotten its primary routes) before a sale moves.
pub const FALLBACK_QUIET: Duration = Duration::from_secs(4);

/// How long an instance counts as live after its last report of its view
/// of the engine: a live instance that still has accepted orders on their
/// way to the store holds a move to the fallback off until they are
/// committed. One silent longer has stopped, or is cut off from the store
/// as well (its orders wait in the engine's outbox).
pub const FALLBACK_LIVE: Duration = Duration::from_secs(10);

/// How long a refused move is not asked of the store again.
const FALLBACK_REFUSAL_TTL: Duration = Duration::from_millis(500);

/// The answer of [`move_to_fallback`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackMove {
    /// The sale is under this route now (moved by this instance, or by
    /// another one first).
    Routed(Route),
    /// Some instance reached the engine within [`FALLBACK_QUIET`]: the
    /// sale stays where it is and this instance answers 503 meanwhile.
    Refused,
    /// No such sale.
    UnknownSale,
}

/// Moves a sale to the store's own decisions while the engine is
/// unavailable, unless it has moved past `from` already, or some instance
/// still reaches the engine (a partition cut this one off: moving would
/// take the sale from under the instances selling through Redis). The
/// engine's outbox under `from` is not drained (the engine is unreachable);
/// its orders still commit, see [`stockade_store::authority`].
pub async fn move_to_fallback(
    state: &AppState,
    sale: &SaleId,
    from: Epoch,
) -> Result<FallbackMove, StoreError> {
    let now = tokio::time::Instant::now();
    if state.book().fallback_recently_refused(now) {
        return Ok(FallbackMove::Refused);
    }
    // This instance's own accepted orders first (its last report may be
    // up to a second old), then every instance's view.
    let hold = if state.queue().in_flight_count() > 0 {
        Some(FallbackHold::Committing)
    } else {
        state
            .store()
            .fallback_hold(FALLBACK_QUIET, FALLBACK_LIVE)
            .await?
    };
    if let Some(hold) = hold {
        tracing::debug!(%sale, ?hold, "the move to the fallback waits");
        state.book().refuse_fallback_for(now, FALLBACK_REFUSAL_TTL);
        metrics::counter!("stockade_fallbacks_refused_total").increment(1);
        return Ok(FallbackMove::Refused);
    }
    let route = match state
        .store()
        .advance_epoch(sale, from, Authority::Fallback)
        .await?
    {
        Advance::Advanced(epoch) => {
            metrics::counter!("stockade_fallbacks_total").increment(1);
            tracing::warn!(%sale, %epoch, "no instance has reached the engine lately: the sale moves to the PostgreSQL fallback");
            Route {
                epoch,
                authority: Authority::Fallback,
            }
        }
        Advance::Moved { epoch, authority } => Route { epoch, authority },
        Advance::UnknownSale => return Ok(FallbackMove::UnknownSale),
    };
    state.book().learn_route(sale, route);
    // The store decides now, from its own stock.
    state.stock_returned(sale);
    Ok(FallbackMove::Routed(route))
}
