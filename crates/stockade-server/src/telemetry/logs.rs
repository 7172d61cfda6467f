//! JSON log lines that carry the trace and span ids.

use opentelemetry::trace::TraceContextExt;
use tracing::Subscriber;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// A JSON log line with the current span's `trace_id` and `span_id` (hex,
/// as in `traceparent`) as top-level fields, when there is a span being
/// exported; the line of `inner` as it was otherwise. Used only while
/// traces are exported.
#[derive(Debug)]
pub struct WithTraceIds<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
    N: for<'writer> FormatFields<'writer> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        // The OpenTelemetry layer makes the innermost exported span's
        // context current while it is entered.
        let context = opentelemetry::Context::current();
        let span = context.span();
        let ids = span.span_context();
        if !ids.is_valid() {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let object = line.trim_end();
        let Some(fields) = object.strip_suffix('}') else {
            return writer.write_str(&line);
        };
        let comma = if fields.trim_end().ends_with('{') {
            ""
        } else {
            ","
        };
        write!(
            writer,
            "{fields}{comma}\"trace_id\":\"{}\",\"span_id\":\"{}\"}}",
            ids.trace_id(),
            ids.span_id()
        )?;
        writer.write_str(&line[object.len()..])
    }
}
