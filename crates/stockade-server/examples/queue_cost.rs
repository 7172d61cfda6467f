//! What a waiting-room join and a ticket poll cost, next to a bare axum
//! handler, in one run: starts both servers in this process, creates a sale
//! with a waiting room (admitting one buyer per second, so tickets stay
//! waiting), joins one buyer for the polls, prints the URLs, and serves
//! until Ctrl-C. Load them with wrk (see `queue_cost.sh`):
//!
//! ```text
//! cargo run --release -p stockade-server --example queue_cost [redis://127.0.0.1:6379]
//! ```
//!
//! With a Redis URL the queues live in Redis (the engine too); otherwise
//! the embedded default (memory engine, SQLite store).

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use stockade_server::Service;
use stockade_server::config::{RawConfig, ServerConfig};

/// The least a join can do: parse the body, answer a ticket.
async fn bare_join(Path(sale): Path<String>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let user = body["user_id"].as_str().unwrap_or_default().to_owned();
    (
        StatusCode::CREATED,
        Json(
            json!({ "ticket": format!("{sale}.{user}"), "sale_id": sale, "status": "waiting",
                     "position": 1, "estimated_wait_seconds": 0 }),
        ),
    )
}

/// The least a poll can do: answer the ticket.
async fn bare_poll(Path(ticket): Path<String>) -> Json<Value> {
    Json(
        json!({ "ticket": ticket, "sale_id": "bench", "status": "waiting",
                 "position": 1, "estimated_wait_seconds": 0 }),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = std::env::args().nth(1);
    let bare = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let bare_url = format!("http://{}", bare.local_addr()?);
    let router = Router::new()
        .route("/v1/sales/{id}/queue", post(bare_join))
        .route("/v1/queue/{ticket}", get(bare_poll));
    tokio::spawn(async move { axum::serve(bare, router).await });

    let dir = tempfile::tempdir()?;
    let token = "queue-cost-admin-token-0123456789".to_owned();
    let mut settings = RawConfig::default();
    settings.storage.data_dir = Some(dir.path().to_path_buf());
    settings.storage.engine = Some(if redis.is_some() { "redis" } else { "memory" }.into());
    settings.redis.redis_url = redis;
    settings.access.admin_token = Some(token.clone());
    let config = ServerConfig::resolve(settings, RawConfig::default(), None)?;
    let service = Service::start(&config).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let served = tokio::spawn(service.serve(listener, async {
        let _ = tokio::signal::ctrl_c().await;
    }));
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{url}/v1/sales"))
        .bearer_auth(&token)
        .json(&json!({ "id": "bench", "stock": 1_000_000_000,
            "waiting_room": { "admit_per_second": 1, "admission_ttl_seconds": 60 } }))
        .send()
        .await?;
    assert_eq!(created.status(), 201, "{}", created.text().await?);
    let joined: Value = client
        .post(format!("{url}/v1/sales/bench/queue"))
        .json(&json!({ "user_id": "poller" }))
        .send()
        .await?
        .json()
        .await?;
    println!("BARE={bare_url}");
    println!("STOCKADE={url}");
    println!("TICKET={}", joined["ticket"].as_str().unwrap_or_default());
    served.await??;
    Ok(())
}
