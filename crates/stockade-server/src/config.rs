//! Raw settings from flags, environment and an optional TOML file, resolved
//! (in that order of precedence) into a validated [`ServerConfig`]. Invalid
//! settings fail at start with a message naming the setting the way the
//! user gave it (flag, variable or file key; see [`settings`]).
//!
//! To add a setting: a [`RawConfig`] field, its row in
//! [`settings::SETTINGS`], its variable in [`RawConfig::from_env`], its
//! line in [`RawConfig::or`] and its check in [`ServerConfig::resolve`].

pub mod access;
mod redis_key_prefix;
pub mod settings;

pub use redis_key_prefix::RedisKeyPrefix;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::identity::Identity;
use crate::listener::HttpLimits;
use crate::rate_limit::{Limit, RateLimits, TrustedProxies};
use crate::writer::WriterConfig;
use settings::Sources;

/// Settings as given, every one optional. The same shape is read from
/// flags, from `STOCKADE_*` variables and from the TOML file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `--listen`, `STOCKADE_LISTEN`, `listen`.
    pub listen: Option<String>,
    /// `--data-dir`, `STOCKADE_DATA_DIR`, `data_dir`.
    pub data_dir: Option<PathBuf>,
    /// `--engine`, `STOCKADE_ENGINE`, `engine`: memory, redis or postgres.
    pub engine: Option<String>,
    /// `--fallback`, `STOCKADE_FALLBACK`, `fallback`: none or postgres.
    pub fallback: Option<String>,
    /// `--redis-url`, `STOCKADE_REDIS_URL`, `redis_url`.
    pub redis_url: Option<String>,
    /// `--redis-key-prefix`, `STOCKADE_REDIS_KEY_PREFIX`, `redis_key_prefix`:
    /// the first part of every Redis key (default `stockade`), so that
    /// deployments can share one Redis or Cluster.
    pub redis_key_prefix: Option<String>,
    /// `--database-url`, `STOCKADE_DATABASE_URL`, `database_url`.
    pub database_url: Option<String>,
    /// `STOCKADE_ADMIN_TOKEN` (never a flag: it would show in `ps`).
    pub admin_token: Option<String>,
    /// `--payments-token`, `STOCKADE_PAYMENTS_TOKEN`, `payments_token`:
    /// the bearer token of the payment service, the one caller (with the
    /// admin) that confirms held orders; at least 16 characters. Prefer the
    /// variable or [`RawConfig::payments_token_file`]: a flag shows in `ps`.
    pub payments_token: Option<String>,
    /// `--payments-token-file`, `STOCKADE_PAYMENTS_TOKEN_FILE`,
    /// `payments_token_file`: a file holding the payments token.
    pub payments_token_file: Option<PathBuf>,
    /// `--commit-deadline-ms`, `STOCKADE_COMMIT_DEADLINE_MS`, `commit_deadline_ms`.
    pub commit_deadline_ms: Option<u64>,
    /// `--batch-max`, `STOCKADE_BATCH_MAX`, `batch_max`.
    pub batch_max: Option<usize>,
    /// `--batch-delay-ms`, `STOCKADE_BATCH_DELAY_MS`, `batch_delay_ms`.
    pub batch_delay_ms: Option<u64>,
    /// `STOCKADE_OUTBOX_GRACE_MS`, `outbox_grace_ms`: how old an uncommitted
    /// outbox entry must be before the reconciler commits it itself.
    pub outbox_grace_ms: Option<u64>,
    /// `--rejection-ttl-ms`, `STOCKADE_REJECTION_TTL_MS`, `rejection_ttl_ms`:
    /// how long this instance answers `sold_out` and `unknown_sale` from
    /// what it learned, without asking the engine or the store (0 to 1000;
    /// 0: never). Another instance's cancel is seen within this bound.
    pub rejection_ttl_ms: Option<u64>,
    /// `--max-purchases-in-flight`, `STOCKADE_MAX_PURCHASES_IN_FLIGHT`,
    /// `max_purchases_in_flight`: purchases decided at once on this
    /// instance; one more is answered 503 `overloaded` at once.
    pub max_purchases_in_flight: Option<u64>,
    /// `--jwt-secret`, `STOCKADE_JWT_SECRET`, `jwt_secret`: buyers prove
    /// who they are with HS256 JWTs signed with this secret (32+ bytes).
    pub jwt_secret: Option<String>,
    /// `--jwt-secret-file`, `STOCKADE_JWT_SECRET_FILE`, `jwt_secret_file`:
    /// a file holding the HS256 secret (instead of `--jwt-secret`).
    pub jwt_secret_file: Option<PathBuf>,
    /// `--jwt-public-key`, `STOCKADE_JWT_PUBLIC_KEY`, `jwt_public_key`: a
    /// PEM file; buyers' JWTs are RS256 (RSA key) or ES256 (EC P-256 key).
    pub jwt_public_key: Option<PathBuf>,
    /// `--jwt-issuer`, `STOCKADE_JWT_ISSUER`, `jwt_issuer`: the `iss`
    /// buyers' JWTs must carry.
    pub jwt_issuer: Option<String>,
    /// `--jwt-audience`, `STOCKADE_JWT_AUDIENCE`, `jwt_audience`: the `aud`
    /// buyers' JWTs must carry.
    pub jwt_audience: Option<String>,
    /// `--rate-limit-buyer`, `STOCKADE_RATE_LIMIT_BUYER`,
    /// `rate_limit_buyer`: requests per buyer, e.g. `5/s`, `60/m`.
    pub rate_limit_buyer: Option<String>,
    /// `--rate-limit-buyer-burst`, `STOCKADE_RATE_LIMIT_BUYER_BURST`,
    /// `rate_limit_buyer_burst`: a buyer's requests at once (default: the
    /// rate's count).
    pub rate_limit_buyer_burst: Option<u64>,
    /// `--rate-limit-ip`, `STOCKADE_RATE_LIMIT_IP`, `rate_limit_ip`:
    /// requests per client address (an IPv6 client by its /64).
    pub rate_limit_ip: Option<String>,
    /// `--rate-limit-ip-burst`, `STOCKADE_RATE_LIMIT_IP_BURST`,
    /// `rate_limit_ip_burst`: a client's requests at once (default: the
    /// rate's count).
    pub rate_limit_ip_burst: Option<u64>,
    /// `--rate-limit-instances`, `STOCKADE_RATE_LIMIT_INSTANCES`,
    /// `rate_limit_instances`: how many instances share the limits in
    /// Redis; while Redis does not answer, each enforces that share of
    /// every limit alone (1 to 1000; default 1).
    pub rate_limit_instances: Option<u64>,
    /// `--trusted-proxies`, `STOCKADE_TRUSTED_PROXIES`, `trusted_proxies`:
    /// comma-separated addresses and CIDR ranges whose `X-Forwarded-For`
    /// names the client.
    pub trusted_proxies: Option<String>,
    /// `--startup-wait-ms`, `STOCKADE_STARTUP_WAIT_MS`, `startup_wait_ms`:
    /// how long start waits for an unreachable database or Redis to come
    /// up (0: fail at once).
    pub startup_wait_ms: Option<u64>,
    /// `--header-read-timeout-ms`, `STOCKADE_HEADER_READ_TIMEOUT_MS`,
    /// `header_read_timeout_ms`: how long a client may take to send a
    /// request's headers before its connection is closed.
    pub header_read_timeout_ms: Option<u64>,
    /// `--idle-timeout-ms`, `STOCKADE_IDLE_TIMEOUT_MS`, `idle_timeout_ms`:
    /// how long a keep-alive connection may sit without a request.
    pub idle_timeout_ms: Option<u64>,
    /// `--max-connections`, `STOCKADE_MAX_CONNECTIONS`, `max_connections`:
    /// open connections at most; one more is answered 503 and closed at once.
    pub max_connections: Option<u64>,
    /// `--max-connections-per-client`, `STOCKADE_MAX_CONNECTIONS_PER_CLIENT`,
    /// `max_connections_per_client`: open connections of one client address
    /// at most (trusted proxies and the admin exempt).
    pub max_connections_per_client: Option<u64>,
    /// `--public-url`, `STOCKADE_PUBLIC_URL`, `public_url`: the address
    /// browsers reach the service at; `https://` marks the dashboard's
    /// session cookie `Secure`.
    pub public_url: Option<String>,
    /// `--shutdown-timeout-ms`, `STOCKADE_SHUTDOWN_TIMEOUT_MS`,
    /// `shutdown_timeout_ms`: how long a shutdown waits for requests in
    /// flight before closing every connection.
    pub shutdown_timeout_ms: Option<u64>,
    /// `--log-format`, `STOCKADE_LOG_FORMAT`, `log_format`: text or json.
    pub log_format: Option<String>,
    /// `--dashboard-session-ttl-s`, `STOCKADE_DASHBOARD_SESSION_TTL_S`,
    /// `dashboard_session_ttl_s`: how long a dashboard login lasts (60 to
    /// 604800 seconds; default 28800, eight hours).
    pub dashboard_session_ttl_s: Option<u64>,
    /// `--metrics-retention-s`, `STOCKADE_METRICS_RETENTION_S`,
    /// `metrics_retention_s`: how long a series nobody updates any more (an
    /// ended sale's) stays in `/metrics` (1 to 86400 seconds; default 900).
    pub metrics_retention_s: Option<u64>,
    /// `--ended-sale-retention-s`, `STOCKADE_ENDED_SALE_RETENTION_S`,
    /// `ended_sale_retention_s`: how long after its end a sale's engine
    /// state and waiting room are kept (0 to 2592000 seconds; default
    /// 86400); the store keeps its orders.
    pub ended_sale_retention_s: Option<u64>,
    /// `STOCKADE_ADMISSION_SECRET`, `admission_secret` (never a flag): the
    /// key that signs waiting-room admission tokens, at least 32
    /// characters. Generated at start when absent, which suits one
    /// instance only: every instance of a deployment must share it.
    pub admission_secret: Option<String>,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct ConfigError {
    /// The flag / variable / key.
    pub setting: String,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(setting: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting: setting.to_owned(),
        reason: reason.into(),
    }
}

