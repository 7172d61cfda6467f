//! The baseline: a bare axum handler that parses a purchase and echoes it
//! with 201, the least a purchase endpoint can do.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

/// The baseline's purchase request: the sale from the path, the buyer and
/// quantity from the body, as `stockade serve` reads them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineRequest {
    user_id: String,
    #[serde(default = "one")]
    quantity: u32,
}

fn one() -> u32 {
    1
}

/// The baseline's answer: the request, echoed.
#[derive(Serialize)]
struct BaselineEcho {
    sale_id: String,
    user_id: String,
    quantity: u32,
}

async fn echo_purchase(
    Path(sale_id): Path<String>,
    Json(request): Json<BaselineRequest>,
) -> (StatusCode, Json<BaselineEcho>) {
    (
        StatusCode::CREATED,
        Json(BaselineEcho {
            sale_id,
            user_id: request.user_id,
            quantity: request.quantity,
        }),
    )
}

/// The baseline's routes: `POST /v1/sales/{id}/purchases` parses the
/// purchase and echoes it with 201 (a body that does not parse gets axum's
/// 4xx).
pub fn baseline_router() -> Router {
    Router::new().route("/v1/sales/{id}/purchases", post(echo_purchase))
}

/// Serves the baseline on `listener` until `shutdown` completes.
pub async fn serve_baseline(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, baseline_router())
        .with_graceful_shutdown(shutdown)
        .await
}
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_baseline_echoes_the_purchase() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_baseline(listener, async {
            let _ = stopped.await;
        }));
        let client = reqwest::Client::new();
        let answer = client
            .post(format!("{url}/v1/sales/s-1/purchases"))
            .json(&serde_json::json!({ "user_id": "ann", "quantity": 2 }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "sale_id": "s-1", "user_id": "ann", "quantity": 2 })
        );
        let refused = client
            .post(format!("{url}/v1/sales/s-1/purchases"))
            .json(&serde_json::json!({ "buyer": "ann" }))
            .send()
            .await
            .unwrap();
        assert!(refused.status().is_client_error(), "{}", refused.status());
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
