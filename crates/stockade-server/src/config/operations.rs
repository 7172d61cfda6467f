//! What operators see and how long things are kept: the log format, where
//! traces go, the dashboard's logins, the retention of ended sales and
//! their series.

use std::time::Duration;

use super::group::settings_group;
use super::{ConfigError, Sources, invalid};

settings_group! {
    /// Logs, traces, dashboard and retention.
    #[command(next_help_heading = "Logs, traces, dashboard and retention")]
    pub struct OperationsSettings {
        /// Log lines as text (coloured on a terminal, plain otherwise;
        /// NO_COLOR turns colour off) or json, one object per line, for log
        /// shippers. RUST_LOG picks what is logged.
        #[arg(long, env = "STOCKADE_LOG_FORMAT", value_name = "text|json", default_value = "text")]
        pub log_format: Option<String>,
        /// The OpenTelemetry collector to send traces to, as OTLP over
        /// HTTP (protobuf): its base URL, http://HOST:4318, spans going to
        /// its /v1/traces. Unset, the standard OTEL_EXPORTER_OTLP_ENDPOINT
        /// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is read instead; with
        /// none of them, no spans are made at all. OTEL_SERVICE_NAME names
        /// the service (default stockade). See docs/operations.md, Traces.
        #[arg(long, env = "STOCKADE_OTLP_ENDPOINT", value_name = "URL")]
        pub otlp_endpoint: Option<String>,
        /// How long a login to the live dashboard (GET /dashboard) lasts, in
        /// seconds (60 to 604800).
        #[arg(long, env = "STOCKADE_DASHBOARD_SESSION_TTL_S", value_name = "S", default_value = "28800")]
        pub dashboard_session_ttl_s: Option<u64>,
        /// How long the /metrics series of a sale that ended (anything no
        /// longer updated) are kept, in seconds (1 to 86400).
        #[arg(long, env = "STOCKADE_METRICS_RETENTION_S", value_name = "S", default_value = "900")]
        pub metrics_retention_s: Option<u64>,
        /// How long after its end a sale's engine state (its Redis keys get
        /// this time to live when it ends) and waiting room are kept, in
        /// seconds (0 to 2592000); then they are dropped, once its outbox
        /// is empty, with what each instance cached of it (counted in
        /// stockade_sales_retired_total). The store keeps every order.
        #[arg(long, env = "STOCKADE_ENDED_SALE_RETENTION_S", value_name = "S", default_value = "86400")]
        pub ended_sale_retention_s: Option<u64>,
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For people: coloured on a terminal, plain otherwise.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// The operations settings, checked.
#[derive(Debug, Clone)]
pub(super) struct Operations {
    pub(super) log_format: LogFormat,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) dashboard_session_ttl: Duration,
    pub(super) metrics_retention: Duration,
    pub(super) ended_sale_retention: Duration,
}

impl OperationsSettings {
    /// The log format one of the two, every duration within its bounds.
    pub(super) fn resolve(&self, sources: &Sources) -> Result<Operations, ConfigError> {
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        let log_format = match self
            .log_format
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
        {
            "" | "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(bad(
                    "log_format",
                    format!("{other:?} is not one of: text, json"),
                ));
            }
        };
        let otlp_endpoint = self
            .otlp_endpoint
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(|url| {
                crate::telemetry::check_endpoint(url).map_err(|reason| bad("otlp_endpoint", reason))
            })
            .transpose()?;
        let session_ttl = self.dashboard_session_ttl_s.unwrap_or_default();
        if !(60..=7 * 24 * 3600).contains(&session_ttl) {
            return Err(bad(
                "dashboard_session_ttl_s",
                format!("must be between 60 and 604800 seconds (it is {session_ttl})"),
            ));
        }
        let ended_sale_retention = self.ended_sale_retention_s.unwrap_or_default();
        if ended_sale_retention > 30 * 86_400 {
            return Err(bad(
                "ended_sale_retention_s",
                format!(
                    "must be between 0 and 2592000 seconds (30 days; it is {ended_sale_retention})"
                ),
            ));
        }
        let metrics_retention = self.metrics_retention_s.unwrap_or_default();
        if !(1..=24 * 3600).contains(&metrics_retention) {
            return Err(bad(
                "metrics_retention_s",
                format!("must be between 1 and 86400 seconds (it is {metrics_retention})"),
            ));
        }
        Ok(Operations {
            log_format,
            otlp_endpoint,
            dashboard_session_ttl: Duration::from_secs(session_ttl),
            metrics_retention: Duration::from_secs(metrics_retention),
            ended_sale_retention: Duration::from_secs(ended_sale_retention),
        })
    }
}
