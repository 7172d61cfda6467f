//! The crowd: each buyer a task that arrives, buys (retrying with its key
//! when the answer leaves the order open), waits for an asynchronous answer,
//! pays or cancels, and maybe comes back; every request and answer goes
//! into the history.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::clock::{SimClock, TrueTime};
use crate::history::{History, Judged, Named};
use crate::scenario::{AfterOrder, Buyer, Sale};
use crate::world::{ADMIN_TOKEN, Answer, Gateway, json_request};
use stockade_core::Clock;

/// What a buyer task shares with the run.
#[derive(Clone)]
pub struct Crowd {
    /// The instances.
    pub gateway: Gateway,
    /// The log.
    pub history: History,
    /// The run's time.
    pub time: TrueTime,
    /// The sale.
    pub sale: Arc<Sale>,
    /// Each instance's clock.
    pub clocks: Vec<SimClock>,
    /// Whether the sale is plain (see [`crate::scenario::Scenario::plain`]):
    /// most of its buyers then name no SKU.
    pub plain: bool,
    /// Whether the network loses some answers to keyed purchases (see
    /// [`crate::scenario::Scenario::lost_answers`]).
    pub lost_answers: bool,
    /// Whether the sale has a waiting room: each purchase needs an
    /// admission (see [`crate::rooms`]).
    pub room: bool,
    /// The order each admission named.
    pub spent: crate::rooms::Spent,
}

/// The sale's refusals a buyer may be answered, each saying nothing was
/// sold: anything else answered 4xx is unexpected.
pub(crate) const REFUSALS: &[&str] = &[
    "sold_out",
    "insufficient_stock",
    "limit_exceeded",
    "not_started",
    "ended",
    // A purchase of a draw sale.
    "draw_sale",
];

impl Crowd {
    pub(crate) async fn call(
        &self,
        who: &str,
        instance: usize,
        what: &str,
        request: Request<Body>,
    ) -> Option<Answer> {
        let answer = self.gateway.call(instance, request).await;
        let shown = match &answer {
            None => "down".to_owned(),
            Some((status, body)) => format!("{status} {}", summary(body)),
        };
        self.history.log(
            self.time.millis(),
            format!("{who} i{instance} {what} -> {shown}"),
        );
        if let Some((status, body)) = &answer
            && (*status >= 500 && *status != 503)
        {
            self.history
                .unexpected(format!("{who} {what}: {status} {body}"));
        }
        answer
    }

