//! Prometheus metrics. Every series is named `stockade_*` and listed once,
//! in [`SERIES`]: the help text `/metrics` shows, the table of
//! `docs/metrics.md` (checked by a test) and the tests all come from it.
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

use crate::purchase::Answered;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in buckets (`_bucket`, `_sum`, `_count`).
    Histogram,
}

impl Kind {
    /// The Prometheus type name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// One documented series.
#[derive(Debug, Clone, Copy)]
pub struct Series {
    /// Its name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// Its label names.
    pub labels: &'static [&'static str],
    /// The label values exported at zero from the start (one label at
    /// most); other values appear when they first happen.
    pub initial: &'static [&'static str],
    /// Whether its labels name a sale: such series are created per sale,
    /// on the sale's first event, and dropped after it ended.
    pub per_sale: bool,
    /// What it means (the `# HELP` line).
    pub help: &'static str,
}

/// Every purchase outcome counted in `stockade_purchases_total{outcome}`
/// from the start. Other error codes of the API (e.g. `payload_too_large`)
/// are counted under their own code when they happen.
/// (Each is an [`Answered`] label: a fixed set, never user input; a test
/// checks that each parses.)
pub const PURCHASE_OUTCOMES: &[&str] = &[
    "purchased",
    "pending",
    "duplicate",
    "sold_out",
    "insufficient_stock",
    "limit_exceeded",
    "not_started",
    "ended",
    "unknown_sale",
    "invalid_request",
    "invalid_json",
    "invalid_body",
    "unsupported_media_type",
    "payload_too_large",
    "idempotency_key_reused",
    "order_failed",
    "overloaded",
    "rebuilding",
    "engine_unavailable",
    "store_unavailable",
    "user_mismatch",
    "rate_limited",
    "internal",
];

const REBUILD_REASONS: &[&str] = &[
    "startup",
    "create",
    "wrong_epoch",
    "engine_lost_sale",
    "store_refused",
    "redis_restarted",
    "drift",
    "fallback_over",
];

