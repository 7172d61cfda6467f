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

#[derive(Default)]
struct WorkerTally {
    requests: u64,
    sold_out: u64,
    failed: u64,
    failure_samples: Vec<String>,
    purchased_by: Vec<usize>,
    refused: Vec<usize>,
    latencies: Latencies,
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
                    let latency = asked.elapsed();
                    tally.latencies.record(latency);
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
    let mut total = WorkerTally::default();
    let mut panicked = 0;
    for worker in workers {
        match worker.await {
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
                total.latencies.merge(&tally.latencies);
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
    let elapsed = started.elapsed();
    total.failed += panicked;
    let asked = match workload.arrival {
        Arrival::Burst { buyers } => buyers as u64,
        Arrival::Timed { .. } => total.requests.div_ceil(workload.taps as u64),
    };
    let window_span = match workload.arrival {
        Arrival::Timed { duration } => duration.min(elapsed),
        Arrival::Burst { .. } => elapsed,
    };
    tally_buyers(total, asked, elapsed, timeline.summarize(window_span))
}

fn tally_buyers(
    mut total: WorkerTally,
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
        latencies: total.latencies,
        elapsed,
        timeline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buyer_served_three_times_counts_once_as_a_duplicate() {
        let total = WorkerTally {
            purchased_by: vec![4, 1, 4, 2, 4, 1],
            refused: vec![2, 3, 3],
            ..WorkerTally::default()
        };
        let tally = tally_buyers(total, 5, Duration::from_millis(1), Vec::new());
        assert_eq!(tally.purchased, 6);
        assert_eq!(tally.duplicate_buyers, 2);
        // Buyer 3 was refused as a repeat buyer but never bought.
        assert_eq!(tally.wrongly_refused, 1);
    }
}
