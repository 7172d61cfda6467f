//! Prometheus metrics. Every series is named `stockade_*`:
//!
//! | series | kind | what |
//! | --- | --- | --- |
//! | `stockade_purchases_total{outcome}` | counter | purchases by outcome |
//! | `stockade_purchase_seconds` | histogram | purchase latency, request to answer |
//! | `stockade_engine_seconds{op}` | histogram | engine call latency |
//! | `stockade_store_commit_seconds` | histogram | one batch commit |
//! | `stockade_writer_batch_size` | histogram | orders per commit |
//! | `stockade_writer_queue_depth` | gauge | orders waiting for commit |
//! | `stockade_writer_acks_dropped_total` | counter | decided orders left in the engine's outbox because the acknowledger was behind (the reconciler acknowledges them) |
//! | `stockade_sale_remaining{sale}` | gauge | stock left, as last seen |
//! | `stockade_rebuilds_total{reason}` | counter | fenced rebuilds of a sale's engine state from the store |
//! | `stockade_orders_voided_total{reason}` | counter | orders the store refused at commit (nothing sold) |
//! | `stockade_fallbacks_total` | counter | sales moved to the PostgreSQL fallback |
//! | `stockade_circuit_opened_total` | counter | times the engine circuit breaker opened |
//! | `stockade_rejections_cached_total{reason}` | counter | purchases refused from what the instance knew (sold_out, not_started, ended, unknown_sale), without asking the engine or the store |
//! | `stockade_orders_total{sale,event}` | counter | orders entering a state, per sale: `held` and `confirmed` when committed (`confirmed` also when a hold is paid), `expired`, `cancelled`, and `released` when the engine took the items of a cancelled or expired order back |
//! | `stockade_hold_expiry_lateness_seconds` | histogram | from a hold's deadline to its expiry (bound: 1 s while the store is reachable) |
//! | `stockade_purchases_shed_total` | counter | purchases answered 503 `overloaded`: the instance had `--max-purchases-in-flight` in flight |

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process-wide Prometheus recorder, installed on first use.
pub fn prometheus() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let seconds = [
                0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05,
                0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ];
            let builder = PrometheusBuilder::new()
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
            // Another recorder may already be installed (tests embedding
            // several servers): ours still renders what it records.
            let _ = metrics::set_global_recorder(recorder);
            // Series that must be visible before their first event.
            metrics::counter!("stockade_rebuilds_total", "reason" => "startup").increment(0);
            metrics::counter!("stockade_orders_voided_total", "reason" => "stale_epoch")
                .increment(0);
            metrics::counter!("stockade_fallbacks_total").increment(0);
            metrics::counter!("stockade_purchases_shed_total").increment(0);
            metrics::counter!("stockade_rejections_cached_total", "reason" => "sold_out")
                .increment(0);
            handle
        })
        .clone()
}

/// Counts `count` orders of `sale` entering `event` (`held`, `confirmed`,
/// `expired`, `cancelled`, `released`): `stockade_orders_total`.
pub fn order_transitions(sale: &str, event: &'static str, count: usize) {
    if count > 0 {
        metrics::counter!("stockade_orders_total", "sale" => sale.to_owned(), "event" => event)
            .increment(count as u64);
    }
}
