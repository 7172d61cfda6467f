//! `stockade serve`: the HTTP service, configured by flags, `STOCKADE_*`
//! variables and an optional TOML file (in that order of precedence).
//!
//! Nothing is announced before the service can serve: settings are
//! checked, the data directory created, the store and the engine connected
//! and recovered, and only then are the address and the admin token
//! printed.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use stockade_core::redact::redact_url;
use stockade_server::Service;
use stockade_server::config::{Engine, Fallback, LogFormat, ServerConfig, StoreLocation};
use stockade_server::listener::raise_open_file_limit;
use stockade_server::telemetry::{self, Endpoint, Tracing};

use crate::cli::ServeArgs;

/// Runs the service until Ctrl-C or SIGTERM, then shuts down gracefully.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    raise_open_file_limit();
    let config = ServerConfig::resolve(
        args.settings.flags,
        args.settings.env,
        args.config.as_deref(),
    )?;
    // Traces never stop the service: a variable it cannot use or an
    // exporter that cannot be set up is a warning, and it runs without.
    let (traces, unusable) = match telemetry::endpoint(
        config
            .otlp_endpoint()
            .map(|url| (url, config.sources().name("otlp_endpoint"))),
        |name| std::env::var(name).ok(),
    ) {
        Ok(traces) => (traces, None),
        Err(error) => (None, Some(error)),
    };
    let (tracing, failed) = init_logging(config.log_format(), traces.as_ref());
    for error in unusable.iter().chain(&failed) {
        tracing::warn!(%error, "traces are off: the service runs without exporting them");
    }
    let traces = traces.filter(|_| tracing.is_some());
    let served = serve(config, traces.as_ref()).await;
    // The spans still queued, exported before the process ends (at most the
    // export timeout, off the runtime's threads).
    if let Some(tracing) = tracing {
        let _ = tokio::task::spawn_blocking(move || tracing.shutdown()).await;
    }
    served
}

/// [`run`] once logging (and tracing) is set up.
async fn serve(config: ServerConfig, traces: Option<&Endpoint>) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(config.listen())
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} ({})",
                config.listen(),
                config.sources().name("listen")
            )
        })?;
    let address = listener.local_addr()?;
    let mut shutdown = Box::pin(crate::signals::stop_requested()?);
    // A signal while the start waits for the store or Redis ends it there.
    let service = tokio::select! {
        service = Service::start(&config) => service?,
        () = &mut shutdown => anyhow::bail!("interrupted before the service started"),
    };
    announce(format_args!(
        "stockade listening on http://{address} ({})",
        describe_backends(&config)
    ));
    match config.identity() {
        Some(identity) => announce(format_args!(
            "buyers: verified {} JWTs",
            identity.algorithm()
        )),
        None => announce(format_args!(
            "buyers: trusted as named (no --jwt-secret / --jwt-public-key): run behind a gateway that authenticates them"
        )),
    }
    if config.payments_token().is_none() {
        announce(format_args!(
            "payments: no STOCKADE_PAYMENTS_TOKEN, so only the admin token confirms held orders (POST /v1/orders/{{id}}/confirm)"
        ));
    }
    if let Some(traces) = traces {
        announce(format_args!(
            "traces: OTLP/HTTP to {} ({})",
            traces.url, traces.from
        ));
        if let Some(protocol) = telemetry::unsupported_protocol(|name| std::env::var(name).ok()) {
            tracing::warn!(
                protocol,
                "traces are sent as OTLP over HTTP (http/protobuf) only; the protocol asked for is ignored"
            );
        }
    }
    if config.admin().generated {
        announce(format_args!(
            "admin token: {} (generated; set STOCKADE_ADMIN_TOKEN to choose one)",
            config.admin().token.expose()
        ));
    }
    service.serve(listener, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a line for whoever started the service. Unlike `println!`, a
/// closed stdout (a supervisor that read the address and went away) is
/// ignored rather than fatal: the service keeps serving.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// The engine and the store, URLs without their secrets.
fn describe_backends(config: &ServerConfig) -> String {
    let engine = match config.engine() {
        Engine::Redis {
            url,
            fallback: None,
            ..
        } => format!("Redis engine at {}", redact_url(url)),
        Engine::Redis {
            url,
            fallback: Some(Fallback::Postgres),
            ..
        } => format!("Redis engine at {}, PostgreSQL fallback", redact_url(url)),
        Engine::Memory => "in-memory engine".to_owned(),
        Engine::Postgres => "PostgreSQL engine".to_owned(),
    };
    // Chosen by the Redis URL alone: said, so nobody wonders which it is.
    let engine =
        if matches!(config.engine(), Engine::Redis { .. }) && !config.sources().is_set("engine") {
            format!("{engine} (chosen by the Redis URL: no --engine given)")
        } else {
            engine
        };
    let store = match config.store() {
        StoreLocation::Postgres(url) => format!("PostgreSQL store at {}", redact_url(url)),
        StoreLocation::Sqlite(path) => format!("SQLite store at {}", path.display()),
    };
    format!("{engine}, {store}")
}

/// Logs to stderr: text for people (colour only on a terminal, never with
/// `NO_COLOR`), or one JSON object per line for log shippers.
///
/// With `traces`, spans are exported too: the OpenTelemetry layer sits
/// beside the log layer, each with its own filter (RUST_LOG picks what is
/// logged, not what is traced), and JSON lines written inside an exported
/// span carry its `trace_id` and `span_id`. Without, the subscriber is the
/// log layer alone, as if tracing did not exist.
fn init_logging(
    format: LogFormat,
    traces: Option<&Endpoint>,
) -> (Option<Tracing>, Option<telemetry::TelemetryError>) {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| "info,sqlx=warn".into())
    };
    let ansi = || {
        colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        )
    };
    let plain = || {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter())
            .with_writer(std::io::stderr);
        match format {
            LogFormat::Text => builder.with_ansi(ansi()).init(),
            LogFormat::Json => builder.json().with_current_span(false).init(),
        }
    };
    let Some(endpoint) = traces else {
        plain();
        return (None, None);
    };
    use tracing_subscriber::prelude::*;
    let (exporter, tracing) = match telemetry::install(endpoint) {
        Ok(installed) => installed,
        Err(error) => {
            plain();
            return (None, Some(error));
        }
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(exporter);
    match format {
        LogFormat::Text => registry
            .with(logs.with_ansi(ansi()).with_filter(filter()))
            .init(),
        LogFormat::Json => registry
            .with(
                logs.json()
                    .with_current_span(false)
                    .event_format(telemetry::WithTraceIds(
                        tracing_subscriber::fmt::format()
                            .json()
                            .with_current_span(false),
                    ))
                    .with_filter(filter()),
            )
            .init(),
    }
    (Some(tracing), None)
}

/// Whether text logs are coloured: on a terminal, unless `NO_COLOR` is set
/// to anything non-empty (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None));
        assert!(!colour(true, Some("1".into())));
        assert!(colour(true, Some("".into())));
    }
}