impl RawConfig {
    /// Reads the `STOCKADE_*` variables from `lookup` (the process
    /// environment in production).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let number = |name: &str| -> Result<Option<u64>, ConfigError> {
            lookup(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| invalid(name, format!("{v:?} is not a whole number")))
                })
                .transpose()
        };
        Ok(Self {
            listen: lookup("STOCKADE_LISTEN"),
            data_dir: lookup("STOCKADE_DATA_DIR").map(PathBuf::from),
            engine: lookup("STOCKADE_ENGINE"),
            fallback: lookup("STOCKADE_FALLBACK"),
            redis_url: lookup("STOCKADE_REDIS_URL"),
            redis_key_prefix: lookup("STOCKADE_REDIS_KEY_PREFIX"),
            database_url: lookup("STOCKADE_DATABASE_URL"),
            admin_token: lookup("STOCKADE_ADMIN_TOKEN"),
            payments_token: lookup("STOCKADE_PAYMENTS_TOKEN"),
            payments_token_file: lookup("STOCKADE_PAYMENTS_TOKEN_FILE").map(PathBuf::from),
            commit_deadline_ms: number("STOCKADE_COMMIT_DEADLINE_MS")?,
            batch_max: number("STOCKADE_BATCH_MAX")?.map(|n| n as usize),
            batch_delay_ms: number("STOCKADE_BATCH_DELAY_MS")?,
            outbox_grace_ms: number("STOCKADE_OUTBOX_GRACE_MS")?,
            rejection_ttl_ms: number("STOCKADE_REJECTION_TTL_MS")?,
            max_purchases_in_flight: number("STOCKADE_MAX_PURCHASES_IN_FLIGHT")?,
            jwt_secret: lookup("STOCKADE_JWT_SECRET"),
            jwt_secret_file: lookup("STOCKADE_JWT_SECRET_FILE").map(PathBuf::from),
            jwt_public_key: lookup("STOCKADE_JWT_PUBLIC_KEY").map(PathBuf::from),
            jwt_issuer: lookup("STOCKADE_JWT_ISSUER"),
            jwt_audience: lookup("STOCKADE_JWT_AUDIENCE"),
            rate_limit_buyer: lookup("STOCKADE_RATE_LIMIT_BUYER"),
            rate_limit_buyer_burst: number("STOCKADE_RATE_LIMIT_BUYER_BURST")?,
            rate_limit_ip: lookup("STOCKADE_RATE_LIMIT_IP"),
            rate_limit_ip_burst: number("STOCKADE_RATE_LIMIT_IP_BURST")?,
            rate_limit_instances: number("STOCKADE_RATE_LIMIT_INSTANCES")?,
            trusted_proxies: lookup("STOCKADE_TRUSTED_PROXIES"),
            startup_wait_ms: number("STOCKADE_STARTUP_WAIT_MS")?,
            header_read_timeout_ms: number("STOCKADE_HEADER_READ_TIMEOUT_MS")?,
            idle_timeout_ms: number("STOCKADE_IDLE_TIMEOUT_MS")?,
            max_connections: number("STOCKADE_MAX_CONNECTIONS")?,
            max_connections_per_client: number("STOCKADE_MAX_CONNECTIONS_PER_CLIENT")?,
            public_url: lookup("STOCKADE_PUBLIC_URL"),
            shutdown_timeout_ms: number("STOCKADE_SHUTDOWN_TIMEOUT_MS")?,
            log_format: lookup("STOCKADE_LOG_FORMAT"),
            dashboard_session_ttl_s: number("STOCKADE_DASHBOARD_SESSION_TTL_S")?,
            metrics_retention_s: number("STOCKADE_METRICS_RETENTION_S")?,
            ended_sale_retention_s: number("STOCKADE_ENDED_SALE_RETENTION_S")?,
            admission_secret: lookup("STOCKADE_ADMISSION_SECRET"),
        })
    }

    /// Reads a TOML file with the same keys (unknown keys are errors).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let setting = format!("--config {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| invalid(&setting, e.to_string()))?;
        toml::from_str(&text).map_err(|e| {
            let reason = e.message().trim_end().to_owned();
            let at = e
                .span()
                .map(|span| text[..span.start].lines().count().max(1))
                .map_or(String::new(), |line| format!(" (line {line})"));
            invalid(&format!("{setting}{at}"), reason)
        })
    }

    /// Fills every setting this one lacks from `lower`.
    pub fn or(self, lower: RawConfig) -> RawConfig {
        RawConfig {
            listen: self.listen.or(lower.listen),
            data_dir: self.data_dir.or(lower.data_dir),
            engine: self.engine.or(lower.engine),
            fallback: self.fallback.or(lower.fallback),
            redis_url: self.redis_url.or(lower.redis_url),
            redis_key_prefix: self.redis_key_prefix.or(lower.redis_key_prefix),
            database_url: self.database_url.or(lower.database_url),
            admin_token: self.admin_token.or(lower.admin_token),
            payments_token: self.payments_token.or(lower.payments_token),
            payments_token_file: self.payments_token_file.or(lower.payments_token_file),
            commit_deadline_ms: self.commit_deadline_ms.or(lower.commit_deadline_ms),
            batch_max: self.batch_max.or(lower.batch_max),
            batch_delay_ms: self.batch_delay_ms.or(lower.batch_delay_ms),
            outbox_grace_ms: self.outbox_grace_ms.or(lower.outbox_grace_ms),
            rejection_ttl_ms: self.rejection_ttl_ms.or(lower.rejection_ttl_ms),
            max_purchases_in_flight: self
                .max_purchases_in_flight
                .or(lower.max_purchases_in_flight),
            jwt_secret: self.jwt_secret.or(lower.jwt_secret),
            jwt_secret_file: self.jwt_secret_file.or(lower.jwt_secret_file),
            jwt_public_key: self.jwt_public_key.or(lower.jwt_public_key),
            jwt_issuer: self.jwt_issuer.or(lower.jwt_issuer),
            jwt_audience: self.jwt_audience.or(lower.jwt_audience),
            rate_limit_buyer: self.rate_limit_buyer.or(lower.rate_limit_buyer),
            rate_limit_buyer_burst: self.rate_limit_buyer_burst.or(lower.rate_limit_buyer_burst),
            rate_limit_ip: self.rate_limit_ip.or(lower.rate_limit_ip),
            rate_limit_ip_burst: self.rate_limit_ip_burst.or(lower.rate_limit_ip_burst),
            rate_limit_instances: self.rate_limit_instances.or(lower.rate_limit_instances),
            trusted_proxies: self.trusted_proxies.or(lower.trusted_proxies),
            startup_wait_ms: self.startup_wait_ms.or(lower.startup_wait_ms),
            header_read_timeout_ms: self.header_read_timeout_ms.or(lower.header_read_timeout_ms),
            idle_timeout_ms: self.idle_timeout_ms.or(lower.idle_timeout_ms),
            max_connections: self.max_connections.or(lower.max_connections),
            max_connections_per_client: self
                .max_connections_per_client
                .or(lower.max_connections_per_client),
            public_url: self.public_url.or(lower.public_url),
            shutdown_timeout_ms: self.shutdown_timeout_ms.or(lower.shutdown_timeout_ms),
            log_format: self.log_format.or(lower.log_format),
            dashboard_session_ttl_s: self
                .dashboard_session_ttl_s
                .or(lower.dashboard_session_ttl_s),
            metrics_retention_s: self.metrics_retention_s.or(lower.metrics_retention_s),
            ended_sale_retention_s: self.ended_sale_retention_s.or(lower.ended_sale_retention_s),
            admission_secret: self.admission_secret.or(lower.admission_secret),
        }
    }
}

