//! OpenTelemetry traces: `--otlp-endpoint` (or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) exports the service's spans over OTLP/HTTP
//! (protobuf) to a collector. See `docs/operations.md`, Traces.
//!
//! The spans are ordinary `tracing` spans at DEBUG level, made where the
//! work is (so a `RUST_LOG=debug` log shows them too):
//! - `request` ([`request_span`]), one per HTTP request, a server span
//!   named `METHOD ROUTE` that continues the caller's W3C `traceparent`;
//!   `http.response.status_code` is recorded on it with the answer
//!   ([`RecordStatus`]), and a purchase records `sale_id` and `order_id`;
//! - `purchase` (`Purchases::decide`) and its steps `route`, `gate`,
//!   `settle` and `replay`, children of the request;
//! - `engine batch` (in `stockade_engine`), one per script or function
//!   call that decides a micro-batch of purchases: a root span of its own,
//!   linked to the request span of every purchase it carried;
//! - `store commit` (the writer), one per batch transaction, linked
//!   likewise to the request span of every order it committed.
//!
//! Links are made with `tracing`'s `follows_from`, which the OpenTelemetry
//! layer turns into span links: each queued purchase or order carries the
//! [`tracing::Span`] that was current when it was queued, so the engine
//! crate needs nothing of OpenTelemetry.
//!
//! # Off costs nothing
//! With no endpoint, [`install`] is never called: no OpenTelemetry layer is
//! added to the subscriber, the spans above are disabled at their callsite
//! by the log filter (DEBUG is off by default), and what the queued
//! purchases and orders carry is [`tracing::Span::none()`], a handle that
//! owns nothing. No context is extracted and nothing is allocated per
//! request.
//!
//! # Exporting
//! Spans go through the SDK's batch span processor (its own thread; the
//! standard `OTEL_BSP_*` variables tune it, `OTEL_TRACES_SAMPLER` samples)
//! to the OTLP exporter, which sends them with a hyper client driven by a
//! one-thread runtime of its own (`ExportClient`), so exports never
//! compete with requests for the service's runtime and a flush at shutdown
//! cannot wait on it.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

mod export;
mod http;
mod logs;

use export::{EXPORT_TIMEOUT, ExportClient};
pub use http::{RecordStatus, request_span};
pub use logs::WithTraceIds;

/// The service name spans carry when `OTEL_SERVICE_NAME` (or
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) does not name one.
pub const DEFAULT_SERVICE_NAME: &str = "stockade";

/// The path the collector takes spans at, under a base URL.
pub const TRACES_PATH: &str = "/v1/traces";

/// Whether [`install`] ran: the request span then extracts the caller's
/// context. Read once per request, and only when the span is enabled.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Where spans go: the full URL they are POSTed to, and what set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://host:port/v1/traces` (or the traces variable's URL as given).
    pub url: String,
    /// The setting or variable it came from, as it was given.
    pub from: String,
}

/// A setting or standard variable that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct TelemetryError {
    /// The flag, variable or key.
    pub setting: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Where spans go, if anywhere. `setting` is `--otlp-endpoint` (named as
/// given, `named`); it wins over the standard variables, read with `env`:
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, used as it is), then
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, like the setting). None when
/// none is set, or when `OTEL_SDK_DISABLED=true`.
pub fn endpoint(
    setting: Option<(&str, String)>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Endpoint>, TelemetryError> {
    let given = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    if given("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let bad = |setting: &str, reason: String| TelemetryError {
        setting: setting.to_owned(),
        reason,
    };
    if let Some((url, named)) = setting {
        return Ok(Some(Endpoint {
            url: format!("{url}{TRACES_PATH}"),
            from: named,
        }));
    }
    for (name, base) in [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", false),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", true),
    ] {
        if let Some(url) = given(name) {
            let url = check_endpoint(url.trim()).map_err(|reason| bad(name, reason))?;
            let url = if base {
                format!("{url}{TRACES_PATH}")
            } else {
                url
            };
            return Ok(Some(Endpoint {
                url,
                from: name.to_owned(),
            }));
        }
    }
    Ok(None)
}

