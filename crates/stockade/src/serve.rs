//! `stockade serve`: the HTTP service, configured by flags, `STOCKADE_*`
//! variables and an optional TOML file (in that order of precedence).

use std::process::ExitCode;

use anyhow::Context;
use stockade_server::config::{EngineChoice, RawConfig, ServerConfig, StoreLocation};

use crate::cli::ServeArgs;

/// Runs the service until Ctrl-C or SIGTERM, then shuts down gracefully.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let flags = RawConfig {
        listen: args.listen,
        data_dir: args.data_dir,
        engine: args.engine,
        fallback: args.fallback,
        redis_url: args.redis_url,
        database_url: args.database_url,
        admin_token: None,
        commit_deadline_ms: args.commit_deadline_ms,
        batch_max: args.batch_max,
        batch_delay_ms: args.batch_delay_ms,
        outbox_grace_ms: None,
        rejection_ttl_ms: args.rejection_ttl_ms,
        max_purchases_in_flight: args.max_purchases_in_flight,
        jwt_secret: args.jwt_secret,
        jwt_public_key: args.jwt_public_key,
        jwt_issuer: args.jwt_issuer,
        jwt_audience: args.jwt_audience,
        rate_limit_buyer: args.rate_limit_buyer,
        rate_limit_buyer_burst: args.rate_limit_buyer_burst,
        rate_limit_ip: args.rate_limit_ip,
        rate_limit_ip_burst: args.rate_limit_ip_burst,
        trusted_proxies: args.trusted_proxies,
    };
    let env = RawConfig::from_env(|name| std::env::var(name).ok())?;
    let config = ServerConfig::resolve(flags, env, args.config.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (--listen)", config.listen))?;
    let address = listener.local_addr()?;
    let mut engine = match &config.engine {
        EngineChoice::Redis(url) => format!("Redis engine at {url}"),
        EngineChoice::Memory => "in-memory engine".to_owned(),
        EngineChoice::Postgres => "PostgreSQL engine".to_owned(),
    };
    if config.fallback {
        engine.push_str(", PostgreSQL fallback");
    }
    let store = match &config.store {
        StoreLocation::Postgres(url) => format!("PostgreSQL store at {url}"),
        StoreLocation::Sqlite(path) => format!("SQLite store at {}", path.display()),
    };
    println!("stockade listening on http://{address} ({engine}, {store})");
    match &config.identity {
        Some(identity) => println!("buyers: verified {} JWTs", identity.algorithm()),
        None => println!(
            "buyers: trusted as named (no --jwt-secret / --jwt-public-key): run behind a gateway that authenticates them"
        ),
    }
    if config.admin.generated {
        println!(
            "admin token: {} (generated; set STOCKADE_ADMIN_TOKEN to choose one)",
            config.admin.token
        );
    }
    stockade_server::run(listener, config, shutdown_signal()).await?;
    eprintln!("stockade stopped: every accepted order was committed");
    Ok(ExitCode::SUCCESS)
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
