//! The HTTP calls the suite makes, each turned into an [`Answer`].

use std::time::Duration;

use serde_json::{Value, json};

use crate::history::Answer;

/// The waiting-room admission secret every instance shares.
pub const ADMISSION_SECRET: &str = "multi-instance-admission-secret-0123456789";

/// The admin token every instance is started with.
pub const TOKEN: &str = "multi-instance-suite-admin-token";

/// The HTTP client: a per-request timeout, so a frozen server costs a
/// bounded wait and is recorded as "no answer".
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .pool_max_idle_per_host(64)
        .build()
        .expect("an HTTP client")
}

async fn answer(sent: Result<reqwest::Response, reqwest::Error>) -> Answer {
    let response = match sent {
        Ok(response) => response,
        Err(error) => return Answer::None(chain(&error)),
    };
    let status = response.status().as_u16();
    match response.bytes().await {
        Ok(bytes) => Answer::Http {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        },
        // A cut body tells the client nothing it can use.
        Err(error) => Answer::None(format!(
            "status {status} but the body was cut: {}",
            chain(&error)
        )),
    }
}

/// An error and its causes, `: `-separated (reqwest's own message hides
/// whether it was a timeout, a refused connection or a reset).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `POST /v1/sales` (admin).
pub async fn create_sale(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    stock: u64,
    per_user_limit: u64,
) -> Answer {
    let body = json!({"id": sale, "stock": stock, "per_user_limit": per_user_limit});
    answer(
        client
            .post(format!("{base}/v1/sales"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await,
    )
    .await
}

/// `POST /v1/sales/{sale}/purchases`, with an `Idempotency-Key` if given.
pub async fn purchase(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    buyer: &str,
    quantity: u32,
    key: Option<&str>,
) -> Answer {
    let mut request = client
        .post(format!("{base}/v1/sales/{sale}/purchases"))
        .json(&json!({"user_id": buyer, "quantity": quantity}));
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    answer(request.send().await).await
}

/// `POST /v1/orders/{order_id}/cancel`.
pub async fn cancel(client: &reqwest::Client, base: &str, order_id: &str) -> Answer {
    answer(
        client
            .post(format!("{base}/v1/orders/{order_id}/cancel"))
            .send()
            .await,
    )
    .await
}

/// `GET /v1/sales/{sale}`.
pub async fn get_sale(client: &reqwest::Client, base: &str, sale: &str) -> Answer {
    answer(client.get(format!("{base}/v1/sales/{sale}")).send().await).await
}

/// `GET /readyz`.
pub async fn readyz(client: &reqwest::Client, base: &str) -> Answer {
    answer(client.get(format!("{base}/readyz")).send().await).await
}

/// `GET /v1/sales/{sale}/orders?limit=1000&after=...` (admin).
pub async fn orders_page(client: &reqwest::Client, base: &str, sale: &str, after: &str) -> Answer {
    answer(
        client
            .get(format!(
                "{base}/v1/sales/{sale}/orders?limit=1000&after={after}"
            ))
            .bearer_auth(TOKEN)
            .send()
            .await,
    )
    .await
}
