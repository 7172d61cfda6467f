//! Running the crowd of a round: the planned purchases sent by a bounded
//! number of concurrent clients, every answer recorded. Buyers who pay
//! confirm their held orders in the background, after their delay; the
//! crowd is done once every payment has been answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api;
use crate::cluster::{Endpoints, INSTANCES};
use crate::history::{Answer, Cancel, Phase, PurchaseRequest, Recorder};
use crate::payment;
use crate::plan::Planned;

/// Purchases in flight at once.
pub const IN_FLIGHT: usize = 64;
/// The crowd stops taking new requests after this long (it normally ends
/// in seconds; this bounds a crowd facing frozen servers).
const CROWD_DEADLINE: Duration = Duration::from_secs(90);

/// Sends the whole plan and marks the crowd done in `recorder`.
pub async fn run(
    client: reqwest::Client,
    endpoints: Endpoints,
    sale: String,
    plan: Vec<Planned>,
    recorder: Recorder,
) {
    let plan = Arc::new(plan);
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + CROWD_DEADLINE;
    let payments = Payments::default();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let worker = Worker {
                client: client.clone(),
                endpoints: endpoints.clone(),
                sale: sale.clone(),
                recorder: recorder.clone(),
                payments: payments.clone(),
            };
            let plan = Arc::clone(&plan);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let Some(planned) = plan.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return;
                    };
                    worker.buy(planned).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a crowd worker panicked");
    }
    let pending = std::mem::take(&mut *payments.lock().unwrap());
    for payment in pending {
        payment.await.expect("a payment panicked");
    }
    let sent = next.load(Ordering::Relaxed).min(plan.len());
    if sent < plan.len() {
        eprintln!(
            "crowd: stopped at its {} s deadline after {sent} of {} requests",
            CROWD_DEADLINE.as_secs(),
            plan.len()
        );
    }
    recorder.finish_crowd();
}

/// The payments under way, awaited before the crowd is done.
type Payments = Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>;

struct Worker {
    client: reqwest::Client,
    endpoints: Endpoints,
    sale: String,
    recorder: Recorder,
    payments: Payments,
}

impl Worker {
    async fn buy(&self, planned: &Planned) {
        let url = self.endpoints.get(planned.instance);
        let (client, sale, buyer) = (&self.client, &self.sale, &planned.buyer);
        let (key, prefer_async) = (planned.key.as_deref(), planned.prefer_async);
        let answer = match &planned.items {
            None => {
                let quantity = planned.quantity;
                api::purchase(client, &url, sale, buyer, quantity, key, prefer_async).await
            }
            Some(items) => {
                api::purchase_items(client, &url, sale, buyer, items, key, prefer_async).await
            }
        };
        let request = PurchaseRequest {
            instance: planned.instance,
            buyer: planned.buyer.clone(),
            quantity: planned.quantity,
            items: planned.items.clone(),
            key: planned.key.clone(),
            phase: Phase::Crowd,
        };
        let backoff = match answer.status() {
            Some(503) => Some(Duration::from_millis(250)),
            None => Some(Duration::from_millis(100)),
            _ => None,
        };
        let order_id = answer.order_id().map(str::to_owned);
        let acknowledged = answer.status() == Some(201);
        if let (Some(delay), Some(held)) = (planned.pays_after, payment::holds_an_order(&answer)) {
            self.pay_later(planned.instance, held.to_owned(), delay);
        }
        self.recorder.purchase(request, answer);
        if let (true, true, Some(order_id)) = (acknowledged, planned.cancel, order_id) {
            self.cancel(planned.instance, order_id).await;
        }
        // A client told to come back later does not hammer the server.
        if let Some(backoff) = backoff {
            tokio::time::sleep(backoff).await;
        }
    }

    /// Confirms a held order after `delay`, in the background.
    fn pay_later(&self, bought_on: usize, order_id: String, delay: Duration) {
        let (client, endpoints) = (self.client.clone(), self.endpoints.clone());
        let recorder = self.recorder.clone();
        let paying = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            payment::pay(&client, &endpoints, &recorder, bought_on, &order_id).await;
        });
        self.payments.lock().unwrap().push(paying);
    }

    /// Cancels an acknowledged order through another instance.
    async fn cancel(&self, bought_on: usize, order_id: String) {
        let instance = (bought_on + 1) % INSTANCES;
        let url = self.endpoints.get(instance);
        let answer: Answer = api::cancel(&self.client, &url, &order_id).await;
        self.recorder.cancel(Cancel {
            instance,
            order_id,
            answer,
        });
    }
}
