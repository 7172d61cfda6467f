//! The metrics say what happened. Dashboards and alerts read `/metrics`
//! (docs/metrics.md): a counter of orders that counts the wrong ones, a
//! void reason with no name, a batch larger than `--batch-max` or a
//! remaining-stock gauge left behind misleads the people running the
//! sale. Every instance of a run records into the run's own recorder (the
//! run's thread's, [`metrics::set_default_local_recorder`]), so the counts
//! are the cluster's, as a dashboard sums them; at the end, once the run
//! has settled, they are held to the store and to the sale's answers.

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, Snapshotter};
use stockade_core::OrderStatus;

use crate::oracle::Violation;

/// The events of `stockade_orders_total`.
const ORDER_EVENTS: &[&str] = &["held", "confirmed", "expired", "cancelled", "released"];

/// The reasons of `stockade_orders_voided_total`
/// (`stockade_store::VoidReason::label`).
const VOID_REASONS: &[&str] = &[
    "stale_epoch",
    "oversold",
    "over_limit",
    "key_taken",
    "unknown_sale",
    "unknown_sku",
    "earlier",
];

/// What the run's recorder holds, read once.
pub struct Recorded {
    /// Counters and gauges by name, each with its labels.
    values: Vec<(String, BTreeMap<String, String>, f64)>,
    /// Every sample of each histogram, by name.
    samples: BTreeMap<String, Vec<f64>>,
}

impl Recorded {
    /// Reads the recorder.
    pub fn read(snapshotter: &Snapshotter) -> Self {
        let mut values = Vec::new();
        let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let name = key.name().to_owned();
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            match value {
                DebugValue::Counter(n) => values.push((name, labels, n as f64)),
                DebugValue::Gauge(v) => values.push((name, labels, v.into_inner())),
                DebugValue::Histogram(vs) => samples
                    .entry(name)
                    .or_default()
                    .extend(vs.into_iter().map(|v| v.into_inner())),
            }
        }
        Self { values, samples }
    }

    /// The series named `name`, with their labels.
    fn series(&self, name: &str) -> impl Iterator<Item = (&BTreeMap<String, String>, f64)> {
        self.values
            .iter()
            .filter(move |(n, _, _)| n == name)
            .map(|(_, labels, v)| (labels, *v))
    }

    /// The sum of `stockade_orders_total` for `sale` and `event`.
    fn orders(&self, sale: &str, event: &str) -> u64 {
        self.series("stockade_orders_total")
            .filter(|(l, _)| label(l, "sale") == sale && label(l, "event") == event)
            .map(|(_, v)| v as u64)
            .sum()
    }
}

fn label<'a>(labels: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    labels.get(name).map_or("", String::as_str)
}

/// The order counters against the orders the store holds for `sale`: each
/// order entered `held` or `confirmed` when committed (a paid hold enters
/// `confirmed` again), each expired or cancelled one was counted once, and
/// no order is released that was not expired or cancelled.
pub fn orders(recorded: &Recorded, sale: &str, statuses: &[OrderStatus]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (labels, _) in recorded.series("stockade_orders_total") {
        if !ORDER_EVENTS.contains(&label(labels, "event")) {
            violations.push(format!(
                "metrics: stockade_orders_total has an event not in docs/metrics.md: {labels:?}"
            ));
        }
    }
    let count = |status: OrderStatus| statuses.iter().filter(|s| **s == status).count() as u64;
    let stored = statuses.len() as u64;
    let (held, confirmed) = (
        recorded.orders(sale, "held"),
        recorded.orders(sale, "confirmed"),
    );
    if held + confirmed < stored || held + confirmed > stored + held {
        violations.push(format!(
            "metrics: stockade_orders_total counts {held} held and {confirmed} confirmed for \
             the {stored} orders the store has (each enters one of them when committed, a paid \
             hold enters confirmed again)"
        ));
    }
    for (event, status) in [
        ("expired", OrderStatus::Expired),
        ("cancelled", OrderStatus::Cancelled),
    ] {
        let (counted, found) = (recorded.orders(sale, event), count(status));
        if counted != found {
            violations.push(format!(
                "metrics: stockade_orders_total counts {counted} {event}, the store has {found}"
            ));
        }
    }
    let released = recorded.orders(sale, "released");
    let given_back = count(OrderStatus::Expired) + count(OrderStatus::Cancelled);
    if released > given_back {
        violations.push(format!(
            "metrics: stockade_orders_total counts {released} released of {given_back} \
             expired or cancelled orders"
        ));
    }
    violations
}

/// Each void counted under a reason the store gives.
pub fn voids(recorded: &Recorded) -> Vec<Violation> {
    recorded
        .series("stockade_orders_voided_total")
        .filter(|(labels, _)| !VOID_REASONS.contains(&label(labels, "reason")))
        .map(|(labels, n)| {
            format!("metrics: {n} void(s) counted under an unknown reason: {labels:?}")
        })
        .collect()
}

/// No batch larger than the setting.
pub fn batches(recorded: &Recorded, batch_max: usize) -> Vec<Violation> {
    let largest = recorded
        .samples
        .get("stockade_writer_batch_size")
        .into_iter()
        .flatten()
        .fold(0.0f64, |a, b| a.max(*b));
    if largest > batch_max as f64 {
        vec![format!(
            "metrics: a writer's batch held {largest} orders, over --batch-max {batch_max}"
        )]
    } else {
        vec![]
    }
}

/// An open sale's remaining-stock gauges, refreshed every second, say what
/// the sale's answer says once the run has settled.
pub fn remaining(
    recorded: &Recorded,
    sale: &str,
    answered: &BTreeMap<String, i64>,
) -> Vec<Violation> {
    answered
        .iter()
        .filter_map(|(sku, left)| {
            let gauge: Vec<f64> = recorded
                .series("stockade_sku_remaining")
                .filter(|(l, _)| label(l, "sale") == sale && label(l, "sku") == sku)
                .map(|(_, v)| v)
                .collect();
            (gauge != [*left as f64]).then(|| {
                format!(
                    "metrics: stockade_sku_remaining of SKU {sku} reads {gauge:?} once the run \
                     settled, the sale answers {left}"
                )
            })
        })
        .collect()
}
