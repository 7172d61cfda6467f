//! The Redis and PostgreSQL servers a comparison runs against: the ones
//! named by `--redis-url` / `--database-url`, or throwaway servers started
//! for the run (PostgreSQL with fsync on, so its numbers are a production
//! server's) and stopped when [`Servers`] is dropped.
//!
//! Every strategy starts from a clean state. On servers the bench started,
//! Redis is flushed and each PostgreSQL strategy gets a new database. On
//! servers the user named, nothing of theirs is touched: the bench writes
//! only Redis keys under `stockade-bench:` (removed again before each
//! strategy) and, in the named database, its own `stockade_bench_*` tables
//! and the engine's `engine_*` tables, each strategy on a fresh sale id.

use std::time::Duration;
use stockade_core::redact::{mask_password, scrub};

use redis::AsyncCommands;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use stockade_test_support::postgres_server::Durability;
use stockade_test_support::{PostgresServer, RedisServer};

use crate::counters::DatabaseTarget;
use crate::strategy::StrategyError;
use crate::strategy::redis_keys::PREFIX;

/// How long the bench waits for a named server (`--redis-url`,
/// `--database-url`) to answer before giving up with an error.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the servers could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum ServersError {
    /// A throwaway server could not be started.
    #[error(
        "could not start a throwaway server (install it, or pass --redis-url / --database-url to use a running one): {0}"
    )]
    Start(#[from] stockade_test_support::TestSupportError),
    /// A named server could not be used.
    #[error("{0}")]
    Unusable(String),
}

/// The servers of a run.
#[derive(Debug, Default)]
pub struct Servers {
    redis: Option<RedisSide>,
    postgres: Option<PostgresSide>,
}

#[derive(Debug)]
struct RedisSide {
    url: String,
    owned: Option<RedisServer>,
}

#[derive(Debug)]
enum PostgresSide {
    Owned(PostgresServer),
    Named(String),
}

impl Servers {
    /// Makes Redis ready if `redis` and PostgreSQL if `postgres`: the named
    /// server, or a throwaway one. Call it from a long-lived thread (not
    /// inside `spawn_blocking`): the throwaway servers live as long as it.
    pub async fn prepare(
        redis: bool,
        postgres: bool,
        redis_url: Option<&str>,
        database_url: Option<&str>,
    ) -> Result<Self, ServersError> {
        let redis = match (redis, redis_url) {
            (false, _) => None,
            (true, Some(url)) => {
                check_redis(url).await?;
                Some(RedisSide {
                    url: url.to_owned(),
                    owned: None,
                })
            }
            (true, None) => {
                let server = RedisServer::start()?;
                Some(RedisSide {
                    url: server.url(),
                    owned: Some(server),
                })
            }
        };
        let postgres = match (postgres, database_url) {
            (false, _) => None,
            (true, Some(url)) => {
                check_postgres(url).await?;
                Some(PostgresSide::Named(url.to_owned()))
            }
            (true, None) => Some(PostgresSide::Owned(PostgresServer::start_with(
                Durability::Durable,
            )?)),
        };
        Ok(Self { redis, postgres })
    }

    /// The Redis URL, if Redis is part of the run.
    pub fn redis_url(&self) -> Option<&str> {
        self.redis.as_ref().map(|r| r.url.as_str())
    }