/// Where the order store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A PostgreSQL URL.
    Postgres(String),
    /// SQLite, the embedded default: a file in the data directory.
    Sqlite(PathBuf),
}

impl StoreLocation {
    /// `postgres` or `sqlite`, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// The URL sqlx connects to.
    pub fn url(&self) -> String {
        match self {
            Self::Postgres(url) => url.clone(),
            Self::Sqlite(path) => format!("sqlite://{}?mode=rwc", path.display()),
        }
    }
}

/// Which engine decides purchases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineChoice {
    /// In this process: the embedded default, one instance only.
    Memory,
    /// Redis at this URL: any number of instances.
    Redis(String),
    /// The PostgreSQL order store decides each purchase itself, in one
    /// transaction that also records the order: no Redis, nothing to
    /// group-commit.
    Postgres,
}

impl EngineChoice {
    /// The name used by `--engine`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis(_) => "redis",
            Self::Postgres => "postgres",
        }
    }
}

/// The admin token and whether it was generated at start.
#[derive(Debug, Clone)]
pub struct AdminToken {
    /// The bearer token admin requests must carry.
    pub token: String,
    /// True when no token was configured and this one was generated (and
    /// must be printed so the operator can use it).
    pub generated: bool,
}

/// The key that signs waiting-room admission tokens.
#[derive(Clone)]
pub struct AdmissionSecret {
    /// The key bytes.
    pub key: Vec<u8>,
    /// True when none was configured and this one was generated: tokens
    /// then verify only on this instance, until it restarts.
    pub generated: bool,
}

