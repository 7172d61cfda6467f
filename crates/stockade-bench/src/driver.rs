//! Sends a [`Workload`] at a [`Purchaser`] (a strategy, or a service over
//! HTTP) and tallies what every buyer was
//! told: `concurrency` tasks released together by a barrier, each taking
//! the next request until the crowd is served or the time is up, timing
//! every answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::latency::Latencies;
use crate::scenario::{Arrival, Workload};
use crate::strategy::{Answer, Purchaser};
use crate::timeline::{Timeline, WindowSummary};

/// How many failure messages are kept as examples.
const FAILURE_SAMPLES: usize = 3;

/// What the buyers were told.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Requests answered.
    pub requests: u64,
    /// Distinct buyers who asked.
    pub buyers: u64,
    /// Requests answered "purchased".
    pub purchased: u64,
    /// Requests answered "sold out".
    pub sold_out: u64,
    /// Requests refused because the buyer had already bought.
    pub already_purchased: u64,
    /// Requests that failed.
    pub failed: u64,
    /// The first few failure messages.
    pub failure_samples: Vec<String>,
    /// Buyers told "purchased" more than once.
    pub duplicate_buyers: u64,
    /// Buyers refused as repeat buyers who were never told "purchased".
    pub wrongly_refused: u64,
    /// Answer times.
    pub latencies: Latencies,
    /// From the first request to the last answer.
    pub elapsed: Duration,
    /// Second by second (timed runs only).
    pub timeline: Vec<WindowSummary>,
}

/// What one buyer task saw. Its answer times are kept as they are and go
/// into the run's one histogram at the end: a histogram of the full range
/// is about 400 KB, and one per task (10,000 tasks in the crowd) cost
/// gigabytes of zeroed pages, and a merge of each, that the run paid for.
#[derive(Default)]
struct WorkerTally {
    requests: u64,
    sold_out: u64,
    failed: u64,
    failure_samples: Vec<String>,
    purchased_by: Vec<usize>,
    refused: Vec<usize>,
    answer_times: Vec<Duration>,
    /// When this task's last answer came.
    last_answer: Option<Instant>,
}

/// Runs `workload` against `purchaser` (a strategy already set up).
/// `on_answer` is called once per answer, for a progress display.
pub async fn drive<P>(
    purchaser: Arc<P>,
    workload: &Workload,
    on_answer: Arc<dyn Fn() + Send + Sync>,
) -> Tally
where
    P: Purchaser + ?Sized + 'static,
{
    let next_request = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(tokio::sync::Barrier::new(workload.concurrency + 1));
    // One start instant for everyone, taken by whoever passes the barrier
    // first: a task scheduled late must not get a later deadline.
    let started_at = Arc::new(OnceLock::new());
    let timeline = Timeline::default();
    let timed = matches!(workload.arrival, Arrival::Timed { .. });
    let workers: Vec<_> = (0..workload.concurrency)
        .map(|_| {
            let purchaser = Arc::clone(&purchaser);
            let next_request = Arc::clone(&next_request);
            let start = Arc::clone(&start);
            let started_at = Arc::clone(&started_at);
            let on_answer = Arc::clone(&on_answer);
            let workload = workload.clone();
            let mut windows = timed.then(|| timeline.recorder());
            tokio::spawn(async move {
                let mut tally = WorkerTally::default();
                start.wait().await;
                let started = *started_at.get_or_init(Instant::now);
                let deadline = match workload.arrival {
                    Arrival::Timed { duration } => Some(started + duration),
                    Arrival::Burst { .. } => None,
                };
                let total = workload.requests();
                loop {
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        break;
                    }
                    let request = next_request.fetch_add(1, Ordering::Relaxed);
                    if total.is_some_and(|total| request >= total) {
                        break;
                    }
                    let buyer = workload.buyer_of(request);
                    let name = format!("buyer-{buyer}");
                    let asked = Instant::now();
                    let answer = purchaser.purchase(&name).await;
                    let answered = Instant::now();
                    let latency = answered - asked;
                    tally.answer_times.push(latency);
                    tally.last_answer = Some(answered);
                    // Answers after the deadline (the in-flight tail) count
                    // in the totals, not in the second-by-second windows.
                    let since_start = started.elapsed();
                    if let (Some(windows), Some(deadline)) = (&mut windows, deadline)
                        && started + since_start < deadline
                    {
                        windows.record(since_start, latency);
                    }
                    tally.requests += 1;
                    match answer {
                        Answer::Purchased => tally.purchased_by.push(buyer),
                        Answer::SoldOut => tally.sold_out += 1,
                        Answer::AlreadyPurchased => tally.refused.push(buyer),
                        Answer::Failed(message) => {
                            tally.failed += 1;
                            if tally.failure_samples.len() < FAILURE_SAMPLES {
                                tally.failure_samples.push(message);
                            }
                        }
                    }
                    on_answer();
                    // A strategy that never waits (the in-memory engine)
                    // would otherwise keep its worker thread to itself: with
                    // the cooperative budget the in-flight buyers interleave
                    // (every 128 requests or so), as concurrent clients do.
                    tokio::task::coop::consume_budget().await;
                }
                drop(windows);
                tally
            })
        })
        .collect();
    start.wait().await;
    let started = *started_at.get_or_init(Instant::now);
    let mut results = Vec::with_capacity(workers.len());
    for worker in workers {
        results.push(worker.await);
    }
    // The run ended with its last answer; adding up what the tasks saw is
    // not part of it.
    let ended = Instant::now();
    let mut total = WorkerTally::default();
    let mut latencies = Latencies::default();
    let mut last_answer = None;
    let mut panicked = 0;
    for result in results {
        match result {
            Ok(tally) => {
                total.requests += tally.requests;
                total.sold_out += tally.sold_out;
                total.failed += tally.failed;
                for sample in tally.failure_samples {
                    if total.failure_samples.len() < FAILURE_SAMPLES {
                        total.failure_samples.push(sample);
                    }
                }
                total.purchased_by.extend(tally.purchased_by);
                total.refused.extend(tally.refused);
                for latency in tally.answer_times {
                    latencies.record(latency);
                }
                last_answer = last_answer.max(tally.last_answer);
            }
            Err(error) => {
                panicked += 1;
                if total.failure_samples.len() < FAILURE_SAMPLES {
                    total
                        .failure_samples
                        .push(format!("a buyer task died: {error}"));
                }
            }
        }
    }
    let elapsed = run_span(started, last_answer, ended, panicked);
    total.failed += panicked;
    let asked = match workload.arrival {
        Arrival::Burst { buyers } => buyers as u64,
        Arrival::Timed { .. } => total.requests.div_ceil(workload.taps as u64),
    };
    let window_span = match workload.arrival {
        Arrival::Timed { duration } => duration.min(elapsed),
        Arrival::Burst { .. } => elapsed,
    };
    tally_buyers(
        total,
        latencies,
        asked,
        elapsed,
        timeline.summarize(window_span),
    )
}

