//! Layers resolved into a [`ServerConfig`]: flags over variables over the
//! file over defaults, then every group's checks, with the settings they
//! share (the commit deadline, the Redis URL, the store) passed along.

use std::path::Path;

use super::{ConfigError, RawConfig, ServerConfig, Sources};

impl ServerConfig {
    /// Resolves flags over environment over file over defaults, and checks
    /// every setting; the first invalid one is the error, named the way it
    /// was given.
    pub fn resolve(
        flags: RawConfig,
        env: RawConfig,
        file: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let file = file
            .map(|path| RawConfig::from_file(path).map(|raw| (path, raw)))
            .transpose()?;
        let sources = Sources::new(&flags, &env, file.as_ref().map(|(p, raw)| (*p, raw)));
        let raw = flags
            .or(env)
            .or(file.map(|(_, raw)| raw).unwrap_or_default())
            .or(RawConfig::defaults());
        Self::check(raw, sources)
    }

    /// Every group's checks, in an order that reports the same setting
    /// first whatever the layers.
    fn check(raw: RawConfig, sources: Sources) -> Result<Self, ConfigError> {
        let identity = raw.identity.resolve(&sources)?;
        let payments_token = raw.access.resolve_payments_token(&sources)?;
        let public_url = raw.http.resolve_public_url(&sources)?;
        let rate_limits = raw.limits.resolve(&sources)?;
        let listen = raw.http.resolve_listen(&sources)?;
        let data_dir = raw.storage.resolve_data_dir(&sources)?;
        let redis_url = raw.redis.resolve_url(&sources)?;
        let prefix = raw.redis.resolve_prefix(&sources)?;
        let scripts = raw.redis.resolve_scripts(&sources)?;
        let store = raw.storage.resolve_store(&data_dir, &sources)?;
        let engine = raw
            .storage
            .resolve_engine(redis_url, prefix, scripts, &store, &sources)?;
        let admin = raw.access.resolve_admin(&sources)?;
        let purchases = raw.purchases.resolve(&sources)?;
        let startup_wait = raw.storage.resolve_startup_wait(&sources)?;
        let http = raw
            .http
            .resolve_limits(purchases.commit_deadline, &sources)?;
        let operations = raw.operations.resolve(&sources)?;
        let admission_secret = raw.access.resolve_admission_secret(&sources)?;
        let draw_key = raw.access.resolve_draw_key(&sources)?;
        Ok(Self {
            listen,
            public_url,
            http,
            data_dir,
            store,
            engine,
            startup_wait,
            purchases,
            admin,
            payments_token,
            admission_secret,
            draw_key,
            identity,
            rate_limits,
            log_format: operations.log_format,
            otlp_endpoint: operations.otlp_endpoint,
            dashboard_session_ttl: operations.dashboard_session_ttl,
            metrics_retention: operations.metrics_retention,
            ended_sale_retention: operations.ended_sale_retention,
            sources,
        })
    }
}