impl std::fmt::Debug for AdmissionSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionSecret")
            .field("key", &"<redacted>")
            .field("generated", &self.generated)
            .finish()
    }
}

/// Validated settings of `stockade serve`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory of the embedded store.
    pub data_dir: PathBuf,
    /// The engine that decides purchases.
    pub engine: EngineChoice,
    /// Whether sales move to the PostgreSQL store while Redis is
    /// unavailable (`--fallback postgres`).
    pub fallback: bool,
    /// The order store.
    pub store: StoreLocation,
    /// The admin token.
    pub admin: AdminToken,
    /// The payment service's token (None: only the admin confirms).
    pub payments_token: Option<access::PaymentsToken>,
    /// Where browsers reach the service, if configured.
    pub public_url: Option<access::PublicUrl>,
    /// How long a purchase waits for its commit before answering 202.
    pub commit_deadline: Duration,
    /// Group-commit batching.
    pub writer: WriterConfig,
    /// How old an outbox entry must be before the reconciler commits it.
    pub outbox_grace: Duration,
    /// How long sold-out and unknown-sale knowledge is used without asking
    /// the engine or the store (zero: never); at most one second.
    pub rejection_ttl: Duration,
    /// The most purchases in flight on this instance.
    pub max_purchases_in_flight: usize,
    /// How buyers prove who they are; None (the default): the service
    /// trusts its caller to name the buyer.
    pub identity: Option<Identity>,
    /// Per-buyer and per-client rate limits (none by default).
    pub rate_limits: RateLimits,
    /// How long start waits for an unreachable database or Redis.
    pub startup_wait: Duration,
    /// Timeouts, the connection cap and the shutdown bound of the HTTP server.
    pub http: HttpLimits,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Where each setting came from, to name it in later errors.
    pub sources: Sources,
    /// How long a dashboard login lasts.
    pub dashboard_session_ttl: Duration,
    /// How long an idle series (an ended sale's) stays in `/metrics`.
    pub metrics_retention: Duration,
    /// How long after its end a sale's engine state and waiting room stay.
    pub ended_sale_retention: Duration,
    /// The key of waiting-room admission tokens.
    pub admission_secret: AdmissionSecret,
    /// The first part of every Redis key (`stockade` by default).
    pub redis_key_prefix: RedisKeyPrefix,
}

impl ServerConfig {
    /// Resolves flags over environment over file over defaults.
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
            .or(file.map(|(_, raw)| raw).unwrap_or_default());
        let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
        let identity = resolve_identity(&raw, &sources)?;
        let payments_token = access::resolve_payments_token(&raw, &sources)?;
        let public_url = access::resolve_public_url(&raw, &sources)?;
        let rate_limits = resolve_rate_limits(&raw, &sources)?;