    /// Gives the next strategy a clean Redis: everything flushed on a
    /// throwaway server, the bench's own keys removed on a named one.
    pub async fn clean_redis(&self) -> Result<(), StrategyError> {
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let mut conn = redis::Client::open(redis.url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        if redis.owned.is_some() {
            let () = redis::cmd("FLUSHALL").query_async(&mut conn).await?;
            return Ok(());
        }
        let pattern = format!("{PREFIX}*");
        let keys: Vec<String> = {
            let mut iter = conn.scan_match::<_, String>(&pattern).await?;
            let mut keys = Vec::new();
            while let Some(key) = futures_next(&mut iter).await {
                keys.push(key);
            }
            keys
        };
        for chunk in keys.chunks(500) {
            let () = redis::cmd("UNLINK")
                .arg(chunk)
                .query_async(&mut conn)
                .await?;
        }
        Ok(())
    }

    /// A database for the next PostgreSQL strategy: a new one on a
    /// throwaway server, the named one otherwise.
    pub async fn database(&self) -> Result<DatabaseTarget, StrategyError> {
        match &self.postgres {
            None => Err(StrategyError::Other(
                "no PostgreSQL server was prepared".into(),
            )),
            Some(PostgresSide::Owned(server)) => {
                let url = server
                    .fresh_database()
                    .await
                    .map_err(|e| StrategyError::Other(format!("creating a database: {e}")))?;
                Ok(DatabaseTarget {
                    url,
                    monitor_url: Some(server.url()),
                })
            }
            Some(PostgresSide::Named(url)) => {
                // Watch from the server's `postgres` database if the role
                // may connect there, so the watching is not counted.
                let monitor_url = url
                    .parse::<PgConnectOptions>()
                    .ok()
                    .filter(|options| options.get_database() != Some("postgres"))
                    .map(|options| options.database("postgres").to_url_lossy().to_string());
                Ok(DatabaseTarget {
                    url: url.clone(),
                    monitor_url,
                })
            }
        }
    }

    /// What the run uses, one line per server.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(redis) = &self.redis {
            let kind = if redis.owned.is_some() {
                "a throwaway redis-server (no persistence)"
            } else {
                "the named server"
            };
            lines.push(format!("Redis: {kind} at {}", mask_password(&redis.url)));
        }
        match &self.postgres {
            Some(PostgresSide::Owned(server)) => lines.push(format!(
                "PostgreSQL: a throwaway server (fsync on, a new database per strategy) at {}",
                server.url()
            )),
            Some(PostgresSide::Named(url)) => {
                lines.push(format!(
                    "PostgreSQL: the named database {}",
                    mask_password(url)
                ));
            }
            None => {}
        }
        lines
    }
}

async fn futures_next<T>(iter: &mut redis::AsyncIter<'_, T>) -> Option<T>
where
    T: redis::FromRedisValue + Unpin + Send + 'static,
{
    iter.next_item().await.and_then(Result::ok)
}

/// Checks that the Redis at `url` answers `PING`, within
/// [`CONNECT_TIMEOUT`]. The error names the URL without its password.
async fn check_redis(url: &str) -> Result<(), ServersError> {
    let unusable = |why: String| {
        ServersError::Unusable(format!(
            "cannot use the Redis at --redis-url {}: {}",
            mask_password(url),
            scrub(&why, url)
        ))
    };
    let client = redis::Client::open(url).map_err(|e| unusable(e.to_string()))?;
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, ping).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(unusable(error.to_string())),
        Err(_) => Err(unusable(format!(
            "no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// Checks that the PostgreSQL database at `url` accepts a connection,
/// within [`CONNECT_TIMEOUT`] (the strategies' pools would otherwise retry
/// for minutes). The error names the URL without its password.
async fn check_postgres(url: &str) -> Result<(), ServersError> {
    let shown = mask_password(url);
    let options: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| {
        ServersError::Unusable(format!(
            "--database-url {shown} is not a PostgreSQL URL: {}",
            scrub(&e.to_string(), url)
        ))
    })?;
    let unusable = |why: String| {
        ServersError::Unusable(format!(
            "cannot use the PostgreSQL database at --database-url {shown}: {}",
            scrub(&why, url)
        ))
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(unusable(error.to_string())),
        Err(_) => Err(unusable(format!(
            "no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unreachable_named_servers_are_refused_within_seconds_without_the_password() {
        // A port nothing listens on: taken from the kernel, then released.
        let port = stockade_test_support::free_port().unwrap();
        let started = std::time::Instant::now();
        for (redis, postgres) in [
            (Some(format!("redis://:s3cret@127.0.0.1:{port}")), None),
            (
                None,
                Some(format!("postgres://shop:s3cret@127.0.0.1:{port}/sales")),
            ),
        ] {
            let error = Servers::prepare(
                redis.is_some(),
                postgres.is_some(),
                redis.as_deref(),
                postgres.as_deref(),
            )
            .await
            .unwrap_err()
            .to_string();
            assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
            assert!(error.contains("***"), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
        assert!(
            started.elapsed() < CONNECT_TIMEOUT * 2,
            "{:?}",
            started.elapsed()
        );
    }
}
