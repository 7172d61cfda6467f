//! Who decides a purchase, and the call to it: the engine apart from the
//! store behind the circuit breaker, the store engine directly.

use std::sync::Arc;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use chrono::{DateTime, Utc};
use stockade_core::{Durability, Engine, EngineError, Judged, Purchase};
use stockade_store::authority::Authority;
use tracing::Span;

use super::PurchaseError;
use crate::sale_book::Route;
use crate::state::AppState;

/// The engine that decides the sale's purchases on `route`: the primary
/// engine, or the store engine for a sale moved to the fallback.
pub(super) fn decider(state: &AppState, route: Route) -> &Arc<dyn Engine> {
    match route.authority {
        Authority::Primary => state.engine(),
        Authority::Fallback => state.store_engine(),
    }
}

/// Asks `engine` to decide `purchase` at `now`: its answer and the instant
/// it judged it at (a batching engine's own, later). None: the breaker in front
/// of an engine apart from the store is open and the sale should move to
/// the fallback. `request` is the request's span: a batching engine's
/// batch links to it.
pub(super) async fn gate(
    state: &AppState,
    engine: &Arc<dyn Engine>,
    purchase: &Purchase,
    now: DateTime<Utc>,
    request: &Span,
) -> Result<Option<Judged>, PurchaseError> {
    // The breaker watches the engine apart from the store, whose outage
    // the fallback is for; the store engine's errors are the store's.
    let guarded = engine.durability() == Durability::Outbox;
    // Fail fast while the engine is known to be unreachable.
    if guarded && !state.breaker().allow(Instant::now()) {
        if state.has_fallback() {
            return Ok(None);
        }
        return Err(PurchaseError::EngineUnavailable);
    }
    let started = Instant::now();
    let call = engine.purchase_at(purchase, now);
    // A batching engine's batch links to the request's span rather than to
    // this step's (while tracing is on: else there is nothing to link).
    let decided = if request.is_disabled() {
        call.await
    } else {
        stockade_engine::link_batches_to(request.clone(), call).await
    };
    if guarded {
        breaker_learns(state, &decided);
    }
    let outcome = decided?;
    let op = if guarded {
        "purchase"
    } else {
        "store_purchase"
    };
    metrics::histogram!("stockade_engine_seconds", "op" => op)
        .record(started.elapsed().as_secs_f64());
    Ok(Some(outcome))
}

/// What the breaker learns from an answer of the engine it guards.
fn breaker_learns(state: &AppState, decided: &Result<Judged, EngineError>) {
    match decided {
        Err(error) if error.is_retryable() => {
            state.breaker().failed(Instant::now());
            // Another instance may move the sale meanwhile: read the route
            // again before trusting the engine.
            state.book().forget_primaries();
        }
        // It answered, even if with an error: it is reachable.
        _ => state.breaker().succeeded(),
    }
}