    /// Runs `buyer` to the end of their story.
    pub async fn buyer(self, buyer: Buyer, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        tokio::time::sleep(Duration::from_millis(buyer.arrives_ms)).await;
        if let Some(close) = self.sale.draw_close_ms {
            self.enter(&buyer, close, &mut rng).await;
            if !buyer.buys_again {
                return;
            }
        }
        let rounds = if buyer.buys_again { 2 } else { 1 };
        for round in 0..rounds {
            // Unkeyed purchases are told apart in the log by their round.
            let key = format!("{}-{round}", buyer.user);
            if let Some((order, status)) = self.purchase(&buyer, &key, &mut rng).await {
                self.follow(&buyer, &order, &status, &mut rng).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..5_000))).await;
        }
    }

    /// One purchase, repeated with its key while its answer leaves it
    /// open; the order named and its status, if one was.
    async fn purchase(
        &self,
        buyer: &Buyer,
        key: &str,
        rng: &mut ChaCha8Rng,
    ) -> Option<(String, String)> {
        let items: Vec<Value> = buyer
            .items
            .iter()
            .map(|(sku, quantity)| json!({"sku": self.sale.skus[*sku].id, "quantity": quantity}))
            .collect();
        // On a plain sale most clients name no SKU, as most do: the
        // engine's shortest path (the same body on every retry of a key).
        let mut body = match buyer.items[..] {
            [(_, quantity)] if self.plain && rng.random_bool(0.75) => {
                json!({"user_id": buyer.user, "quantity": quantity})
            }
            _ => json!({"user_id": buyer.user, "items": items}),
        };
        if let Some(tier) = &buyer.tier {
            body["tier"] = json!(tier);
        }
        let uri = format!("/v1/sales/{}/purchases", self.sale.id);
        // A careless client (one in sixteen, by arrival) leaves the SKU out
        // on a sale of several: the answer must be a refusal
        // (`sku_required`), never an order. Not through a waiting room,
        // whose admission it would need first.
        if self.sale.skus.len() > 1 && !self.room && buyer.arrives_ms.is_multiple_of(16) {
            let instance = buyer.arrives_ms as usize % self.gateway.instances();
            let careless = json!({"user_id": buyer.user, "quantity": 1});
            let request = json_request("POST", &uri, &careless, false);
            let what = "buy naming no SKU";
            if let Some((status @ 200..=299, body)) =
                self.call(&buyer.user, instance, what, request).await
            {
                self.history.unexpected(format!(
                    "{} {what} of a sale of several SKUs: {status} {body}",
                    buyer.user
                ));
            }
        }
        let named_key = if buyer.keyed {
            key.to_owned()
        } else {
            String::new()
        };
        // Records an order an answer named.
        let name = |order: &str, status: u16, order_status: &str| {
            self.history.named(Named {
                user: buyer.user.clone(),
                key: named_key.clone(),
                order: order.to_owned(),
                status,
                order_status: order_status.to_owned(),
                at_ms: self.time.millis(),
            });
        };
        // Admitted once for the purchase and its retries.
        let admission = if self.room {
            Some(self.admission(buyer, rng).await?)
        } else {
            None
        };
        let token = admission.as_ref().map(|a| a.token.clone());
        let mut named = None;
        let request = || {
            let mut request = json_request("POST", &uri, &body, false);
            if buyer.keyed {
                request
                    .headers_mut()
                    .insert("idempotency-key", key.parse().expect("a header value"));
            }
            if let Some(token) = &token {
                request
                    .headers_mut()
                    .insert("admission-token", token.parse().expect("a header value"));
            }
            if buyer.respond_async {
                request
                    .headers_mut()
                    .insert("prefer", "respond-async".parse().expect("a header value"));
            }
            request
        };
        // The order a keyed purchase was answered `order_failed` for, and
        // the instance that answered.
        let mut failed = None;
        for attempt in 0..=buyer.retries {
            let instance = rng.random_range(0..self.gateway.instances());
            let what = format!("buy key={key} attempt={attempt}");
            let clock = &self.clocks[instance];
            let sent_ms = clock.now().timestamp_millis();
            let sent_at_ms = self.time.millis();
            let mut answer = self.call(&buyer.user, instance, &what, request()).await;
            // The network loses the answer after the service made it: the
            // buyer cannot tell, and sends the key again.
            if answer.is_some()
                && self.lost_answers
                && buyer.keyed
                && attempt < buyer.retries
                && rng.random_bool(0.1)
            {
                self.history.log(
                    self.time.millis(),
                    format!("{} {what}: the answer is lost", buyer.user),
                );
                answer = None;
            }
            if let Some((status, body)) = &answer {
                self.history.judged(Judged {
                    user: buyer.user.clone(),
                    key: named_key.clone(),
                    status: *status,
                    code: body["error"]["code"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    sent_ms,
                    answered_ms: clock.now().timestamp_millis(),
                    instance,
                    at_ms: (sent_at_ms, self.time.millis()),
                    repeat: buyer.keyed && attempt > 0,
                    remaining: body["error"]["remaining"]
                        .as_u64()
                        .and_then(|left| u32::try_from(left).ok()),
                });
            }
            let retry = match &answer {
                None => {
                    self.history.uncertain(&buyer.user);
                    true
                }
                Some((status @ 200..=202, body)) => {
                    let order = body["order_id"].as_str().unwrap_or_default().to_owned();
                    let status_text = body["status"].as_str().unwrap_or_default().to_owned();
                    name(&order, *status, &status_text);
                    if let Some(token) = &token {
                        self.spent.record(&self.history, &buyer.user, token, &order);
                    }
                    return Some((order, status_text));
                }
                Some((503, body)) => {
                    if let Some(order) = body["error"]["order_id"].as_str() {
                        name(order, 503, "");
                        if let Some(token) = &token {
                            self.spent.record(&self.history, &buyer.user, token, order);
                        }
                        named = Some((order.to_owned(), String::new()));
                    } else {
                        self.history.uncertain(&buyer.user);
                    }
                    true
                }
                Some((409, body)) if body["error"]["code"] == "order_failed" => {
                    // Nothing was sold under this key: the oracle checks
                    // that the store never commits the order it names.
                    if let Some(order) = body["error"]["order_id"].as_str() {
                        self.history.failed(order);
                        failed = Some((order.to_owned(), instance));
                    }
                    false
                }
                Some((409 | 404, body)) => {
                    let code = body["error"]["code"].as_str().unwrap_or_default();
                    if !REFUSALS.contains(&code) {
                        self.history
                            .unexpected(format!("{} {what}: refused {code}: {body}", buyer.user));
                    }
                    false
                }
                // The admission named an order already (an answer lost, an
                // instance down): the order is the first purchase's.
                Some((403, body))
                    if token.is_some() && body["error"]["code"] == "admission_spent" =>
                {
                    false
                }
                // The admission expired before this attempt was answered (on
                // the clock of the instance that judged it): the buyer would
                // queue again.
                Some((403, body))
                    if admission
                        .as_ref()
                        .is_some_and(|a| a.expires_ms <= clock.now().timestamp_millis())
                        && body["error"]["code"] == "admission_required" =>
                {
                    false
                }
                Some((status, body)) => {
                    self.history
                        .unexpected(format!("{} {what}: {status} {body}", buyer.user));
                    false
                }
            };
            if !retry {
                break;
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(100..2_000))).await;
        }
        // A client that did not trust the failure sends the key again, a
        // little later and while it is answered 503 (a rebuild under way):
        // the key still names the failed order (one order per key), so no
        // new one may be sold under it. (Not through a waiting room, whose
        // admission the failed order spent.)
        if let Some((order, instance)) = failed
            && buyer.keyed
            && !self.room
        {
            for again in 0..3 {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let what = format!("buy key={key} again={again} after order_failed");
                let Some((status, body)) = self.call(&buyer.user, instance, &what, request()).await
                else {
                    continue;
                };
                if status == 503 {
                    continue;
                }
                // Sold anew, or failed as another order: a second order
                // under the key.
                let another = (200..=202).contains(&status)
                    || (body["error"]["code"] == "order_failed"
                        && body["error"]["order_id"] != order.as_str());
                if another {
                    self.history.unexpected(format!(
                        "{} {what}: {status} {body}: the key named the failed order {order}",
                        buyer.user
                    ));
                }
                break;
            }
        }
        named
    }

    /// After an order is named: wait out a pending answer, then pay,
    /// cancel or do nothing, as the buyer does.
    pub(crate) async fn follow(
        &self,
        buyer: &Buyer,
        order: &str,
        status: &str,
        rng: &mut ChaCha8Rng,
    ) {
        let instance = rng.random_range(0..self.gateway.instances());
        if status == "pending" {
            let request = get(&format!("/v1/orders/{order}?wait=10"));
            self.call(&buyer.user, instance, &format!("poll {order}"), request)
                .await;
        }
        match buyer.after {
            AfterOrder::Nothing => {}
            AfterOrder::Pays(after) => {
                tokio::time::sleep(Duration::from_millis(after)).await;
                let request = json_request(
                    "POST",
                    &format!("/v1/orders/{order}/confirm"),
                    &json!({}),
                    true,
                );
                let instance = rng.random_range(0..self.gateway.instances());
                if let Some((200, body)) = self
                    .call(&buyer.user, instance, &format!("pay {order}"), request)
                    .await
                    && body["status"] == "confirmed"
                {
                    self.history.confirmed(order);
                }
            }
            AfterOrder::Cancels(after) => {
                tokio::time::sleep(Duration::from_millis(after)).await;
                let request = json_request(
                    "POST",
                    &format!("/v1/orders/{order}/cancel"),
                    &json!({}),
                    true,
                );
                let instance = rng.random_range(0..self.gateway.instances());
                if let Some((200, _)) = self
                    .call(&buyer.user, instance, &format!("cancel {order}"), request)
                    .await
                {
                    self.history.cancelled(order);
                }
            }
        }
    }
}

/// A GET with the admin token.
pub fn get(uri: &str) -> Request<Body> {
    Request::get(uri)
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body(Body::empty())
        .expect("a well-formed request")
}

/// The part of an answer the log keeps: the order and its status, or the
/// error's code.
fn summary(body: &Value) -> String {
    if let Some(code) = body["error"]["code"].as_str() {
        match body["error"]["order_id"].as_str() {
            Some(order) => format!("{code} order={order}"),
            None => code.to_owned(),
        }
    } else if let Some(result) = body["result"].as_str() {
        // A draw entry: where it stands, and its order once won.
        let order = body["order_id"].as_str().unwrap_or_default();
        format!(
            "entry={} {result} {order}",
            body["entry_id"].as_str().unwrap_or_default()
        )
    } else if let Some(order) = body["order_id"].as_str() {
        format!(
            "order={order} {}",
            body["status"].as_str().unwrap_or_default()
        )
    } else {
        String::new()
    }
}
