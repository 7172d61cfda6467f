//! Health, readiness, metrics and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use stockade_core::SaleId;
use stockade_store::probe::PING_TIMEOUT;

use crate::state::AppState;

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Whether this instance can take buyers: start-up recovery is done and it
/// is not stopping. The store and Redis are shared by every instance, so
/// their outage does not make this one unready (every replica would leave
/// the load balancer together, while each still answers buyers: 202
/// `pending` with the store down, the fallback or 503 `engine_unavailable`
/// with Redis down); it is reported instead: `checks` gives each part's
/// state, `down` names those that do not answer, and
/// `stockade_dependency_up` keeps them in the metrics. Why a part is down
/// is logged, never answered (error text names hosts and ports).
/// `rebuilding` counts the sales this instance is rebuilding.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "ready: {\"ready\": true, \"checks\": {\"store\": \"up\", \"engine\": \"up\"}, \"down\": [], ...}; a shared part may be down (`checks`, `down`) while the instance stays ready"),
        (status = 503, description = "not ready: start-up recovery is not done (`selling` is `starting`) or the instance is stopping (`selling` is `stopping`)")))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let probe = SaleId::new("readyz-probe").expect("a valid id");
    let engine = async {
        // The store engine's probe is the store's ping.
        if !state.engine_apart() {
            return None;
        }
        let snapshot = state.engine().snapshot(&probe);
        Some(match tokio::time::timeout(PING_TIMEOUT, snapshot).await {
            Ok(answer) => answer.map(|_| ()).map_err(|error| error.to_string()),
            Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
        })
    };
    let (engine, store) = tokio::join!(engine, state.store().ping());
    let mut checks = serde_json::Map::new();
    let mut down = Vec::new();
    let mut report = |part: &'static str, up: bool| {
        metrics::gauge!("stockade_dependency_up", "dependency" => part)
            .set(f64::from(u8::from(up)));
        checks.insert(part.to_owned(), json!(if up { "up" } else { "down" }));
        if !up {
            down.push(part);
        }
    };
    if let Err(error) = &store {
        tracing::warn!(%error, "readiness: the order store does not answer");
    }
    report("store", store.is_ok());
    if let Some(engine) = &engine {
        if let Err(error) = engine {
            tracing::warn!(%error, "readiness: the engine does not answer");
        }
        report("engine", engine.is_ok());
    }
    let selling = if state.is_stopping() {
        "stopping"
    } else if state.is_started() {
        "open"
    } else {
        "starting"
    };
    let ready = selling == "open";
    let body = json!({
        "ready": ready,
        "selling": selling,
        "checks": checks,
        "down": down,
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
