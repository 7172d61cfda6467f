//! Prometheus metrics. Every series is named `stockade_*` and listed once,
//! in [`SERIES`]: the help text `/metrics` shows, the table of
//! `docs/metrics.md` (checked by a test) and the tests all come from it.
//!
//! # Layout
//! - `series`: the table of every series ([`SERIES`]).
//! - this module: the recorder, its upkeep and retention, and the
//!   helpers that record.
//!
//! - Every series in the table is exported from the start (counters and
//!   gauges at zero, histograms empty), with each of its known label values,
//!   so a dashboard or an alert never waits for a first event.
//! - The recorder's upkeep runs on its own thread every
//!   [`UPKEEP_INTERVAL`]: histogram samples are folded into their buckets
//!   as they come, never piled up until the next scrape.
//! - Series that stop being updated (those of a sale that ended) are
//!   dropped from `/metrics` once they have been idle for the retention
//!   (`--metrics-retention-s`); the reconciler refreshes the open sales'
//!   series every second, and the upkeep refreshes the table's own series,
//!   so only a finished sale's series ever go.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

use crate::purchase::Answered;

mod series;

pub use series::{Kind, PURCHASE_OUTCOMES, SERIES, Series};

/// How often the recorder's upkeep runs.
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long an idle series stays in `/metrics` unless configured.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(15 * 60);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static UPKEEPS: AtomicU64 = AtomicU64::new(0);
static RETENTION_MS: AtomicU64 = AtomicU64::new(15 * 60 * 1000);

/// The process-wide Prometheus recorder, installed on first use with the
/// [`DEFAULT_RETENTION`].
pub fn prometheus() -> PrometheusHandle {
    install(DEFAULT_RETENTION)
}

/// Installs the process-wide recorder, dropping series idle for
/// `retention`, and starts its upkeep. The first call wins: later calls
/// return the installed recorder's handle.
pub fn install(retention: Duration) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            RETENTION_MS.store(retention.as_millis() as u64, Ordering::Relaxed);
            let handle = build(retention);
            describe_and_register();
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("stockade-metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP_INTERVAL);
                        upkeep.run_upkeep();
                        refresh_documented();
                        UPKEEPS.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .expect("the metrics upkeep thread starts");
            handle
        })
        .clone()
}

/// How long an idle series (and a sale's dashboard activity) is kept.
pub fn retention() -> Duration {
    Duration::from_millis(RETENTION_MS.load(Ordering::Relaxed))
}

/// How many upkeep rounds have run (for tests and diagnostics).
pub fn upkeep_rounds() -> u64 {
    UPKEEPS.load(Ordering::Relaxed)
}

fn build(retention: Duration) -> PrometheusHandle {
    let seconds = [
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1.0, 2.5, 5.0,
    ];
    let builder = PrometheusBuilder::new()
        .idle_timeout(
            MetricKindMask::COUNTER | MetricKindMask::GAUGE,
            Some(retention),
        )
        .upkeep_timeout(UPKEEP_INTERVAL)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full("stockade_writer_batch_size".into()),
                &[
                    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                ],
            )
        })
        .expect("bucket lists are not empty");
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    // Another recorder may already be installed (tests embedding several
    // servers): ours still renders what it records.
    let _ = metrics::set_global_recorder(recorder);
    handle
}

fn describe_and_register() {
    for series in SERIES {
        match series.kind {
            Kind::Counter => metrics::describe_counter!(series.name, series.help),
            Kind::Gauge => metrics::describe_gauge!(series.name, series.help),
            Kind::Histogram => metrics::describe_histogram!(series.name, series.help),
        }
    }
    refresh_documented();
}

/// Touches every documented series that is not per sale (and each of its
/// initial label values) without changing it: they exist from the start
/// and are never idle, so the retention only ever drops per-sale series.
fn refresh_documented() {
    for series in SERIES.iter().filter(|s| !s.per_sale) {
        let label = series.labels.first().copied();
        let values: Vec<Option<&'static str>> = if series.initial.is_empty() {
            vec![None]
        } else {
            series.initial.iter().copied().map(Some).collect()
        };
        for value in values {
            let labels: Vec<metrics::Label> = match (label, value) {
                (Some(label), Some(value)) => vec![metrics::Label::new(label, value)],
                _ => Vec::new(),
            };
            match series.kind {
                Kind::Counter => metrics::counter!(series.name, labels).increment(0),
                Kind::Gauge => metrics::gauge!(series.name, labels).increment(0.0),
                // Registering is enough: an empty histogram renders with
                // zero counts, and histograms are never dropped as idle.
                Kind::Histogram => drop(metrics::histogram!(series.name, labels)),
            }
        }
    }
}