/// Every `stockade_*` series the service exports.
pub const SERIES: &[Series] = &[
    Series {
        name: "stockade_purchases_total",
        kind: Kind::Counter,
        labels: &["outcome"],
        initial: PURCHASE_OUTCOMES,
        per_sale: false,
        help: "Purchases answered, by outcome: purchased (201), pending (202, commit not confirmed within the deadline), duplicate (an idempotency key replayed), a rejection (sold_out, insufficient_stock, limit_exceeded, not_started, ended, unknown_sale) or the error code of the answer (overloaded, rebuilding, engine_unavailable, store_unavailable, invalid_request, ...).",
    },
    Series {
        name: "stockade_sale_purchases_total",
        kind: Kind::Counter,
        labels: &["sale", "outcome"],
        initial: &[],
        per_sale: true,
        help: "Purchases of one sale answered by this instance, by outcome (as stockade_purchases_total); dropped once the sale's series are idle for the retention.",
    },
    Series {
        name: "stockade_purchase_seconds",
        kind: Kind::Histogram,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Purchase latency, from the request to its answer, in seconds.",
    },
    Series {
        name: "stockade_http_responses_total",
        kind: Kind::Counter,
        labels: &["class"],
        initial: &["2xx", "3xx", "4xx", "5xx"],
        per_sale: false,
        help: "HTTP responses by status class (1xx to 5xx), every route.",
    },
    Series {
        name: "stockade_engine_seconds",
        kind: Kind::Histogram,
        labels: &["op"],
        initial: &["purchase"],
        per_sale: false,
        help: "Latency of a call deciding a purchase, in seconds: op=purchase (the engine), op=store_purchase (the store, under the fallback or --engine postgres).",
    },
    Series {
        name: "stockade_store_commit_seconds",
        kind: Kind::Histogram,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Time to commit one batch of orders to the store, in seconds.",
    },
    Series {
        name: "stockade_writer_batch_size",
        kind: Kind::Histogram,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Orders per store transaction of the group-commit writer.",
    },
    Series {
        name: "stockade_writer_queue_depth",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Orders accepted by the engine and waiting for their commit.",
    },
    Series {
        name: "stockade_writer_acks_dropped_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Decided orders left in the engine's outbox because the acknowledger was behind (the reconciler acknowledges them).",
    },
    Series {
        name: "stockade_sale_remaining",
        kind: Kind::Gauge,
        labels: &["sale"],
        initial: &[],
        per_sale: true,
        help: "Items a sale has left, as last seen (refreshed every second while the sale is open; dropped once the sale ended and the retention passed).",
    },
    Series {
        name: "stockade_outbox_oldest_entry_seconds",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Age of the oldest order left in an engine outbox after the reconciler's last pass (0: none); above stockade_outbox_grace_seconds the store is not taking the orders.",
    },
    Series {
        name: "stockade_outbox_grace_seconds",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "The outbox grace period (STOCKADE_OUTBOX_GRACE_MS): how old an outbox entry gets before the reconciler commits it itself.",
    },
    Series {
        name: "stockade_rebuilds_total",
        kind: Kind::Counter,
        labels: &["reason"],
        initial: REBUILD_REASONS,
        per_sale: false,
        help: "Fenced rebuilds of a sale's engine state from the store, by reason.",
    },
    Series {
        name: "stockade_rebuild_failures_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Rebuild attempts that failed and are retried (the sale answers 503 rebuilding meanwhile); a steady rise means recovery is looping.",
    },
    Series {
        name: "stockade_engine_store_drift_sales",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Open sales whose engine offered more stock than the store has left at the reconciler's last pass (rebuilt when seen twice in a row).",
    },
    Series {
        name: "stockade_orders_voided_total",
        kind: Kind::Counter,
        labels: &["reason"],
        initial: &["stale_epoch", "oversold", "over_limit"],
        per_sale: false,
        help: "Orders the store refused at commit (nothing sold), by reason; oversold and over_limit mean an engine was out of line.",
    },
    Series {
        name: "stockade_fallbacks_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Sales moved to the PostgreSQL fallback.",
    },
    Series {
        name: "stockade_fallbacks_refused_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Moves to the fallback this instance asked for and the store's engine views refused: another instance reached Redis lately (this one is cut off from it).",
    },
    Series {
        name: "stockade_sales_retired_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Ended sales let go after --ended-sale-retention-s: their engine state, queue and what this instance cached of them dropped (the store keeps the orders).",
    },
    Series {
        name: "stockade_circuit_opened_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Times the engine circuit breaker opened.",
    },
    Series {
        name: "stockade_circuit_open",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "1 while the engine circuit breaker is open or half-open (purchases fail fast or go to the fallback), else 0.",
    },
    Series {
        name: "stockade_rejections_cached_total",
        kind: Kind::Counter,
        labels: &["reason"],
        initial: &["sold_out", "not_started", "ended", "unknown_sale"],
        per_sale: false,
        help: "Purchases refused from what the instance knew (sold_out, not_started, ended, unknown_sale), without asking the engine or the store.",
    },
    Series {
        name: "stockade_purchases_shed_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Purchases answered 503 overloaded: the instance had --max-purchases-in-flight in flight.",
    },
    Series {
        name: "stockade_orders_total",
        kind: Kind::Counter,
        labels: &["sale", "event"],
        initial: &[],
        per_sale: true,
        help: "Orders of one sale entering a state: held and confirmed when committed (confirmed also when a hold is paid), expired, cancelled, and released when the engine took the items of a cancelled or expired order back.",
    },
    Series {
        name: "stockade_hold_expiry_lateness_seconds",
        kind: Kind::Histogram,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "From a payment hold's deadline to its expiry (bound: 1 s while the store is reachable).",
    },
    Series {
        name: "stockade_waiting_room_joins_total",
        kind: Kind::Counter,
        labels: &["created"],
        initial: &["true", "false"],
        per_sale: false,
        help: "Waiting-room joins answered with a ticket: created=true for a new ticket, false for a buyer's existing one.",
    },
    Series {
        name: "stockade_waiting_room_admitted_total",
        kind: Kind::Counter,
        labels: &["sale"],
        initial: &[],
        per_sale: true,
        help: "Tickets a sale's waiting room admitted (each with an admission token).",
    },
    Series {
        name: "stockade_waiting_room_waiting",
        kind: Kind::Gauge,
        labels: &["sale"],
        initial: &[],
        per_sale: true,
        help: "Tickets waiting in a sale's waiting room at this instance's last tick.",
    },
    Series {
        name: "stockade_waiting_room_outstanding",
        kind: Kind::Gauge,
        labels: &["sale"],
        initial: &[],
        per_sale: true,
        help: "Admissions of a sale not used yet (never more than the remaining stock times the admission factor).",
    },
    Series {
        name: "stockade_rate_limited_total",
        kind: Kind::Counter,
        labels: &["scope"],
        initial: &["buyer", "ip"],
        per_sale: false,
        help: "Requests answered 429 rate_limited, by the limit they broke (per buyer or per client address).",
    },
    Series {
        name: "stockade_rate_limit_fallbacks_total",
        kind: Kind::Counter,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Rate-limit checks Redis did not answer within 50 ms (or failed), decided by this instance's share of the limit instead.",
    },
];

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

/// Counts one answered purchase: by outcome, and for `sale` (a sale this
/// instance knows; None for unknown or invalid ids, which must not create
/// series) by sale and outcome.
pub fn record_purchase(sale: Option<&str>, answered: Answered, seconds: f64) {
    let outcome = answered.label();
    metrics::counter!("stockade_purchases_total", "outcome" => outcome).increment(1);
    if let Some(sale) = sale {
        metrics::counter!("stockade_sale_purchases_total", "sale" => sale.to_owned(), "outcome" => outcome)
            .increment(1);
    }
    metrics::histogram!("stockade_purchase_seconds").record(seconds);
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
