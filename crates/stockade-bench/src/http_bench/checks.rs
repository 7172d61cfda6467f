//! What is checked after a phase: the answers the phase expects, the
//! baseline's echoes, and the service's store and stock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::driver::Tally;
use crate::http_load::{self, HttpSale};
use crate::scenario::MAX_STOCK;

/// Answers other than those the phase expects, and requests without one.
/// An expected `"503"` takes every 503, whatever its error code.
fn unexpected_answers(
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
    expected: &[&str],
) -> Vec<String> {
    let mut problems = Vec::new();
    let unexpected: Vec<String> = statuses
        .iter()
        .filter(|(status, _)| {
            !expected
                .iter()
                .any(|e| status == e || status.starts_with(&format!("{e} ")))
        })
        .map(|(status, count)| format!("{count} × {status}"))
        .collect();
    if !unexpected.is_empty() {
        problems.push(format!(
            "unexpected answers: {} (for example: {})",
            unexpected.join(", "),
            tally.failure_samples.join(" | ")
        ));
    }
    let counted: u64 = statuses.values().sum();
    if counted != tally.requests {
        problems.push(format!(
            "{} requests answered but {counted} answers counted by status",
            tally.requests
        ));
    }
    problems
}

pub(super) fn baseline_problems(tally: &Tally, statuses: &BTreeMap<String, u64>) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["201"]);
    if tally.failed > 0 && problems.is_empty() {
        problems.push(format!(
            "{} echoes did not match the request: {}",
            tally.failed,
            tally.failure_samples.join(" | ")
        ));
    }
    problems
}

/// A 503 (load shed, or the engine briefly unavailable) is an answer, not a
/// broken invariant: it is counted and shown, and allowed.
const SHED: &str = "503";

pub(super) async fn committed_problems(
    service: &HttpSale,
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["201", "202", SHED]);
    let answered =
        statuses.get("201").copied().unwrap_or(0) + statuses.get("202").copied().unwrap_or(0);
    if answered != tally.purchased {
        problems.push(format!(
            "{answered} answers 201/202 but {} purchases tallied",
            tally.purchased
        ));
    }
    if tally.duplicate_buyers > 0 {
        problems.push(format!(
            "{} buyers were told twice that they bought",
            tally.duplicate_buyers
        ));
    }
    // Orders answered 202 may still be committing: give them a moment.
    let started = Instant::now();
    let verification = loop {
        let verification = service.verify().await;
        let settled = matches!(&verification, Ok(v) if v.recorded_orders >= Some(tally.purchased));
        if settled || started.elapsed() > http_load::SETTLE_TIMEOUT {
            break verification;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    match verification {
        Ok(v) => {
            let live = v.recorded_orders.unwrap_or(0);
            if live != tally.purchased {
                problems.push(format!(
                    "{} purchases answered 201/202 but the store holds {live} live orders",
                    tally.purchased
                ));
            }
            let sold = i64::from(MAX_STOCK) - v.remaining;
            if sold != live as i64 {
                problems.push(format!(
                    "the sale says {sold} items sold but the store holds {live} live orders"
                ));
            }
        }
        Err(error) => problems.push(format!("could not read the sale back: {error}")),
    }
    problems.extend(http_load::store_problems(service).await);
    problems
}

pub(super) async fn sold_out_problems(
    service: &HttpSale,
    tally: &Tally,
    statuses: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut problems = unexpected_answers(tally, statuses, &["409 sold_out", SHED]);
    match service.verify().await {
        Ok(v) => {
            if v.remaining != 0 || v.recorded_orders != Some(1) {
                problems.push(format!(
                    "the sold-out sale should hold its one order and no stock, \
                     not {} left and {:?} orders",
                    v.remaining, v.recorded_orders
                ));
            }
        }
        Err(error) => problems.push(format!("could not read the sale back: {error}")),
    }
    problems
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_phase_does_not_expect_are_problems() {
        let tally = Tally {
            requests: 10,
            ..Tally::default()
        };
        let fine = BTreeMap::from([
            ("409 sold_out".to_owned(), 8),
            ("503 overloaded".to_owned(), 2),
        ]);
        assert!(unexpected_answers(&tally, &fine, &["409 sold_out", SHED]).is_empty());
        let odd = BTreeMap::from([("409 sold_out".to_owned(), 8), ("no answer".to_owned(), 1)]);
        let problems = unexpected_answers(&tally, &odd, &["409 sold_out", SHED]);
        assert!(problems[0].contains("1 × no answer"), "{problems:?}");
        assert!(
            problems[1].contains("10 requests answered but 9"),
            "{problems:?}"
        );
    }
}
