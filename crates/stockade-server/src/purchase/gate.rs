//! Who decides a purchase, and the engine's call behind the circuit
//! breaker.

use std::sync::Arc;
use std::time::Instant;

use stockade_core::{Engine, Purchase, PurchaseOutcome};
use stockade_store::authority::Authority;
use tracing::Span;

use super::PurchaseError;
use crate::sale_book::Route;
use crate::state::AppState;

/// Who decided a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decider {
    /// The engine: the order still has to be committed.
    Engine,
    /// The store: the order is committed already.
    Store,
}

/// The engine that decides the sale's purchases, or None when the store
/// does (fallback authority, or `--engine postgres`).
pub(super) fn decider(state: &AppState, route: Route) -> Option<&Arc<dyn Engine>> {
    match route.authority {
        Authority::Primary => state.engine(),
        Authority::Fallback => None,
    }
}

/// The engine's gate behind the circuit breaker. None: the breaker is open
/// and the sale should move to the fallback. `request` is the request's
/// span: the engine's batch links to it.
pub(super) async fn engine_gate(
    state: &AppState,
    engine: &Arc<dyn Engine>,
    purchase: &Purchase,
    request: &Span,
) -> Result<Option<PurchaseOutcome>, PurchaseError> {
    // Fail fast while the engine is known to be unreachable.
    if !state.breaker().allow(Instant::now()) {
        if state.has_fallback() {
            return Ok(None);
        }
        return Err(PurchaseError::EngineUnavailable);
    }
    let started = Instant::now();
    // A batching engine's batch links to the request's span rather than to
    // this step's (while tracing is on: else there is nothing to link).
    let call = engine.purchase(purchase);
    let decided = if request.is_disabled() {
        call.await
    } else {
        stockade_engine::link_batches_to(request.clone(), call).await
    };
    match decided {
        Ok(outcome) => {
            state.breaker().succeeded();
            metrics::histogram!("stockade_engine_seconds", "op" => "purchase")
                .record(started.elapsed().as_secs_f64());
            Ok(Some(outcome))
        }
        Err(error) => {
            if error.is_retryable() {
                state.breaker().failed(Instant::now());
                // Another instance may move the sale meanwhile: read the
                // route again before trusting the engine.
                state.book().forget_primaries();
            } else {
                // It answered: it is reachable.
                state.breaker().succeeded();
            }
            Err(error.into())
        }
    }
}
