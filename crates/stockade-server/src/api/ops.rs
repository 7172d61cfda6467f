//! Health, readiness, metrics and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use stockade_core::SaleId;

use crate::state::AppState;

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The store answers, start-up recovery is done, and the engine answers
/// (or, with `--fallback postgres`, the store can stand in for it).
/// `down` names each dependency that does not answer (`engine`, `store`);
/// why is logged, never answered (error text names hosts and ports).
/// `rebuilding` counts the sales this instance is rebuilding (answered 503
/// meanwhile, the others sell).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "ready: {\"ready\": true, \"down\": [], ...}; with a fallback, `down` may name the engine while the store stands in"),
        (status = 503, description = "not ready: {\"ready\": false, \"down\": [\"engine\"], ...} names what does not answer (or `selling` is `starting`)")))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let probe = SaleId::new("readyz-probe").expect("a valid id");
    // The store engine's probe is the store's ping below.
    let engine = if state.engine_apart() {
        state.engine().snapshot(&probe).await.map(|_| ())
    } else {
        Ok(())
    };
    let store = state.store().ping().await;
    let started = state.is_started();
    let mut down = Vec::new();
    if let Err(error) = &engine {
        tracing::warn!(%error, "readiness: the engine does not answer");
        down.push("engine");
    }
    if let Err(error) = &store {
        tracing::warn!(%error, "readiness: the order store does not answer");
        down.push("store");
    }
    let engine_ok = engine.is_ok() || state.has_fallback();
    let ready = engine_ok && store.is_ok() && started;
    let body = json!({
        "ready": ready,
        "down": down,
        "selling": if started { "open" } else { "starting" },
        "rebuilding": state.book().rebuilding_count(),
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// Prometheus metrics (every series is named `stockade_*`).
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics().render(),
    )
}

/// This document (of this deployment: with identity off, purchases name
/// their buyer).
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200)))]
pub async fn openapi(State(state): State<AppState>) -> Json<Value> {
    Json(super::document_json(&state))
}