/// The status classes of `stockade_http_responses_total`, by the status's
/// first digit (1 to 5).
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Handles of the series every request touches, taken once the recorder is
/// installed: a handle skips the lookup the macros make on every call (the
/// name and labels built, hashed and found under a lock). Keeping them is
/// safe because these series are documented, not per sale: every upkeep
/// touches them, so the retention never drops them from under a handle.
struct HotSeries {
    responses: [metrics::Counter; 5],
    /// By the position of the outcome in [`PURCHASE_OUTCOMES`].
    purchases: Vec<metrics::Counter>,
    purchase_seconds: metrics::Histogram,
    /// Waiting-room joins: a new ticket, then a buyer's existing one.
    joins: [metrics::Counter; 2],
}

static HOT: OnceLock<HotSeries> = OnceLock::new();

/// The hot series' handles, taken on first use. The recorder is installed
/// first if nothing has installed it yet: a handle taken before would
/// count into no recorder for good.
fn hot() -> &'static HotSeries {
    HOT.get_or_init(|| {
        prometheus();
        HotSeries {
            responses: STATUS_CLASSES
                .map(|class| metrics::counter!("stockade_http_responses_total", "class" => class)),
            purchases: PURCHASE_OUTCOMES
                .iter()
                .map(|&outcome| metrics::counter!("stockade_purchases_total", "outcome" => outcome))
                .collect(),
            purchase_seconds: metrics::histogram!("stockade_purchase_seconds"),
            joins: ["true", "false"].map(|created| {
                metrics::counter!("stockade_waiting_room_joins_total", "created" => created)
            }),
        }
    })
}

/// Counts one waiting-room join answered with a ticket
/// (`stockade_waiting_room_joins_total`): `created` for a new one.
pub fn count_join(created: bool) {
    hot().joins[usize::from(!created)].increment(1);
}

/// Counts one HTTP answer by its status class
/// (`stockade_http_responses_total`).
pub fn count_response(status: u16) {
    hot().responses[usize::from(status / 100).clamp(1, 5) - 1].increment(1);
}

/// Counts one answered purchase: by outcome, and for `sale` (a sale this
/// instance knows; None for unknown or invalid ids, which must not create
/// series) by sale and outcome.
pub fn record_purchase(sale: Option<&str>, answered: Answered, seconds: f64) {
    let outcome = answered.label();
    let hot = hot();
    // An outcome outside the documented list (an error code of the API
    // that is not a purchase's) is counted under its own label.
    match PURCHASE_OUTCOMES.iter().position(|o| *o == outcome) {
        Some(position) => hot.purchases[position].increment(1),
        None => metrics::counter!("stockade_purchases_total", "outcome" => outcome).increment(1),
    }
    if let Some(sale) = sale {
        metrics::counter!("stockade_sale_purchases_total", "sale" => sale.to_owned(), "outcome" => outcome)
            .increment(1);
    }
    hot.purchase_seconds.record(seconds);
}

/// The README's table of the series, in Markdown.
pub fn markdown_table() -> String {
    let mut table =
        String::from("| series | type | labels | meaning |\n| --- | --- | --- | --- |\n");
    for series in SERIES {
        table.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            series.name,
            series.kind.name(),
            series.labels.join(", "),
            series.help
        ));
    }
    table
}

/// Sets `stockade_sale_remaining` and each SKU's `stockade_sku_remaining`
/// from a snapshot of the sale.
pub fn record_remaining(snapshot: &stockade_core::SaleSnapshot) {
    let sale = snapshot.spec.id().to_string();
    metrics::gauge!("stockade_sale_remaining", "sale" => sale.clone())
        .set(f64::from(snapshot.remaining));
    for sku in &snapshot.skus {
        metrics::gauge!("stockade_sku_remaining", "sale" => sale.clone(), "sku" => sku.id.to_string())
            .set(f64::from(sku.remaining));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preregistered_purchase_outcome_is_an_answer() {
        for label in PURCHASE_OUTCOMES {
            assert!(Answered::parse(label).is_some(), "{label} is no answer");
        }
    }

    #[test]
    fn names_are_unique_and_labelled_series_say_which_values_start_at_zero() {
        let mut names: Vec<_> = SERIES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SERIES.len(), "a series is listed twice");
        for series in SERIES {
            assert!(series.name.starts_with("stockade_"), "{}", series.name);
            assert!(
                series.labels.len() <= 1 || series.per_sale,
                "{}",
                series.name
            );
            assert!(
                series.initial.is_empty() || !series.labels.is_empty(),
                "{}: initial values without a label",
                series.name
            );
            assert_eq!(
                series.per_sale,
                series.labels.contains(&"sale"),
                "{}",
                series.name
            );
            if series.kind == Kind::Counter {
                assert!(series.name.ends_with("_total"), "{}", series.name);
            }
        }
        assert!(markdown_table().contains("`stockade_circuit_opened_total` | counter"));
    }

    #[test]
    fn docs_metrics_md_holds_this_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
        let doc = std::fs::read_to_string(path).unwrap();
        assert!(
            doc.contains(&markdown_table()),
            "docs/metrics.md is out of date: replace its table with\n{}",
            markdown_table()
        );
    }
}
