//! The final phase's selling out: fresh buyers, one item each, until every
//! instance answers `sold_out`. On a sale of several SKUs a buyer must name
//! one: each asks for a SKU nobody has been told is empty yet, and moves
//! the others on once one is (`insufficient_stock` with `remaining` 0);
//! `sold_out` comes only once every SKU is.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api;
use crate::cluster::{Cluster, INSTANCES};
use crate::evidence::SkuStock;
use crate::history::{Answer, Item, Phase, PurchaseRequest, Recorder};
use crate::payment;

/// Fresh buyers of the final phase, at most.
const LATE_BUYERS: usize = 4_000;
/// Concurrent buyers of the final phase.
const LATE_WORKERS: usize = 6;

/// The SKUs fresh buyers ask for on a sale of several SKUs, and which of
/// them an instance said had nothing left.
struct LateSkus {
    ids: Vec<String>,
    empty: Vec<AtomicBool>,
}

impl LateSkus {
    /// The SKUs of a sale of `skus` (none named on a sale of one SKU).
    fn of(skus: &[SkuStock]) -> Self {
        let ids: Vec<String> = skus.iter().map(|s| s.id.clone()).collect();
        let empty = ids.iter().map(|_| AtomicBool::new(false)).collect();
        Self { ids, empty }
    }

    /// What buyer `n` asks for: `None` (one item, no SKU named) on a sale
    /// of one SKU; else one item of the first SKU from `n` on not known to
    /// be empty, or of SKU `n` if all are (the answer is then `sold_out`,
    /// or the item of a SKU that got stock back).
    fn pick(&self, n: usize) -> Option<Vec<Item>> {
        let count = self.ids.len();
        if count == 0 {
            return None;
        }
        let index = (0..count)
            .map(|j| (n + j) % count)
            .find(|&i| !self.empty[i].load(Ordering::Relaxed))
            .unwrap_or(n % count);
        Some(vec![Item::new(&self.ids[index], 1)])
    }

    /// An instance said `sku` has nothing left.
    fn mark_empty(&self, sku: &str) {
        if let Some(i) = self.ids.iter().position(|id| id == sku) {
            self.empty[i].store(true, Ordering::Relaxed);
        }
    }
}

/// One fresh buyer's purchase of one item, of the SKU `items` names if any.
async fn buy(
    client: &reqwest::Client,
    url: &str,
    sale: &str,
    buyer: &str,
    items: Option<&[Item]>,
    key: &str,
) -> Answer {
    match items {
        None => api::purchase(client, url, sale, buyer, 1, Some(key), false).await,
        Some(items) => api::purchase_items(client, url, sale, buyer, items, Some(key), false).await,
    }
}

/// Fresh buyers (one item, each with its own key) buy until every instance
/// has answered `sold_out`; 503s and missing answers are retried with the
/// same key, with backoff, on the next instance.
///
/// `pass` numbers the fresh buyers apart from those of earlier passes; with
/// `holds`, each buyer confirms its held order at once.
pub async fn sell_out(
    cluster: &Cluster,
    sale: &str,
    skus: &[SkuStock],
    recorder: &Recorder,
    bound: Duration,
    pass: usize,
    holds: bool,
) -> Result<(), String> {
    let deadline = Instant::now() + bound;
    let seen: Arc<[AtomicBool; INSTANCES]> = Arc::new(Default::default());
    let last: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec!["nothing".into(); INSTANCES]));
    let next = Arc::new(AtomicUsize::new(0));
    let skus = Arc::new(LateSkus::of(skus));
    let all_seen = |seen: &[AtomicBool; INSTANCES]| seen.iter().all(|s| s.load(Ordering::Relaxed));
    let workers: Vec<_> = (0..LATE_WORKERS)
        .map(|_| {
            let (client, endpoints) = (cluster.client().clone(), cluster.endpoints());
            let (sale, recorder) = (sale.to_owned(), recorder.clone());
            let (seen, last, next) = (Arc::clone(&seen), Arc::clone(&last), Arc::clone(&next));
            let skus = Arc::clone(&skus);
            tokio::spawn(async move {
                while !all_seen(&seen) && Instant::now() < deadline {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= LATE_BUYERS {
                        return;
                    }
                    let n = pass * LATE_BUYERS + n;
                    let (buyer, key) = (format!("late{n}"), format!("late-key-{n}"));
                    let items = skus.pick(n);
                    let mut instance = n % INSTANCES;
                    let mut backoff = Duration::from_millis(100);
                    while Instant::now() < deadline {
                        // Prefer an instance that has not said sold_out yet.
                        for _ in 0..INSTANCES {
                            if !seen[instance].load(Ordering::Relaxed) {
                                break;
                            }
                            instance = (instance + 1) % INSTANCES;
                        }
                        let url = endpoints.get(instance);
                        let answer =
                            buy(&client, &url, &sale, &buyer, items.as_deref(), &key).await;
                        last.lock().unwrap()[instance] = answer.describe();
                        let (status, code) = (answer.status(), answer.code().map(str::to_owned));
                        let short = answer.body()["error"]["sku"].as_str().map(str::to_owned);
                        let none_left = answer.body()["error"]["remaining"] == 0;
                        let held = payment::holds_an_order(&answer).map(str::to_owned);
                        let request = PurchaseRequest {
                            instance,
                            buyer: buyer.clone(),
                            quantity: 1,
                            items: items.clone(),
                            key: Some(key.clone()),
                            phase: Phase::Final,
                        };
                        recorder.purchase(request, answer);
                        if let (true, Some(order_id)) = (holds, held) {
                            payment::pay(&client, &endpoints, &recorder, instance, &order_id).await;
                        }
                        match (status, code.as_deref()) {
                            (Some(409), Some("sold_out")) => {
                                seen[instance].store(true, Ordering::Relaxed);
                                break;
                            }
                            // This SKU is gone, others are not: the next
                            // buyers ask for another.
                            (Some(409), Some("insufficient_stock")) => {
                                if let (Some(sku), true) = (short, none_left) {
                                    skus.mark_empty(&sku);
                                }
                                break;
                            }
                            (Some(503) | None, _) => {
                                tokio::time::sleep(backoff).await;
                                backoff = (backoff * 2).min(Duration::from_secs(1));
                                instance = (instance + 1) % INSTANCES;
                            }
                            // Bought (201, 202 pending, 200) or refused for good.
                            _ => break,
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a final-phase worker panicked");
    }
    if all_seen(&seen) {
        return Ok(());
    }
    let last = last.lock().unwrap();
    let missing: Vec<String> = (0..INSTANCES)
        .filter(|&i| !seen[i].load(Ordering::Relaxed))
        .map(|i| format!("instance {i} last answered {}", last[i]))
        .collect();
    Err(format!(
        "the sale was not sold out everywhere within {} s ({} fresh buyers): {}",
        bound.as_secs(),
        next.load(Ordering::Relaxed).min(LATE_BUYERS),
        missing.join("; ")
    ))
}
