//! The service's own events a run keeps (as the instances log them, through
//! `tracing`, on the run's thread): the sale's moves to the fallback, the
//! engine's rebuilds (a move back among them), and each order the store's
//! arbiter refused after an engine had accepted it. They go into the event
//! log (so `stockade sim --seed X --log` shows them) and into the
//! [`History`] the oracle judges (see [`crate::agreement`]).
//!
//! And the writer's batch spans (`store commit`, docs/operations.md,
//! "Traces"): each closed without an error must say how many of its orders
//! committed and how many the store refused (all of them, between the two)
//! and, a batch of one sale, which sale.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use crate::clock::TrueTime;
use crate::history::{History, Move, Voided};

/// What the service logs when a sale moves to the fallback.
const TO_FALLBACK: &str = "the sale moves to the PostgreSQL fallback";
/// What it logs when a rebuild puts the sale under a new epoch.
const REBUILT: &str = "engine rebuilt from the store";
/// What it logs for each order the store refused after an engine had
/// accepted it (`stockade_server::writer::log_voids`).
const REFUSED: &str = "the store refused an order the engine had accepted";
/// The writer's span of one batch's commit
/// (`stockade_server::writer::commit_span`).
const COMMIT_SPAN: &str = "store commit";

/// Keeps the service's events in `history` while the guard lives (on this
/// thread only: the run's).
pub fn capture(history: &History, time: TrueTime) -> DefaultGuard {
    let layer = Capture {
        history: history.clone(),
        time,
    };
    tracing::subscriber::set_default(tracing_subscriber::registry().with(layer))
}

struct Capture {
    history: History,
    time: TrueTime,
}

/// Only the service's events at info or above and the writer's batch
/// spans: every other callsite (its other spans, the libraries') stays off
/// and costs nothing.
fn wanted(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("stockade_server")
        && if meta.is_span() {
            meta.name() == COMMIT_SPAN
        } else {
            *meta.level() <= tracing::Level::INFO
        }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let extensions = span.extensions();
        let Some(fields) = extensions.get::<Fields>() else {
            return;
        };
        if fields.get("error").is_some() {
            return;
        }
        let count = |name: &str| fields.get(name).and_then(|n| n.parse::<usize>().ok());
        let said = match (count("orders"), count("committed"), count("voided")) {
            (Some(orders), Some(committed), Some(voided)) => committed + voided == orders,
            _ => false,
        };
        if !said || fields.get("sale_id").is_none() {
            self.history.broken_span(
                self.time.millis(),
                format!(
                    "a `{COMMIT_SPAN}` span of one sale's batch closed without its outcome or \
                 its sale (orders, committed and voided, sale_id): {}",
                    fields.rest()
                ),
            );
        }
    }

    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if wanted(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        wanted(meta)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let epoch = fields.get("epoch").and_then(|e| e.parse::<u64>().ok());
        let message = fields.get("message").unwrap_or_default().to_owned();
        let at_ms = self.time.millis();
        let line = |what: &str| format!("service: {what} {}", fields.rest());
        if message.ends_with(TO_FALLBACK) {
            self.history
                .log(at_ms, line("the sale moves to the fallback"));
            self.history.moved(at_ms, Move::ToFallback);
            if let Some(epoch) = epoch {
                // Orders the engine accepted under the epoch it leaves
                // still commit, against the fallback's own decisions.
                self.history.disturbed("a move to the fallback");
                self.history.epoch(epoch);
            }
        } else if message == REBUILT {
            self.history.log(at_ms, line("engine rebuilt"));
            self.history.moved(at_ms, Move::Rebuilt);
            if let Some(epoch) = epoch {
                self.history.epoch(epoch);
            }
        } else if message.starts_with(REFUSED) {
            self.history
                .log(at_ms, line("the store refused an accepted order"));
            self.history.voided(Voided {
                order: fields.get("order").unwrap_or_default().to_owned(),
                user: fields.get("user").unwrap_or_default().to_owned(),
                epoch: epoch.unwrap_or_default(),
                reason: fields.get("reason").unwrap_or_default().to_owned(),
                at_ms,
            });
        }
    }
}

/// An event's fields as text, in the order logged.
#[derive(Default)]
struct Fields(Vec<(&'static str, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every field but the message, `name=value` each.
    fn rest(&self) -> String {
        let mut text = String::new();
        for (name, value) in self.0.iter().filter(|(n, _)| *n != "message") {
            let _ = write!(text, "{name}={value} ");
        }
        text.trim_end().to_owned()
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), value.to_owned()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name(), format!("{value:?}")));
    }
}
