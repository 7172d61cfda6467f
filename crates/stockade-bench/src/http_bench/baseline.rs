//! The baseline: bare axum handlers that parse a request and echo it, the
//! least each endpoint can do: a purchase and a waiting-room join (201), a
//! ticket poll (200). `scripts/bench-http` sends the same requests here and
//! to `stockade serve`.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
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

/// The baseline's join request: the buyer, as `stockade serve` reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineJoin {
    user_id: String,
}

/// The baseline's answer to a join: the request, echoed.
#[derive(Serialize)]
struct BaselineJoinEcho {
    sale_id: String,
    user_id: String,
}

async fn echo_join(
    Path(sale_id): Path<String>,
    Json(request): Json<BaselineJoin>,
) -> (StatusCode, Json<BaselineJoinEcho>) {
    (
        StatusCode::CREATED,
        Json(BaselineJoinEcho {
            sale_id,
            user_id: request.user_id,
        }),
    )
}

/// The baseline's answer to a poll: the ticket, echoed.
#[derive(Serialize)]
struct BaselineTicket {
    ticket: String,
}

async fn echo_ticket(Path(ticket): Path<String>) -> Json<BaselineTicket> {
    Json(BaselineTicket { ticket })
}

/// The baseline's routes: `POST /v1/sales/{id}/purchases` parses the
/// purchase and echoes it with 201, `POST /v1/sales/{id}/queue` the join
/// likewise (a body that does not parse gets axum's 4xx), and `GET
/// /v1/queue/{ticket}` echoes the ticket with 200.
pub fn baseline_router() -> Router {
    Router::new()
        .route("/v1/sales/{id}/purchases", post(echo_purchase))
        .route("/v1/sales/{id}/queue", post(echo_join))
        .route("/v1/queue/{ticket}", get(echo_ticket))
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
    async fn the_baseline_echoes_purchases_joins_and_polls() {
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
        let joined = client
            .post(format!("{url}/v1/sales/s-1/queue"))
            .json(&serde_json::json!({ "user_id": "bob" }))
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 201);
        let body: serde_json::Value = joined.json().await.unwrap();
        assert_eq!(
            body,
            serde_json::json!({ "sale_id": "s-1", "user_id": "bob" })
        );
        let polled = client
            .get(format!("{url}/v1/queue/s-1.t-7"))
            .send()
            .await
            .unwrap();
        assert_eq!(polled.status(), 200);
        let body: serde_json::Value = polled.json().await.unwrap();
        assert_eq!(body, serde_json::json!({ "ticket": "s-1.t-7" }));
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
