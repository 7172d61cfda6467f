//! A buyer of a draw sale: enters while entries are open (retrying with the
//! same buyer, which finds their entry again), then asks where the entry
//! stands until the draw gives it an order, loses it, or the run moves on;
//! a won order is then paid, cancelled or left to lapse as any other.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::crowd::{Crowd, get};
use crate::history::Named;
use crate::scenario::Buyer;
use crate::world::json_request;

/// How long after the close a buyer keeps asking about a waitlisted entry.
const WATCH_MS: u64 = 60_000;

/// Refusals of an entry: each says the buyer is not in the draw.
const REFUSED: &[&str] = &["entries_closed", "limit_exceeded", "insufficient_stock"];

impl Crowd {
    /// Enters `buyer` in the draw and follows the entry to its order.
    pub(crate) async fn enter(&self, buyer: &Buyer, close_ms: u64, rng: &mut ChaCha8Rng) {
        let Some(entry) = self.entry(buyer, rng).await else {
            return;
        };
        // The draw runs within a second or so of the close.
        let first_look = close_ms + rng.random_range(1_000..5_000);
        self.sleep_until(first_look).await;
        let uri = format!(
            "/v1/sales/{}/entries/me?user_id={}",
            self.sale.id, buyer.user
        );
        loop {
            let instance = rng.random_range(0..self.gateway.instances());
            let what = format!("entry {entry}");
            let answer = self.call(&buyer.user, instance, &what, get(&uri)).await;
            if let Some((200, body)) = &answer {
                if body["entry_id"] != entry.as_str() {
                    self.history.unexpected(format!(
                        "{}: entries/me named {} for entry {entry}",
                        buyer.user, body["entry_id"]
                    ));
                    return;
                }
                match body["result"].as_str() {
                    Some("won") => return self.won(buyer, body, rng).await,
                    Some("lost") => return,
                    _ => {}
                }
            } else if !matches!(&answer, None | Some((503, _))) {
                self.history
                    .unexpected(format!("{} {what}: {answer:?}", buyer.user));
                return;
            }
            if self.time.millis() > close_ms + WATCH_MS {
                return;
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(1_000..4_000))).await;
        }
    }

    /// The buyer's entry id, once an answer names it (None: refused, or
    /// never answered for sure).
    async fn entry(&self, buyer: &Buyer, rng: &mut ChaCha8Rng) -> Option<String> {
        let (sku, quantity) = buyer.items[0];
        let mut body = json!({
            "user_id": buyer.user,
            "sku": self.sale.skus[sku].id,
            "quantity": quantity,
        });
        if let Some(tier) = &buyer.tier {
            body["tier"] = json!(tier);
        }
        let uri = format!("/v1/sales/{}/entries", self.sale.id);
        for attempt in 0..=buyer.retries {
            let instance = rng.random_range(0..self.gateway.instances());
            let what = format!("enter attempt={attempt}");
            let request = json_request("POST", &uri, &body, false);
            match self.call(&buyer.user, instance, &what, request).await {
                Some((200 | 201, body)) => {
                    let entry = body["entry_id"].as_str().unwrap_or_default().to_owned();
                    self.history.entered(&entry);
                    return Some(entry);
                }
                None | Some((503, _)) => {}
                Some((status, body)) => {
                    let code = body["error"]["code"].as_str().unwrap_or_default();
                    if !(status == 409 && REFUSED.contains(&code)) {
                        self.history
                            .unexpected(format!("{} {what}: {status} {body}", buyer.user));
                    }
                    return None;
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(100..2_000))).await;
        }
        None
    }

    /// A won entry's order: named to the buyer, then followed.
    async fn won(&self, buyer: &Buyer, body: &Value, rng: &mut ChaCha8Rng) {
        let Some(order) = body["order_id"].as_str() else {
            self.history.unexpected(format!(
                "{}: a won entry without an order: {body}",
                buyer.user
            ));
            return;
        };
        // Its order's status, as the buyer learns it.
        let request = get(&format!("/v1/orders/{order}"));
        let instance = rng.random_range(0..self.gateway.instances());
        let status = match self
            .call(&buyer.user, instance, &format!("order {order}"), request)
            .await
        {
            Some((200, body)) => body["status"].as_str().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        self.history.named(Named {
            user: buyer.user.clone(),
            key: String::new(),
            order: order.to_owned(),
            status: 200,
            order_status: status.clone(),
            at_ms: self.time.millis(),
        });
        self.follow(buyer, order, &status, rng).await;
    }

    /// Sleeps until `at_ms` of the run's time (at once if it passed).
    async fn sleep_until(&self, at_ms: u64) {
        let now = self.time.millis();
        if at_ms > now {
            tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
        }
    }
}
