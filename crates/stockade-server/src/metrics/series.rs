//! Every `stockade_*` series, once: its kind, labels, known label values
//! and help text.

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
/// (Each is an [`Answered`](crate::purchase::Answered) label: a fixed set, never user input; a test
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
        name: "stockade_sku_remaining",
        kind: Kind::Gauge,
        labels: &["sale", "sku"],
        initial: &[],
        per_sale: true,
        help: "Items one SKU of a sale has left, as last seen (refreshed with stockade_sale_remaining).",
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
        name: "stockade_dependency_up",
        kind: Kind::Gauge,
        labels: &["dependency"],
        initial: &[],
        per_sale: false,
        help: "1 if the dependency (store, engine) answered this instance's last readiness probe, else 0; a shared dependency down does not make the instance unready.",
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
    Series {
        name: "stockade_rate_limit_instances",
        kind: Kind::Gauge,
        labels: &[],
        initial: &[],
        per_sale: false,
        help: "Instances sharing the Redis rate limits, as the store's engine views count the live ones: while Redis does not answer, this instance enforces 1/this of each limit.",
    },
];