/// The protocol the standard variables ask for
/// (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, then `OTEL_EXPORTER_OTLP_PROTOCOL`)
/// when it is not `http/protobuf`, the only one spoken here: the caller
/// warns that it is ignored.
pub fn unsupported_protocol(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|name| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    })
    .filter(|protocol| protocol != "http/protobuf")
}

/// How long one export may take: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`,
/// then `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds, as the specification
/// has them), else 10 s. A value that is not a positive number of
/// milliseconds is passed over.
pub fn export_timeout(env: impl Fn(&str) -> Option<String>) -> std::time::Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|name| env(name)?.trim().parse::<u64>().ok().filter(|ms| *ms > 0))
    .map_or(EXPORT_TIMEOUT, std::time::Duration::from_millis)
}

/// An OTLP/HTTP URL: `http://` or `https://` (TLS, checked against the
/// webpki roots and the CA file `OTEL_EXPORTER_OTLP_CERTIFICATE` names)
/// `host[:port][/path]`, without credentials, a query or a
/// fragment; returned without a trailing slash.
pub fn check_endpoint(url: &str) -> Result<String, String> {
    let why = |what: &str| {
        format!(
            "{url:?} {what}; give the collector's OTLP/HTTP address, such as http://otel-collector:4318"
        )
    };
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err(why("is not an http:// or https:// URL"));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') || rest.contains(['?', '#', ' ']) {
        return Err(why("is not a plain http(s)://HOST[:PORT][/PATH] URL"));
    }
    if url.parse::<axum::http::Uri>().is_err() {
        return Err(why("is not a valid URL"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The exporting pipeline, kept by whoever installed it: [`Tracing::shutdown`]
/// exports what is still queued.
#[derive(Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Exports the spans still queued and stops the exporter. Blocks until
    /// done (at most the export timeout).
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "could not export the last spans");
        }
    }

    /// Exports the spans queued so far, waiting until done.
    pub fn flush(&self) {
        if let Err(error) = self.provider.force_flush() {
            tracing::warn!(%error, "could not export spans");
        }
    }
}

/// Builds the exporter and the OpenTelemetry layer for `endpoint`, sets the
/// W3C trace-context propagator, and turns the request spans' context
/// extraction on. The layer takes the `stockade*` crates' spans (at every
/// level) and events at INFO and above (as span events); add it beside
/// the log layer, each with its own filter.
pub fn install<S>(endpoint: &Endpoint) -> Result<(impl Layer<S> + use<S>, Tracing), TelemetryError>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    let failed = |reason: String| TelemetryError {
        setting: endpoint.from.clone(),
        reason,
    };
    let timeout = export_timeout(|name| std::env::var(name).ok());
    let tls = export::tls_config(|name| std::env::var(name).ok())
        .map_err(|(setting, reason)| TelemetryError { setting, reason })?;
    let client = ExportClient::new(timeout, tls)
        .map_err(|e| failed(format!("cannot start the exporter: {e}")))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.url.clone())
        .with_timeout(timeout)
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let provider = provider_builder()
        .with_batch_exporter(exporter)
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("stockade");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    ON.store(true, Ordering::Relaxed);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(filter_fn(|metadata| {
            if metadata.is_span() {
                metadata.target().starts_with("stockade")
            } else {
                *metadata.level() <= tracing::Level::INFO
            }
        }));
    Ok((layer, Tracing { provider }))
}

/// The most purchases one batch span links: the largest store batch
/// `--batch-max` allows (512 by default; the engine's are 256). The SDK
/// keeps 128 links a span by default and drops the rest; a batch span must
/// link every purchase it carried. Links cost only when made.
pub const MAX_BATCH_LINKS: usize = 10_000;

/// The provider's settings: a span keeps as many links as the largest
/// batch has purchases (or more, if `OTEL_SPAN_LINK_COUNT_LIMIT` says so).
fn provider_builder() -> opentelemetry_sdk::trace::TracerProviderBuilder {
    let asked = std::env::var("OTEL_SPAN_LINK_COUNT_LIMIT")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    SdkTracerProvider::builder().with_max_links_per_span(asked.max(MAX_BATCH_LINKS as u32))
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`),
/// named `stockade` when neither names the service.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named {
        detected
    } else {
        Resource::builder()
            .with_service_name(DEFAULT_SERVICE_NAME)
            .build()
    }
}

#[cfg(test)]
mod tests;
