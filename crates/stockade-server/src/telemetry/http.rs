//! The request span: continuing the caller's `traceparent`, recording the
//! answer's status.

use super::is_on;
use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_http::HeaderExtractor;
use std::time::Duration;
use tower_http::trace::{DefaultOnResponse, OnResponse};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The span of one HTTP request (`make_span_with` of the router's trace
/// layer): a server span named `METHOD ROUTE`, with the request's method,
/// path and route, and empty fields the answer and the purchase pipeline
/// fill in (`http.response.status_code`, `sale_id`, `order_id`). While
/// traces are exported, it continues the caller's W3C `traceparent`.
///
/// DEBUG, like the span it replaces: disabled at its callsite unless
/// traces or debug logs are on, and then nothing below runs.
pub fn request_span<B>(request: &Request<B>) -> Span {
    // Field values are evaluated only when the span is enabled.
    let route = || {
        request
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str)
    };
    let span = tracing::debug_span!(
        "request",
        otel.name = %format_args!("{} {}", request.method(), route().unwrap_or("(no route)")),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %request.method(),
        url.path = request.uri().path(),
        http.route = route(),
        http.response.status_code = Empty,
        sale_id = Empty,
        order_id = Empty,
    );
    if is_on() && !span.is_disabled() {
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&HeaderExtractor(request.headers()))
        });
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent);
        }
    }
    span
}

/// Records the answer's status on the request span (an error status for
/// 5xx, as OpenTelemetry's HTTP conventions have servers do), logs it as
/// the trace layer did before (a DEBUG event), and counts it by status
/// class (`stockade_http_responses_total`). Counting here, where every
/// answer already passes, spares each request a middleware of its own (a
/// boxed future and a clone of the routes behind it).
#[derive(Debug, Clone, Default)]
pub struct RecordStatus(DefaultOnResponse);

impl<B> OnResponse<B> for RecordStatus {
    fn on_response(self, response: &Response<B>, latency: Duration, span: &Span) {
        let status = response.status();
        crate::metrics::count_response(status.as_u16());
        span.record("http.response.status_code", status.as_u16());
        if status.is_server_error() {
            span.record("otel.status_code", "error");
        }
        self.0.on_response(response, latency, span);
    }
}