        let listen_text = raw
            .listen
            .clone()
            .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listen = listen_text.parse::<SocketAddr>().map_err(|_| {
            bad(
                "listen",
                format!("{listen_text:?} is not an address like 127.0.0.1:8080"),
            )
        })?;
        let data_dir = raw
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("./stockade-data"));
        if data_dir.as_os_str().is_empty() {
            return Err(bad("data_dir", "must not be empty".into()));
        }
        let redis_url = raw.redis_url.clone().filter(|u| !u.is_empty());
        if let Some(url) = &redis_url
            && let Err(error) = stockade_engine::RedisTopology::from_url(url)
        {
            return Err(bad("redis_url", error.to_string()));
        }
        let redis_key_prefix = RedisKeyPrefix::parse(raw.redis_key_prefix.as_deref())
            .map_err(|reason| bad("redis_key_prefix", reason))?;
        let store = match raw.database_url.clone().filter(|u| !u.is_empty()) {
            None => StoreLocation::Sqlite(data_dir.join("orders.db")),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                StoreLocation::Postgres(url)
            }
            Some(url) if url.starts_with("sqlite:") => StoreLocation::Sqlite(PathBuf::from(
                url.trim_start_matches("sqlite://")
                    .trim_start_matches("sqlite:"),
            )),
            Some(url) => {
                return Err(bad(
                    "database_url",
                    format!(
                        "{:?} must start with postgres:// (or sqlite:)",
                        crate::redact::redact_url(&url)
                    ),
                ));
            }
        };
        let engine = resolve_engine(raw.engine.as_deref(), redis_url, &store, &sources)?;
        let fallback = match raw.fallback.as_deref().map(str::trim) {
            None | Some("" | "none") => false,
            Some("postgres") => true,
            Some(other) => {
                return Err(bad(
                    "fallback",
                    format!("{other:?} is not one of: none, postgres"),
                ));
            }
        };
        if fallback
            && !(matches!(engine, EngineChoice::Redis(_))
                && matches!(store, StoreLocation::Postgres(_)))
        {
            return Err(bad(
                "fallback",
                format!(
                    "postgres needs --engine redis and a postgres:// --database-url (the engine is {}, the store {})",
                    engine.name(),
                    store.kind_name()
                ),
            ));
        }
        let (token, generated) = secret_or_generated(
            raw.admin_token.clone(),
            &sources.name("admin_token"),
            16,
            "",
        )?;
        let admin = AdminToken { token, generated };
        let commit_deadline = Duration::from_millis(raw.commit_deadline_ms.unwrap_or(2_000));
        if commit_deadline.is_zero() {
            return Err(bad("commit_deadline_ms", "must be at least 1".into()));
        }
        let defaults = WriterConfig::default();
        let max_batch = raw.batch_max.unwrap_or(defaults.max_batch);
        if !(1..=10_000).contains(&max_batch) {
            return Err(bad("batch_max", "must be between 1 and 10000".into()));
        }
        let max_delay = raw
            .batch_delay_ms
            .map_or(defaults.max_delay, Duration::from_millis);
        if max_delay > Duration::from_secs(1) {
            return Err(bad("batch_delay_ms", "must be at most 1000".into()));
        }
        let outbox_grace = Duration::from_millis(raw.outbox_grace_ms.unwrap_or(10_000));
        if outbox_grace <= commit_deadline {
            return Err(bad(
                "outbox_grace_ms",
                format!(
                    "must be longer than the commit deadline ({} = {} ms), or the reconciler would race the writer",
                    sources.name("commit_deadline_ms"),
                    commit_deadline.as_millis()
                ),
            ));
        }
        let rejection_ttl = raw
            .rejection_ttl_ms
            .map_or(crate::rejections::DEFAULT_TTL, Duration::from_millis);
        if rejection_ttl > crate::rejections::MAX_TTL {
            return Err(bad(
                "rejection_ttl_ms",
                format!(
                    "must be at most {} (the bound on how long another instance's cancel may go unseen)",
                    crate::rejections::MAX_TTL.as_millis()
                ),
            ));
        }
        let max_in_flight = raw
            .max_purchases_in_flight
            .unwrap_or(crate::shedding::DEFAULT_MAX_IN_FLIGHT as u64);
        if !(1..=crate::shedding::MAX_IN_FLIGHT_LIMIT as u64).contains(&max_in_flight) {
            return Err(bad(
                "max_purchases_in_flight",
                format!(
                    "must be between 1 and {} (it is {max_in_flight})",
                    crate::shedding::MAX_IN_FLIGHT_LIMIT
                ),
            ));
        }
        let startup_wait = Duration::from_millis(raw.startup_wait_ms.unwrap_or(10_000));
        if startup_wait > Duration::from_secs(600) {
            return Err(bad("startup_wait_ms", "must be at most 600000".into()));
        }
        let http = resolve_http(&raw, commit_deadline, &sources)?;
        let log_format = match raw.log_format.as_deref().map(str::trim) {
            None | Some("" | "text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(bad(
                    "log_format",
                    format!("{other:?} is not one of: text, json"),
                ));
            }
        };
        let dashboard_session_ttl = raw.dashboard_session_ttl_s.unwrap_or(8 * 3600);
        if !(60..=7 * 24 * 3600).contains(&dashboard_session_ttl) {
            return Err(bad(
                "dashboard_session_ttl_s",
                format!("must be between 60 and 604800 seconds (it is {dashboard_session_ttl})"),
            ));
        }
        let ended_sale_retention = raw.ended_sale_retention_s.unwrap_or(86_400);
        if ended_sale_retention > 30 * 86_400 {
            return Err(bad(
                "ended_sale_retention_s",
                format!(
                    "must be between 0 and 2592000 seconds (30 days; it is {ended_sale_retention})"
                ),
            ));
        }
        let metrics_retention = raw.metrics_retention_s.unwrap_or(900);
        if !(1..=24 * 3600).contains(&metrics_retention) {
            return Err(bad(
                "metrics_retention_s",
                format!("must be between 1 and 86400 seconds (it is {metrics_retention})"),
            ));
        }
        let (secret, generated) = secret_or_generated(
            raw.admission_secret.clone(),
            &sources.name("admission_secret"),
            32,
            " (for example 64 hex digits from `openssl rand -hex 32`)",
        )?;
        let admission_secret = AdmissionSecret {
            key: secret.into_bytes(),
            generated,
        };
        Ok(Self {
            listen,
            data_dir,
            engine,
            fallback,
            store,
            admin,
            payments_token,
            public_url,
            commit_deadline,
            writer: WriterConfig {
                max_batch,
                max_delay,
            },
            outbox_grace,
            rejection_ttl,
            max_purchases_in_flight: max_in_flight as usize,
            identity,
            rate_limits,
            startup_wait,
            http,
            log_format,
            sources,
            dashboard_session_ttl: Duration::from_secs(dashboard_session_ttl),
            metrics_retention: Duration::from_secs(metrics_retention),
            ended_sale_retention: Duration::from_secs(ended_sale_retention),
            admission_secret,
            redis_key_prefix,
        })
    }
}

