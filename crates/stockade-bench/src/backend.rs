//! Choosing the engine a run drives. When Redis or PostgreSQL is asked for
//! without a URL, a throwaway server is started for the run (the binaries
//! must be installed) and stopped when the [`Backend`] is dropped.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use stockade_core::{Engine, SystemClock};
use stockade_engine::{MemoryEngine, PostgresEngine, RedisEngine, RedisEngineConfig};
use stockade_test_support::postgres_server::Durability;
use stockade_test_support::{PostgresServer, RedisServer};

/// Which engine to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// In this process.
    Memory,
    /// Redis, one Lua script per purchase.
    Redis,
    /// PostgreSQL, a row-locking transaction per purchase.
    Postgres,
}

impl EngineKind {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "redis",
            Self::Postgres => "postgres",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "memory" => Ok(Self::Memory),
            "redis" => Ok(Self::Redis),
            "postgres" => Ok(Self::Postgres),
            other => Err(format!(
                "unknown engine {other:?}: choose memory, redis or postgres"
            )),
        }
    }
}

/// Why a backend could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// A throwaway server could not be started.
    #[error(
        "could not start a throwaway server (pass --redis-url / --database-url to use a running one): {0}"
    )]
    Server(#[from] stockade_test_support::TestSupportError),
    /// The engine could not connect.
    #[error("could not connect the {engine} engine to {target}: {source}")]
    Connect {
        /// Which engine.
        engine: EngineKind,
        /// Where it tried to connect.
        target: String,
        /// What failed.
        source: stockade_core::EngineError,
    },
}

/// An engine, plus the throwaway server behind it if one was started.
pub struct Backend {
    engine: Arc<dyn Engine>,
    description: String,
    _redis: Option<RedisServer>,
    _postgres: Option<PostgresServer>,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Sets up `kind`, connecting to `redis_url` / `database_url` when given
    /// and starting a throwaway server otherwise.
    pub async fn connect(
        kind: EngineKind,
        redis_url: Option<&str>,
        database_url: Option<&str>,
    ) -> Result<Self, BackendError> {
        let clock = Arc::new(SystemClock);
        let connect_error = |target: &str| {
            let target = target.to_owned();
            move |source| BackendError::Connect {
                engine: kind,
                target,
                source,
            }
        };
        match kind {
            EngineKind::Memory => Ok(Self {
                engine: Arc::new(MemoryEngine::new(clock)),
                description: "in-memory engine".to_owned(),
                _redis: None,
                _postgres: None,
            }),
            EngineKind::Redis => {
                let (server, url) = match redis_url {
                    Some(url) => (None, url.to_owned()),
                    None => {
                        let server = RedisServer::start()?;
                        let url = server.url();
                        (Some(server), url)
                    }
                };
                let engine = RedisEngine::connect(&RedisEngineConfig::new(&url), clock)
                    .await
                    .map_err(connect_error(&url))?;
                Ok(Self {
                    engine: Arc::new(engine),
                    description: describe("Redis", &url, server.is_some()),
                    _redis: server,
                    _postgres: None,
                })
            }
            EngineKind::Postgres => {
                let (server, url) = match database_url {
                    Some(url) => (None, url.to_owned()),
                    None => {
                        // Durable (fsync on): the numbers should be ones a
                        // production server would give.
                        let server = PostgresServer::start_with(Durability::Durable)?;
                        let url = server.fresh_database().await?;
                        (Some(server), url)
                    }
                };
                let engine = PostgresEngine::connect(&url, 32, clock)
                    .await
                    .map_err(connect_error(&url))?;
                Ok(Self {
                    engine: Arc::new(engine),
                    description: describe("PostgreSQL", &url, server.is_some()),
                    _redis: None,
                    _postgres: server,
                })
            }
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// What the engine runs on, for the user.
    pub fn description(&self) -> &str {
        &self.description
    }
}

fn describe(server: &str, url: &str, throwaway: bool) -> String {
    if throwaway {
        format!("{server} engine on a throwaway server at {url}")
    } else {
        format!("{server} engine at {url}")
    }
}
