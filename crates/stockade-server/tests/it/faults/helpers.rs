//! Shared helpers: a crowd of careful buyers, what was acknowledged, a
//! sale settling, a metric's value.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::TestServer;

/// Buyers `first..first+count` each try once (retrying 503s for a while),
/// `concurrency` at a time. Returns every answer.
pub(crate) async fn buyers(
    server: &Arc<TestServer>,
    sale: &str,
    first: usize,
    count: usize,
    concurrency: usize,
) -> Vec<(u16, Value)> {
    let next = Arc::new(AtomicUsize::new(first));
    let end = first + count;
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let server = Arc::clone(server);
            let next = Arc::clone(&next);
            let sale = sale.to_owned();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return answers;
                    }
                    let user = format!("buyer-{i}");
                    let key = format!("key-{i}");
                    let deadline = Instant::now() + Duration::from_secs(20);
                    // A careful client: retry 503s with the same key.
                    let answer = loop {
                        let answer = server.buy(&sale, &user, 1, Some(&key)).await;
                        if answer.0 != 503 || Instant::now() > deadline {
                            break answer;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    };
                    answers.push(answer);
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for worker in workers {
        answers.extend(worker.await.unwrap());
    }
    answers
}

pub(crate) fn acknowledged(answers: &[(u16, Value)]) -> HashSet<String> {
    answers
        .iter()
        .filter(|(status, _)| *status == 201 || *status == 200)
        .map(|(_, body)| body["order_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until the sale's remaining stock equals stock − committed, and
/// returns the committed order ids.
pub(crate) async fn settled(server: &TestServer, sale: &str, stock: u64) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let orders = server.all_orders(sale).await;
        let live: u64 = orders
            .iter()
            .filter(|o| o["status"] == "confirmed")
            .map(|o| o["quantity"].as_u64().unwrap())
            .sum();
        let (status, snapshot) = server.get(&format!("/v1/sales/{sale}")).await;
        assert!(live <= stock, "oversold: {live} of {stock}");
        if status == 200 && snapshot["remaining"].as_u64() == Some(stock - live) {
            return orders
                .iter()
                .map(|o| o["order_id"].as_str().unwrap().to_owned())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "never settled: remaining {snapshot} vs stock {stock} - committed {live}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asks again every 100 ms while the answer is 503 (the sale rebuilding,
/// the store away), for at most `patience`; the last answer.
pub(crate) async fn until_not_503(
    patience: Duration,
    mut ask: impl AsyncFnMut() -> (u16, Value),
) -> (u16, Value) {
    let deadline = Instant::now() + patience;
    loop {
        let answer = ask().await;
        if answer.0 != 503 || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The order a purchase answer names while its commit is not done (202
/// `pending`, or 503 `store_unavailable` with the order's id); `context`
/// says which purchase, should it be anything else.
pub(crate) fn named_uncommitted(status: u16, body: &Value, context: &str) -> String {
    let id = body["order_id"]
        .as_str()
        .or(body["error"]["order_id"].as_str())
        .unwrap_or_else(|| panic!("{context}: {status} names no order: {body}"))
        .to_owned();
    assert!(
        status == 202 || (status == 503 && body["error"]["code"] == "store_unavailable"),
        "{context}: {status} {body}"
    );
    id
}

pub(crate) async fn metric(server: &TestServer, name: &str) -> f64 {
    crate::common::metric_sum(&server.metrics_text().await, name)
}