/// How long a run took: from its first request to its last answer. A run
/// in which a task died has no sure last answer: then until every task was
/// done (`ended`).
fn run_span(
    started: Instant,
    last_answer: Option<Instant>,
    ended: Instant,
    panicked: u64,
) -> Duration {
    match last_answer {
        Some(at) if panicked == 0 => at.saturating_duration_since(started),
        _ => ended.saturating_duration_since(started),
    }
}

fn tally_buyers(
    mut total: WorkerTally,
    latencies: Latencies,
    buyers: u64,
    elapsed: Duration,
    timeline: Vec<WindowSummary>,
) -> Tally {
    total.purchased_by.sort_unstable();
    let mut duplicate_buyers = 0;
    for (i, buyer) in total.purchased_by.iter().enumerate() {
        // Count each buyer once, at its second purchase.
        if i > 0
            && total.purchased_by[i - 1] == *buyer
            && (i < 2 || total.purchased_by[i - 2] != *buyer)
        {
            duplicate_buyers += 1;
        }
    }
    let refused_requests = total.refused.len() as u64;
    total.refused.sort_unstable();
    total.refused.dedup();
    let wrongly_refused = total
        .refused
        .iter()
        .filter(|buyer| total.purchased_by.binary_search(buyer).is_err())
        .count() as u64;
    Tally {
        requests: total.requests,
        buyers,
        purchased: total.purchased_by.len() as u64,
        sold_out: total.sold_out,
        already_purchased: refused_requests,
        failed: total.failed,
        failure_samples: total.failure_samples,
        duplicate_buyers,
        wrongly_refused,
        latencies,
        elapsed,
        timeline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Arrival;

    /// Sells `stock` items, one per buyer, each answer after `pause`.
    struct Counter {
        stock: std::sync::atomic::AtomicI64,
        pause: Duration,
    }

    #[async_trait::async_trait]
    impl Purchaser for Counter {
        async fn purchase(&self, _buyer: &str) -> Answer {
            tokio::time::sleep(self.pause).await;
            if self.stock.fetch_sub(1, Ordering::Relaxed) > 0 {
                Answer::Purchased
            } else {
                Answer::SoldOut
            }
        }
    }

    /// Every answer of every task is in the run's histogram, and the run
    /// lasts at least as long as a buyer waits for an answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answer_is_timed_once() {
        let workload = Workload {
            scenario: "test".into(),
            arrival: Arrival::Burst { buyers: 3_000 },
            stock: 100,
            concurrency: 1_000,
            taps: 1,
            skus: 1,
        };
        let purchaser = Arc::new(Counter {
            stock: std::sync::atomic::AtomicI64::new(100),
            pause: Duration::from_millis(5),
        });
        let tally = drive(purchaser, &workload, Arc::new(|| {})).await;
        assert_eq!(tally.requests, 3_000);
        assert_eq!(tally.latencies.count(), 3_000);
        assert_eq!(tally.purchased, 100);
        assert_eq!(tally.sold_out, 2_900);
        assert!(tally.latencies.quantile_us(0.5) >= 5_000);
        assert!(
            tally.elapsed >= Duration::from_millis(15),
            "{:?}",
            tally.elapsed
        );
    }

    /// The run ends at its last answer, not when the tallies were added up
    /// (a dead task leaves no sure last answer: then when all were done).
    #[test]
    fn a_run_lasts_until_its_last_answer() {
        let started = Instant::now();
        let last = started + Duration::from_millis(10);
        let ended = started + Duration::from_millis(500);
        assert_eq!(
            run_span(started, Some(last), ended, 0),
            Duration::from_millis(10)
        );
        assert_eq!(
            run_span(started, Some(last), ended, 1),
            Duration::from_millis(500)
        );
        assert_eq!(
            run_span(started, None, ended, 0),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_buyer_served_three_times_counts_once_as_a_duplicate() {
        let total = WorkerTally {
            purchased_by: vec![4, 1, 4, 2, 4, 1],
            refused: vec![2, 3, 3],
            ..WorkerTally::default()
        };
        let tally = tally_buyers(
            total,
            Latencies::default(),
            5,
            Duration::from_millis(1),
            Vec::new(),
        );
        assert_eq!(tally.purchased, 6);
        assert_eq!(tally.duplicate_buyers, 2);
        // Buyer 3 was refused as a repeat buyer but never bought.
        assert_eq!(tally.wrongly_refused, 1);
    }
}
