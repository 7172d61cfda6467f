//! Before a rebuild advances a sale's epoch: every order a live instance
//! accepted from the engine and has not committed reaches the store first.
//!
//! The advance makes the store void every order decided under the old
//! epoch. The rebuild has already closed the sale in the engine and
//! committed its outbox, but an engine that lost its data (restarted
//! empty, failed over to a replica that lacked the last writes) lost those
//! entries too: the only copy of such an order is in the writer of the
//! instance that took it, and that instance may already have named it to
//! its buyer (202 `pending`, or 503 with its id, when the commit took
//! longer than the deadline). Advancing under it would void a named order;
//! so the rebuild waits until this instance's writer holds none of the
//! sale's orders, and every other live instance has reported so after the
//! close (its report's clock reading precedes its look at its writer, see
//! [`stockade_store::OrderStore::report_engine_view`]).

use std::time::Duration;

use stockade_core::SaleId;
use tokio::time::Instant;

use crate::state::AppState;

use super::{FALLBACK_LIVE, RecoveryError};

/// How long one rebuild attempt waits for the writers. Under the rebuild
/// lock's wait (15 s), so instances queued for the lock still get it; an
/// instance that died holding orders stays live for [`FALLBACK_LIVE`]
/// after its last report, which the retried attempt then outlasts.
const DRAIN_WAIT: Duration = Duration::from_secs(8);

/// How often the writers are looked at again.
const POLL: Duration = Duration::from_millis(100);

/// Waits until no live instance's writer holds an order of `sale` (the
/// sale is closed in the engine, so none is added), or fails after
/// [`DRAIN_WAIT`] naming the instances still holding some (the rebuild is
/// retried).
pub(super) async fn wait_for_writers(state: &AppState, sale: &SaleId) -> Result<(), RecoveryError> {
    let store = state.store();
    let since = store.clock_ms().await?;
    let started = Instant::now();
    let mut polls = 0u32;
    loop {
        let own = state.queue().holds_sale(sale);
        let others = store
            .rebuild_hold(sale, since, FALLBACK_LIVE, state.book().instance())
            .await?;
        if !own && others.is_empty() {
            if polls > 0 {
                tracing::info!(%sale, waited_ms = started.elapsed().as_millis() as u64,
                    "the instances' accepted orders reached the store: the rebuild goes on");
            }
            return Ok(());
        }
        let mut holding = others;
        if own {
            holding.insert(0, state.book().instance().to_owned());
        }
        if started.elapsed() >= DRAIN_WAIT {
            return Err(RecoveryError::Committing {
                sale: sale.clone(),
                instances: holding,
            });
        }
        if polls.is_multiple_of(10) {
            tracing::debug!(%sale, ?holding, "the rebuild waits for accepted orders to reach the store");
        }
        polls += 1;
        tokio::time::sleep(POLL).await;
    }
}
