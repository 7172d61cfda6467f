//! The engine that decides purchases, the order store that records them,
//! and what decides while Redis is unavailable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stockade_engine::ScriptsMode;

use stockade_core::redact::redact_url;

use super::access::secret_or_file;
use super::group::settings_group;
use super::{ConfigError, RedisKeyPrefix, Sources, invalid};

settings_group! {
    /// Engine and store.
    #[command(next_help_heading = "Engine and store")]
    pub struct StorageSettings {
        /// Directory of the embedded SQLite store (orders.db) and of the
        /// memory engine's intake journal.
        #[arg(long, env = "STOCKADE_DATA_DIR", value_name = "DIR", default_value = "./stockade-data")]
        pub data_dir: Option<PathBuf>,
        /// Which engine decides purchases: memory (one instance only),
        /// redis (needs --redis-url; any number of instances), postgres
        /// (the PostgreSQL store decides each purchase; needs a
        /// postgres:// --database-url). Not given: redis when a Redis URL
        /// is, memory otherwise.
        #[arg(long, env = "STOCKADE_ENGINE", value_name = "memory|redis|postgres", default_value = "memory")]
        pub engine: Option<String>,
        /// What decides purchases while Redis is unavailable: none (503),
        /// or postgres, which moves the sales to the PostgreSQL store and
        /// back once Redis is healthy (needs --engine redis and a
        /// postgres:// --database-url).
        #[arg(long, env = "STOCKADE_FALLBACK", value_name = "none|postgres", default_value = "none")]
        pub fallback: Option<String>,
        /// Keep orders in this PostgreSQL database (postgres://...), or in
        /// SQLite (sqlite:FILE). Shown only as host:port in messages.
        /// Default: SQLite in the data directory.
        #[arg(long, env = "STOCKADE_DATABASE_URL", value_name = "URL")]
        pub database_url: Option<String> as url,
        /// A file holding the database URL (instead of --database-url):
        /// its password stays out of `ps` and the environment.
        #[arg(long, env = "STOCKADE_DATABASE_URL_FILE", value_name = "FILE")]
        pub database_url_file: Option<PathBuf>,
        /// How long start waits for a database or Redis that does not
        /// accept connections yet (0: fail at once; at most 600000).
        #[arg(long, env = "STOCKADE_STARTUP_WAIT_MS", value_name = "MS", default_value = "10000")]
        pub startup_wait_ms: Option<u64>,
    }
}

/// Where the order store lives. `Debug` shows a URL without its password.
#[derive(Clone, PartialEq, Eq)]
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

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
        }
    }
}

/// Which engine decides purchases, with what it needs: a Redis engine
/// always has its URL and key prefix, and a fallback only with a
/// PostgreSQL store; the PostgreSQL engine only with a PostgreSQL store.
/// `Debug` shows the Redis URL without its password.
#[derive(Clone, PartialEq, Eq)]
pub enum Engine {
    /// In this process: the embedded default, one instance only.
    Memory,
    /// Redis: any number of instances.
    Redis {
        /// Where Redis is.
        url: String,
        /// The first part of every Redis key.
        prefix: RedisKeyPrefix,
        /// How the scripts run: Functions, EVALSHA, or whichever Redis has.
        scripts: ScriptsMode,
        /// What decides while Redis is unavailable (None: purchases are
        /// answered 503).
        fallback: Option<Fallback>,
    },
    /// The PostgreSQL order store decides each purchase itself, in one
    /// transaction that also records the order: no Redis, nothing to
    /// group-commit.
    Postgres,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Redis {
                url,
                prefix,
                scripts,
                fallback,
            } => f
                .debug_struct("Redis")
                .field("url", &redact_url(url))
                .field("prefix", prefix)
                .field("scripts", scripts)
                .field("fallback", fallback)
                .finish(),
            Self::Memory => f.write_str("Memory"),
            Self::Postgres => f.write_str("Postgres"),
        }
    }
}

/// What decides purchases while Redis is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The PostgreSQL order store: sales move there and back once Redis is
    /// healthy.
    Postgres,
}

impl Engine {
    /// The name used by `--engine`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis { .. } => "redis",
            Self::Postgres => "postgres",
        }
    }

    /// The fallback of a Redis engine.
    pub fn fallback(&self) -> Option<Fallback> {
        match self {
            Self::Redis { fallback, .. } => *fallback,
            Self::Memory | Self::Postgres => None,
        }
    }
}

