//! The HTTP calls the suite makes, each turned into an [`Answer`].

use std::time::Duration;

use serde_json::{Value, json};
// An error with its causes: reqwest's own message hides whether it was a
// timeout, a refused connection or a reset.
use stockade_core::redact::one_line;

use crate::evidence::SkuStock;
use crate::history::{Answer, Item};

/// The waiting-room admission secret every instance shares.
pub const ADMISSION_SECRET: &str = "multi-instance-admission-secret-0123456789";
/// The draw key every instance shares.
pub const DRAW_KEY: &str = "multi-instance-draw-key-0123456789abcdef";

/// The admin token every instance is started with.
pub const TOKEN: &str = "multi-instance-suite-admin-token";

/// The payments token every instance is started with: the payment
/// service's credential, the one that confirms held orders.
pub const PAYMENTS_TOKEN: &str = "multi-instance-suite-payments-token";

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

/// A sent request's answer, as the suite records it.
pub async fn answer(sent: Result<reqwest::Response, reqwest::Error>) -> Answer {
    let response = match sent {
        Ok(response) => response,
        Err(error) => return Answer::None(one_line(&error)),
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match response.bytes().await {
        Ok(bytes) => Answer::Http {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            retry_after,
        },
        // A cut body tells the client nothing it can use.
        Err(error) => Answer::None(format!(
            "status {status} but the body was cut: {}",
            one_line(&error)
        )),
    }
}

/// `POST /v1/sales` (admin), with a payment hold of `hold_seconds` if given.
pub async fn create_sale(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    stock: u64,
    per_user_limit: u64,
    hold_seconds: Option<u64>,
) -> Answer {
    let body = json!({"id": sale, "stock": stock, "per_user_limit": per_user_limit});
    post_sale(client, base, body, hold_seconds).await
}

/// `POST /v1/sales` (admin) of a sale of `stock` items spread over
/// `shards` shards, with a payment hold of `hold_seconds` if given.
pub async fn create_sharded_sale(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    stock: u64,
    per_user_limit: u64,
    hold_seconds: Option<u64>,
    shards: u16,
) -> Answer {
    let body =
        json!({"id": sale, "stock": stock, "per_user_limit": per_user_limit, "shards": shards});
    post_sale(client, base, body, hold_seconds).await
}

/// `POST /v1/sales` (admin) of a sale of several SKUs, each with its own
/// stock, with a payment hold of `hold_seconds` if given.
pub async fn create_sku_sale(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    skus: &[SkuStock],
    per_user_limit: u64,
    hold_seconds: Option<u64>,
) -> Answer {
    let skus: Vec<Value> = skus
        .iter()
        .map(|s| json!({"id": s.id, "stock": s.stock}))
        .collect();
    let body = json!({"id": sale, "skus": skus, "per_user_limit": per_user_limit});
    post_sale(client, base, body, hold_seconds).await
}

async fn post_sale(
    client: &reqwest::Client,
    base: &str,
    mut body: Value,
    hold_seconds: Option<u64>,
) -> Answer {
    if let Some(seconds) = hold_seconds {
        body["hold_seconds"] = json!(seconds);
    }
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

/// `POST /v1/sales/{sale}/purchases` of `quantity` items of the sale's only
/// SKU, with an `Idempotency-Key` if given.
pub async fn purchase(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    buyer: &str,
    quantity: u32,
    key: Option<&str>,
    prefer_async: bool,
) -> Answer {
    let body = json!({"user_id": buyer, "quantity": quantity});
    post_purchase(client, base, sale, body, key, prefer_async).await
}

/// `POST /v1/sales/{sale}/purchases` naming SKUs: one item as `sku` and
/// `quantity`, several as a bundle (`items`, all or nothing).
pub async fn purchase_items(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    buyer: &str,
    items: &[Item],
    key: Option<&str>,
    prefer_async: bool,
) -> Answer {
    let body = match items {
        [item] => json!({"user_id": buyer, "sku": item.sku, "quantity": item.quantity}),
        items => {
            let items: Vec<Value> = items
                .iter()
                .map(|i| json!({"sku": i.sku, "quantity": i.quantity}))
                .collect();
            json!({"user_id": buyer, "items": items})
        }
    };
    post_purchase(client, base, sale, body, key, prefer_async).await
}

async fn post_purchase(
    client: &reqwest::Client,
    base: &str,
    sale: &str,
    body: Value,
    key: Option<&str>,
    prefer_async: bool,
) -> Answer {
    let mut request = client
        .post(format!("{base}/v1/sales/{sale}/purchases"))
        .json(&body);
    if prefer_async {
        request = request.header("Prefer", "respond-async");
    }
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

/// `POST /v1/orders/{order_id}/confirm`: the payment arrived (the payment
/// service's callback, with its token).
pub async fn confirm(client: &reqwest::Client, base: &str, order_id: &str) -> Answer {
    answer(
        client
            .post(format!("{base}/v1/orders/{order_id}/confirm"))
            .bearer_auth(PAYMENTS_TOKEN)
            .send()
            .await,
    )
    .await
}

/// `GET /metrics`: the Prometheus text, or why it could not be read.
pub async fn metrics(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let response = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .map_err(|e| one_line(&e))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| one_line(&e))?;
    if status.is_success() {
        Ok(text)
    } else {
        Err(format!("GET /metrics answered {status}"))
    }
}

/// The value of `stockade_orders_total{sale,event}` in a Prometheus text
/// (0 when the series is absent: nothing happened yet).
pub fn orders_counter(metrics: &str, sale: &str, event: &str) -> u64 {
    let (sale_label, event_label) = (format!("sale=\"{sale}\""), format!("event=\"{event}\""));
    metrics
        .lines()
        .filter(|l| l.starts_with("stockade_orders_total{"))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once('}')?;
            let labels: Vec<&str> = labels
                .trim_start_matches("stockade_orders_total{")
                .split(',')
                .collect();
            (labels.contains(&sale_label.as_str()) && labels.contains(&event_label.as_str()))
                .then(|| value.trim().parse::<f64>().ok())
                .flatten()
        })
        .map(|v| v as u64)
        .sum()
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

#[test]
fn the_orders_counter_is_read_by_its_labels() {
    let text = "# TYPE stockade_orders_total counter\n\
                stockade_orders_total{sale=\"s-r1\",event=\"expired\"} 7\n\
                stockade_orders_total{event=\"expired\",sale=\"s-r10\"} 3\n\
                stockade_orders_total{sale=\"s-r1\",event=\"held\"} 40\n";
    assert_eq!(orders_counter(text, "s-r1", "expired"), 7);
    assert_eq!(orders_counter(text, "s-r10", "expired"), 3);
    assert_eq!(orders_counter(text, "s-r2", "expired"), 0);
}
