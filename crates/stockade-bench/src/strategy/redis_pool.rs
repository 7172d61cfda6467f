//! The connection pool of the hand-written Redis strategies: a deadpool of
//! Redis connections, each checked out by one request at a time, as the
//! founding articles' Spring services run theirs (Lettuce or Redisson
//! pools).
//!
//! Waiters are served first come, first served (deadpool queues them on a
//! fair semaphore, as HikariCP and commons-pool do), connections are not
//! pinged when checked out (commons-pool's default `testOnBorrow=false`),
//! and the pool is filled before the run, so the measurement is of
//! purchases, not of connecting.

use deadpool::managed::{self, Metrics, Object, Pool, RecycleResult};
use redis::aio::MultiplexedConnection;

use super::StrategyError;

/// Opens Redis connections for the pool; hands them back unchanged.
#[derive(Debug)]
pub struct Connections {
    client: redis::Client,
}

impl managed::Manager for Connections {
    type Type = MultiplexedConnection;
    type Error = redis::RedisError;

    async fn create(&self) -> Result<MultiplexedConnection, redis::RedisError> {
        self.client.get_multiplexed_async_connection().await
    }

    async fn recycle(
        &self,
        _connection: &mut MultiplexedConnection,
        _metrics: &Metrics,
    ) -> RecycleResult<redis::RedisError> {
        // No ping on checkout: a broken connection fails the request that
        // uses it, as in the articles' setups.
        Ok(())
    }
}

/// A pool of Redis connections.
pub type RedisPool = Pool<Connections>;

/// A connection checked out of [`RedisPool`].
pub type PooledRedis = Object<Connections>;

/// Opens a pool of `size` connections to `url`, all connected on return.
/// A request waits for a free connection as long as it takes: in a burst,
/// thousands of requests queue for the pool, and the queueing is part of
/// what is measured, not an error.
pub async fn connect(url: &str, size: u32) -> Result<RedisPool, StrategyError> {
    let manager = Connections {
        client: redis::Client::open(url)?,
    };
    let pool = Pool::builder(manager)
        .max_size(size as usize)
        .build()
        .map_err(|e| StrategyError::Other(format!("Redis pool: {e}")))?;
    // Hold every connection at once, so each is established now.
    let mut held = Vec::with_capacity(size as usize);
    for _ in 0..size {
        held.push(checkout(&pool).await?);
    }
    drop(held);
    Ok(pool)
}

/// Checks out a connection.
pub async fn checkout(pool: &RedisPool) -> Result<PooledRedis, StrategyError> {
    pool.get()
        .await
        .map_err(|e| StrategyError::Other(format!("Redis pool: {e}")))
}