impl StorageSettings {
    /// `data_dir`: any directory but the empty path.
    pub(super) fn resolve_data_dir(&self, sources: &Sources) -> Result<PathBuf, ConfigError> {
        let data_dir = self.data_dir.clone().unwrap_or_default();
        if data_dir.as_os_str().is_empty() {
            return Err(invalid(&sources.name("data_dir"), "must not be empty"));
        }
        Ok(data_dir)
    }

    /// `database_url`: PostgreSQL, SQLite, or SQLite in `data_dir`.
    pub(super) fn resolve_store(
        &self,
        data_dir: &Path,
        sources: &Sources,
    ) -> Result<StoreLocation, ConfigError> {
        let given = secret_or_file(
            self.database_url.as_deref(),
            self.database_url_file.as_deref(),
            "database_url",
            "database_url_file",
            sources,
        )?;
        let key = given.as_ref().map_or("database_url", |(_, key)| *key);
        Ok(match given.map(|(url, _)| url) {
            None => StoreLocation::Sqlite(data_dir.join("orders.db")),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                StoreLocation::Postgres(url)
            }
            Some(url) if url.starts_with("sqlite:") => StoreLocation::Sqlite(PathBuf::from(
                url.trim_start_matches("sqlite://")
                    .trim_start_matches("sqlite:"),
            )),
            Some(url) => {
                return Err(invalid(
                    &sources.name(key),
                    format!(
                        "{:?} must start with postgres:// (or sqlite:)",
                        redact_url(&url)
                    ),
                ));
            }
        })
    }

    /// `engine` with the URLs it needs (not given, a Redis URL implies
    /// redis: a command naming Redis means it), then `fallback`, which needs
    /// a Redis engine and a PostgreSQL store.
    pub(super) fn resolve_engine(
        &self,
        redis_url: Option<String>,
        prefix: RedisKeyPrefix,
        scripts: ScriptsMode,
        store: &StoreLocation,
        sources: &Sources,
    ) -> Result<Engine, ConfigError> {
        let setting = &sources.name("engine");
        let postgres_store = matches!(store, StoreLocation::Postgres(_));
        let name = match self.engine.as_deref().map(str::trim) {
            _ if !sources.is_set("engine") && redis_url.is_some() => "redis",
            name => name.unwrap_or_default(),
        };
        let mut engine = match (name, redis_url) {
            ("memory", None) => Engine::Memory,
            ("postgres", None) => Engine::Postgres,
            ("redis", Some(url)) => Engine::Redis {
                url,
                prefix,
                scripts,
                fallback: None,
            },
            ("redis", None) => {
                return Err(invalid(
                    setting,
                    "redis needs --redis-url / STOCKADE_REDIS_URL",
                ));
            }
            (other @ ("memory" | "postgres"), Some(_)) => {
                return Err(invalid(
                    &sources.name("redis_url"),
                    format!(
                        "is set but the engine is {other}; add --engine redis, or drop the Redis URL"
                    ),
                ));
            }
            (other, _) => {
                return Err(invalid(
                    setting,
                    format!("{other:?} is not one of: memory, redis, postgres"),
                ));
            }
        };
        if engine == Engine::Postgres && !postgres_store {
            return Err(invalid(
                setting,
                "postgres needs a postgres:// --database-url / STOCKADE_DATABASE_URL (the store is SQLite)",
            ));
        }
        let fallback_setting = &sources.name("fallback");
        let fallback = match self.fallback.as_deref().map(str::trim).unwrap_or_default() {
            "" | "none" => None,
            "postgres" => Some(Fallback::Postgres),
            other => {
                return Err(invalid(
                    fallback_setting,
                    format!("{other:?} is not one of: none, postgres"),
                ));
            }
        };
        if fallback.is_some() && !(matches!(engine, Engine::Redis { .. }) && postgres_store) {
            return Err(invalid(
                fallback_setting,
                format!(
                    "postgres needs --engine redis and a postgres:// --database-url (the engine is {}, the store {})",
                    engine.name(),
                    store.kind_name()
                ),
            ));
        }
        if let Engine::Redis { fallback: slot, .. } = &mut engine {
            *slot = fallback;
        }
        Ok(engine)
    }

    /// `startup_wait_ms`: at most ten minutes.
    pub(super) fn resolve_startup_wait(&self, sources: &Sources) -> Result<Duration, ConfigError> {
        let wait = Duration::from_millis(self.startup_wait_ms.unwrap_or_default());
        if wait > Duration::from_secs(600) {
            return Err(invalid(
                &sources.name("startup_wait_ms"),
                "must be at most 600000",
            ));
        }
        Ok(wait)
    }
}
