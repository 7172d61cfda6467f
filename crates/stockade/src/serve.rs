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
use stockade_server::Service;
use stockade_server::config::{EngineChoice, LogFormat, RawConfig, ServerConfig, StoreLocation};
use stockade_server::listener::raise_open_file_limit;
use stockade_server::redact::redact_url;

use crate::cli::ServeArgs;

/// Runs the service until Ctrl-C or SIGTERM, then shuts down gracefully.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    raise_open_file_limit();
    let flags = RawConfig {
        listen: args.listen,
        data_dir: args.data_dir,
        engine: args.engine,
        fallback: args.fallback,
        redis_url: args.redis_url,
        redis_key_prefix: args.redis_key_prefix,
        database_url: args.database_url,
        admin_token: None,
        payments_token: args.payments_token,
        payments_token_file: args.payments_token_file,
        commit_deadline_ms: args.commit_deadline_ms,
        batch_max: args.batch_max,
        batch_delay_ms: args.batch_delay_ms,
        outbox_grace_ms: args.outbox_grace_ms,
        rejection_ttl_ms: args.rejection_ttl_ms,
        max_purchases_in_flight: args.max_purchases_in_flight,
        startup_wait_ms: args.startup_wait_ms,
        header_read_timeout_ms: args.header_read_timeout_ms,
        idle_timeout_ms: args.idle_timeout_ms,
        max_connections: args.max_connections,
        max_connections_per_client: args.max_connections_per_client,
        public_url: args.public_url,
        shutdown_timeout_ms: args.shutdown_timeout_ms,
        log_format: args.log_format,
        jwt_secret: args.jwt_secret,
        jwt_secret_file: args.jwt_secret_file,
        jwt_public_key: args.jwt_public_key,
        jwt_issuer: args.jwt_issuer,
        jwt_audience: args.jwt_audience,
        rate_limit_buyer: args.rate_limit_buyer,
        rate_limit_buyer_burst: args.rate_limit_buyer_burst,
        rate_limit_ip: args.rate_limit_ip,
        rate_limit_ip_burst: args.rate_limit_ip_burst,
        rate_limit_instances: args.rate_limit_instances,
        trusted_proxies: args.trusted_proxies,
        dashboard_session_ttl_s: args.dashboard_session_ttl_s,
        metrics_retention_s: args.metrics_retention_s,
        ended_sale_retention_s: args.ended_sale_retention_s,
        admission_secret: None,
    };
    let env = RawConfig::from_env(|name| std::env::var(name).ok())?;
    let config = ServerConfig::resolve(flags, env, args.config.as_deref())?;
    init_logging(config.log_format);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} ({})",
                config.listen,
                config.sources.name("listen")
            )
        })?;
    let address = listener.local_addr()?;
    let mut shutdown = Box::pin(shutdown_signal()?);
    // A signal while the start waits for the store or Redis ends it there.
    let service = tokio::select! {
        service = Service::start(&config) => service?,
        () = &mut shutdown => anyhow::bail!("interrupted before the service started"),
    };
    announce(format_args!(
        "stockade listening on http://{address} ({})",
        describe_backends(&config)
    ));
    match &config.identity {
        Some(identity) => announce(format_args!(
            "buyers: verified {} JWTs",
            identity.algorithm()
        )),
        None => announce(format_args!(
            "buyers: trusted as named (no --jwt-secret / --jwt-public-key): run behind a gateway that authenticates them"
        )),
    }
    if config.payments_token.is_none() {
        announce(format_args!(
            "payments: no STOCKADE_PAYMENTS_TOKEN, so only the admin token confirms held orders (POST /v1/orders/{{id}}/confirm)"
        ));
    }
    if config.admin.generated {
        announce(format_args!(
            "admin token: {} (generated; set STOCKADE_ADMIN_TOKEN to choose one)",
            config.admin.token
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
    let mut engine = match &config.engine {
        EngineChoice::Redis(url) => format!("Redis engine at {}", redact_url(url)),
        EngineChoice::Memory => "in-memory engine".to_owned(),
        EngineChoice::Postgres => "PostgreSQL engine".to_owned(),
    };
    if config.fallback {
        engine.push_str(", PostgreSQL fallback");
    }
    let store = match &config.store {
        StoreLocation::Postgres(url) => format!("PostgreSQL store at {}", redact_url(url)),
        StoreLocation::Sqlite(path) => format!("SQLite store at {}", path.display()),
    };
    format!("{engine}, {store}")
}

/// Logs to stderr: text for people (colour only on a terminal, never with
/// `NO_COLOR`), or one JSON object per line for log shippers.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            .init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
}

/// Whether text logs are coloured: on a terminal, unless `NO_COLOR` is set
/// to anything non-empty (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Catches Ctrl-C and SIGTERM from now on (so that a signal sent as soon as
/// the address is announced stops the service gracefully rather than
/// killing it) and returns a future that completes on the first of them.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("catching SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("catching SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
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