/// `--jwt-*`: identity is on when a secret or a public key is given.
fn resolve_identity(raw: &RawConfig, sources: &Sources) -> Result<Option<Identity>, ConfigError> {
    let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
    // The secret, and the setting it came from (the flag or the file).
    let secret = access::jwt_secret(raw, sources)?;
    let (secret, secret_key) = match &secret {
        Some((secret, key)) => (Some(secret.as_str()), *key),
        None => (None, "jwt_secret"),
    };
    let key_file = raw
        .jwt_public_key
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty());
    let issuer = raw.jwt_issuer.as_deref().filter(|s| !s.is_empty());
    let audience = raw.jwt_audience.as_deref().filter(|s| !s.is_empty());
    match (secret, key_file) {
        (Some(_), Some(_)) => Err(bad(
            secret_key,
            format!(
                "give either a secret (HS256) or {} (RS256/ES256), not both",
                sources.name("jwt_public_key")
            ),
        )),
        (Some(secret), None) => Identity::hs256(secret.as_bytes(), issuer, audience)
            .map(Some)
            .map_err(|reason| bad(secret_key, reason.to_string())),
        (None, Some(path)) => {
            let pem = std::fs::read(path).map_err(|e| {
                bad(
                    "jwt_public_key",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            Identity::public_key_pem(&pem, issuer, audience)
                .map(Some)
                .map_err(|reason| bad("jwt_public_key", format!("{}: {reason}", path.display())))
        }
        (None, None) if issuer.is_some() || audience.is_some() => Err(bad(
            if issuer.is_some() {
                "jwt_issuer"
            } else {
                "jwt_audience"
            },
            "needs --jwt-secret or --jwt-public-key to verify tokens with".to_owned(),
        )),
        (None, None) => Ok(None),
    }
}

/// `--rate-limit-*` and `--trusted-proxies`.
fn resolve_rate_limits(raw: &RawConfig, sources: &Sources) -> Result<RateLimits, ConfigError> {
    let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
    let limit = |rate: &Option<String>,
                 burst: Option<u64>,
                 setting: &str,
                 burst_setting: &str|
     -> Result<Option<Limit>, ConfigError> {
        match rate.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            None if burst.is_some() => Err(bad(
                burst_setting,
                format!("needs a rate: set {} too (e.g. 5/s)", sources.name(setting)),
            )),
            None => Ok(None),
            Some(rate) => Limit::parse(rate, burst)
                .map(Some)
                .map_err(|reason| bad(setting, reason.to_string())),
        }
    };
    let buyer = limit(
        &raw.rate_limit_buyer,
        raw.rate_limit_buyer_burst,
        "rate_limit_buyer",
        "rate_limit_buyer_burst",
    )?;
    let ip = limit(
        &raw.rate_limit_ip,
        raw.rate_limit_ip_burst,
        "rate_limit_ip",
        "rate_limit_ip_burst",
    )?;
    let trusted_proxies = TrustedProxies::parse(raw.trusted_proxies.as_deref().unwrap_or(""))
        .map_err(|reason| bad("trusted_proxies", reason.to_string()))?;
    let instances = raw.rate_limit_instances.unwrap_or(1);
    if !(1..=1_000).contains(&instances) {
        return Err(bad(
            "rate_limit_instances",
            format!("must be between 1 and 1000 (it is {instances})"),
        ));
    }
    Ok(RateLimits {
        buyer,
        ip,
        trusted_proxies,
        instances: instances as u32,
    })
}

/// The HTTP server's limits: timeouts within bounds, the connection cap
/// within the open-file limit, a shutdown long enough to answer purchases.
fn resolve_http(
    raw: &RawConfig,
    commit_deadline: Duration,
    sources: &Sources,
) -> Result<HttpLimits, ConfigError> {
    let bad = |key: &str, reason: String| invalid(&sources.name(key), reason);
    let millis = |key: &str, value: Option<u64>, default: u64, max: u64| {
        let value = value.unwrap_or(default);
        if !(1..=max).contains(&value) {
            return Err(bad(
                key,
                format!("must be between 1 and {max} (it is {value})"),
            ));
        }
        Ok(Duration::from_millis(value))
    };
    let header_read_timeout = millis(
        "header_read_timeout_ms",
        raw.header_read_timeout_ms,
        5_000,
        300_000,
    )?;
    let idle_timeout = millis("idle_timeout_ms", raw.idle_timeout_ms, 75_000, 3_600_000)?;
    let shutdown_timeout = millis(
        "shutdown_timeout_ms",
        raw.shutdown_timeout_ms,
        10_000,
        600_000,
    )?;
    if shutdown_timeout <= commit_deadline {
        return Err(bad(
            "shutdown_timeout_ms",
            format!(
                "must be longer than the commit deadline ({} = {} ms), or purchases in flight at shutdown could go unanswered",
                sources.name("commit_deadline_ms"),
                commit_deadline.as_millis()
            ),
        ));
    }
    let file_limit = crate::listener::open_file_limit();
    let max_connections = match raw.max_connections {
        None => HttpLimits::default_max_connections(file_limit),
        Some(n) => {
            let most = HttpLimits::most_connections(file_limit);
            if !(1..=most as u64).contains(&n) {
                return Err(bad(
                    "max_connections",
                    format!(
                        "must be between 1 and {most} (it is {n}): each connection is a file descriptor and the process may open {file_limit} (ulimit -n), {} of which are kept for the store, Redis and logs; raise the limit or lower the setting",
                        crate::listener::RESERVED_FILES
                    ),
                ));
            }
            n as usize
        }
    };
    let max_connections_per_client = raw
        .max_connections_per_client
        .unwrap_or(crate::client_cap::DEFAULT_PER_CLIENT as u64);
    if !(1..=1_000_000).contains(&max_connections_per_client) {
        return Err(bad(
            "max_connections_per_client",
            format!("must be between 1 and 1000000 (it is {max_connections_per_client})"),
        ));
    }
    Ok(HttpLimits {
        header_read_timeout,
        idle_timeout,
        max_connections,
        max_connections_per_client: max_connections_per_client as usize,
        shutdown_timeout,
    })
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

/// `--engine` with the URLs it needs; the engine is never implied by which
/// URL is present.
fn resolve_engine(
    engine: Option<&str>,
    redis_url: Option<String>,
    store: &StoreLocation,
    sources: &Sources,
) -> Result<EngineChoice, ConfigError> {
    let setting = &sources.name("engine");
    let choice = match engine.map(str::trim).unwrap_or("memory") {
        "memory" => EngineChoice::Memory,
        "redis" => match redis_url.clone() {
            Some(url) => EngineChoice::Redis(url),
            None => {
                return Err(invalid(
                    setting,
                    "redis needs --redis-url / STOCKADE_REDIS_URL",
                ));
            }
        },
        "postgres" => EngineChoice::Postgres,
        other => {
            return Err(invalid(
                setting,
                format!("{other:?} is not one of: memory, redis, postgres"),
            ));
        }
    };
    if redis_url.is_some() && !matches!(choice, EngineChoice::Redis(_)) {
        return Err(invalid(
            &sources.name("redis_url"),
            format!(
                "is set but the engine is {}; add --engine redis, or drop the Redis URL",
                choice.name()
            ),
        ));
    }
    if choice == EngineChoice::Postgres && !matches!(store, StoreLocation::Postgres(_)) {
        return Err(invalid(
            setting,
            "postgres needs a postgres:// --database-url / STOCKADE_DATABASE_URL (the store is SQLite)",
        ));
    }
    Ok(choice)
}

/// A configured secret of at least `min` characters, or a generated one
/// (and true).
fn secret_or_generated(
    value: Option<String>,
    setting: &str,
    min: usize,
    hint: &str,
) -> Result<(String, bool), ConfigError> {
    match value {
        Some(secret) if secret.len() < min => Err(invalid(
            setting,
            format!("must be at least {min} characters long{hint}"),
        )),
        Some(secret) => Ok((secret, false)),
        None => Ok((generate_token(), true)),
    }
}

fn generate_token() -> String {
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> RawConfig {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RawConfig::from_env(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap()
    }

    #[test]
    fn defaults_are_the_embedded_setup_with_a_generated_token() {
        let config =
            ServerConfig::resolve(RawConfig::default(), RawConfig::default(), None).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(
            config.store,
            StoreLocation::Sqlite(PathBuf::from("./stockade-data/orders.db"))
        );
        assert_eq!(config.engine, EngineChoice::Memory);
        assert!(!config.fallback);
        assert!(config.admin.generated);
        assert_eq!(config.admin.token.len(), 48);
    }

    #[test]
    fn flags_beat_environment_which_beats_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stockade.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9003\"\nbatch_max = 7\ncommit_deadline_ms = 30\n",
        )
        .unwrap();
        let flags = RawConfig {
            listen: Some("127.0.0.1:9001".into()),
            ..RawConfig::default()
        };
        let environment = env(&[
            ("STOCKADE_LISTEN", "127.0.0.1:9002"),
            ("STOCKADE_BATCH_MAX", "9"),
            ("STOCKADE_ADMIN_TOKEN", "0123456789abcdef"),
        ]);
        let config = ServerConfig::resolve(flags, environment, Some(&file)).unwrap();
        assert_eq!(config.listen.port(), 9001);
        assert_eq!(config.writer.max_batch, 9);
        assert_eq!(config.commit_deadline, Duration::from_millis(30));
        assert!(!config.admin.generated);
    }

    #[test]
    fn rejection_ttl_and_purchases_in_flight_are_bounded() {
        let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
        let defaults = resolve(RawConfig::default()).unwrap();
        assert_eq!(defaults.rejection_ttl, Duration::from_millis(500));
        assert_eq!(defaults.max_purchases_in_flight, 4_096);
        let err = resolve(RawConfig {
            max_purchases_in_flight: Some(0),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("--max-purchases-in-flight"),
            "{err}"
        );
        let err = resolve(RawConfig {
            rejection_ttl_ms: Some(1_001),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--rejection-ttl-ms"), "{err}");
        let config = resolve(env(&[
            ("STOCKADE_REJECTION_TTL_MS", "0"),
            ("STOCKADE_MAX_PURCHASES_IN_FLIGHT", "1"),
        ]))
        .unwrap();
        assert_eq!(config.rejection_ttl, Duration::ZERO);
        assert_eq!(config.max_purchases_in_flight, 1);
        let err = RawConfig::from_env(|n| {
            (n == "STOCKADE_MAX_PURCHASES_IN_FLIGHT").then(|| "many".into())
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("STOCKADE_MAX_PURCHASES_IN_FLIGHT"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stockade.toml");
        std::fs::write(&file, "max_purchases_in_flight = 0\n").unwrap();
        let err = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("max_purchases_in_flight in {}", file.display())),
            "{err}"
        );
    }

    /// A value each setting refuses, as a TOML literal.
    const REFUSED: &[(&str, &str)] = &[
        ("listen", "\"nowhere\""),
        ("data_dir", "\"\""),
        ("engine", "\"oracle\""),
        ("fallback", "\"mysql\""),
        ("redis_url", "\"http://cache\""),
        ("redis_key_prefix", "\"shop:{a}\""),
        ("database_url", "\"mysql://db\""),
        ("admin_token", "\"short\""),
        ("payments_token", "\"short\""),
        ("payments_token_file", "\"/nonexistent/payments-token\""),
        ("commit_deadline_ms", "0"),
        ("batch_max", "0"),
        ("batch_delay_ms", "5000"),
        ("outbox_grace_ms", "1"),
        ("rejection_ttl_ms", "5000"),
        ("max_purchases_in_flight", "0"),
        ("startup_wait_ms", "999999999"),
        ("header_read_timeout_ms", "0"),
        ("idle_timeout_ms", "0"),
        ("max_connections", "0"),
        ("max_connections_per_client", "0"),
        ("public_url", "\"shop.example\""),
        ("shutdown_timeout_ms", "1"),
        ("log_format", "\"xml\""),
        ("jwt_secret", "\"short\""),
        ("jwt_secret_file", "\"/nonexistent/jwt-secret\""),
        ("jwt_public_key", "\"/nonexistent/key.pem\""),
        ("jwt_issuer", "\"https://issuer.example\""),
        ("jwt_audience", "\"stockade\""),
        ("rate_limit_buyer", "\"fast\""),
        ("rate_limit_buyer_burst", "5"),
        ("rate_limit_ip", "\"5/fortnight\""),
        ("rate_limit_ip_burst", "5"),
        ("rate_limit_instances", "0"),
        ("trusted_proxies", "\"10.0.0.0/33\""),
        ("dashboard_session_ttl_s", "59"),
        ("metrics_retention_s", "0"),
        ("ended_sale_retention_s", "2592001"),
        ("admission_secret", "\"short\""),
    ];

    #[test]
    fn every_setting_is_named_by_where_its_value_came_from() {
        assert_eq!(
            REFUSED.len(),
            settings::SETTINGS.len(),
            "every setting needs a refused value here"
        );
        let dir = tempfile::tempdir().unwrap();
        for (key, literal) in REFUSED {
            let row = settings::setting_of(key);
            let plain = literal.trim_matches('"');
            // A variable.
            let err = ServerConfig::resolve(RawConfig::default(), env(&[(row.env, plain)]), None)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("invalid setting {}:", row.env)),
                "{key}: {err}"
            );
            // A flag (the admin token has none).
            let given: RawConfig = toml::from_str(&format!("{key} = {literal}")).unwrap();
            let err = ServerConfig::resolve(given, RawConfig::default(), None)
                .unwrap_err()
                .to_string();
            let flag = row.flag.unwrap_or(row.env);
            assert!(
                err.starts_with(&format!("invalid setting {flag}:")),
                "{key}: {err}"
            );
            // The file.
            let file = dir.path().join(format!("{key}.toml"));
            std::fs::write(&file, format!("{key} = {literal}\n")).unwrap();
            let err =
                ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file))
                    .unwrap_err()
                    .to_string();
            assert!(
                err.starts_with(&format!("invalid setting {key} in {}:", file.display())),
                "{key}: {err}"
            );
        }
    }

    #[test]
    fn the_settings_table_covers_every_field_and_variable() {
        let fields = match serde_json::to_value(RawConfig::default()).unwrap() {
            serde_json::Value::Object(map) => map.keys().cloned().collect::<Vec<_>>(),
            other => panic!("{other}"),
        };
        let keys: Vec<String> = settings::SETTINGS
            .iter()
            .map(|s| s.key.to_owned())
            .collect();
        let mut sorted_fields = fields.clone();
        sorted_fields.sort();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort();
        assert_eq!(
            sorted_fields, sorted_keys,
            "RawConfig fields vs SETTINGS rows"
        );
        for row in settings::SETTINGS {
            assert_eq!(row.env, format!("STOCKADE_{}", row.key.to_uppercase()));
            if let Some(flag) = row.flag {
                assert_eq!(flag, format!("--{}", row.key.replace('_', "-")));
            }
            // from_env reads the row's variable into the row's field.
            let raw =
                RawConfig::from_env(|name| (name == row.env).then(|| "1".to_owned())).unwrap();
            let set = serde_json::to_value(&raw).unwrap();
            assert!(
                !set[row.key].is_null(),
                "{} is not read from {}",
                row.key,
                row.env
            );
            // And the help table lists all three spellings.
            let help = settings::help_table();
            assert!(help.contains(row.env) && help.contains(row.key), "{help}");
        }
    }

    #[test]
    fn http_limits_default_and_stay_inside_the_file_limit() {
        let config =
            ServerConfig::resolve(RawConfig::default(), RawConfig::default(), None).unwrap();
        assert_eq!(config.http.header_read_timeout, Duration::from_secs(5));
        assert_eq!(config.http.idle_timeout, Duration::from_secs(75));
        assert_eq!(config.http.shutdown_timeout, Duration::from_secs(10));
        let limit = crate::listener::open_file_limit();
        assert_eq!(
            config.http.max_connections,
            HttpLimits::default_max_connections(limit)
        );
        let err = ServerConfig::resolve(
            RawConfig {
                max_connections: Some(limit),
                ..RawConfig::default()
            },
            RawConfig::default(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ulimit -n"), "{err}");
        // A default that another setting makes wrong is named as a default.
        let err = ServerConfig::resolve(
            RawConfig::default(),
            env(&[
                ("STOCKADE_COMMIT_DEADLINE_MS", "20000"),
                ("STOCKADE_OUTBOX_GRACE_MS", "60000"),
            ]),
            None,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "invalid setting --shutdown-timeout-ms / STOCKADE_SHUTDOWN_TIMEOUT_MS / shutdown_timeout_ms (default 10000): \
             must be longer than the commit deadline (STOCKADE_COMMIT_DEADLINE_MS = 20000 ms), \
             or purchases in flight at shutdown could go unanswered"
        );
    }

    #[test]
    fn dashboard_session_ttl_and_metrics_retention_are_bounded() {
        let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
        let defaults = resolve(RawConfig::default()).unwrap();
        assert_eq!(
            defaults.dashboard_session_ttl,
            Duration::from_secs(8 * 3600)
        );
        assert_eq!(defaults.metrics_retention, Duration::from_secs(900));
        let err = resolve(RawConfig {
            dashboard_session_ttl_s: Some(59),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("--dashboard-session-ttl-s"),
            "{err}"
        );
        let err = resolve(RawConfig {
            metrics_retention_s: Some(0),
            ..RawConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--metrics-retention-s"), "{err}");
        let config = resolve(env(&[
            ("STOCKADE_DASHBOARD_SESSION_TTL_S", "600"),
            ("STOCKADE_METRICS_RETENTION_S", "30"),
        ]))
        .unwrap();
        assert_eq!(config.dashboard_session_ttl, Duration::from_secs(600));
        assert_eq!(config.metrics_retention, Duration::from_secs(30));
    }

    #[test]
    fn admission_secret_is_generated_or_long_enough() {
        let resolve = |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None);
        let generated = resolve(RawConfig::default()).unwrap().admission_secret;
        assert!(generated.generated);
        assert_eq!(generated.key.len(), 48);
        let err = resolve(env(&[("STOCKADE_ADMISSION_SECRET", "too-short")])).unwrap_err();
        assert!(
            err.to_string().contains("STOCKADE_ADMISSION_SECRET"),
            "{err}"
        );
        let secret = "0123456789abcdef0123456789abcdef";
        let config = resolve(env(&[("STOCKADE_ADMISSION_SECRET", secret)])).unwrap();
        assert_eq!(config.admission_secret.key, secret.as_bytes());
        assert!(!config.admission_secret.generated);
        assert!(!format!("{:?}", config.admission_secret).contains(secret));
    }

    #[test]
    fn invalid_settings_name_the_setting() {
        let bad =
            |raw: RawConfig| ServerConfig::resolve(raw, RawConfig::default(), None).unwrap_err();
        let err = bad(RawConfig {
            listen: Some("nope".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--listen"), "{err}");
        let err = bad(RawConfig {
            engine: Some("redis".into()),
            redis_url: Some("http://x".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--redis-url"), "{err}");
        let err = bad(RawConfig {
            redis_url: Some("redis://x".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("add --engine redis"), "{err}");
        let err = bad(RawConfig {
            engine: Some("redis".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--redis-url"), "{err}");
        let err = bad(RawConfig {
            engine: Some("postgres".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--database-url"), "{err}");
        let err = bad(RawConfig {
            engine: Some("mongodb".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--engine"), "{err}");
        let err = bad(RawConfig {
            engine: Some("redis".into()),
            redis_url: Some("redis://x".into()),
            fallback: Some("postgres".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--fallback"), "{err}");
        let err = bad(RawConfig {
            fallback: Some("mysql".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--fallback"), "{err}");
        let ok = ServerConfig::resolve(
            RawConfig {
                engine: Some("redis".into()),
                redis_url: Some("redis://127.0.0.1:6379".into()),
                database_url: Some("postgres://localhost/x".into()),
                fallback: Some("postgres".into()),
                ..RawConfig::default()
            },
            RawConfig::default(),
            None,
        )
        .unwrap();
        assert_eq!(
            ok.engine,
            EngineChoice::Redis("redis://127.0.0.1:6379".into())
        );
        assert!(ok.fallback);
        let err = bad(RawConfig {
            database_url: Some("mysql://x".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("--database-url"), "{err}");
        let err = bad(RawConfig {
            admin_token: Some("short".into()),
            ..RawConfig::default()
        });
        assert!(err.to_string().contains("STOCKADE_ADMIN_TOKEN"), "{err}");
        let err = RawConfig::from_env(|n| (n == "STOCKADE_BATCH_MAX").then(|| "lots".into()))
            .unwrap_err();
        assert!(err.to_string().contains("STOCKADE_BATCH_MAX"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "lisen = \"typo\"").unwrap();
        let err = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), Some(&file))
            .unwrap_err();
        assert!(err.to_string().contains("lisen"), "{err}");
    }
}
