//! The connection pool of the hand-written Redis strategies: a bb8 pool of
//! connections, each checked out by one request at a time, as the founding
//! articles' Spring services run theirs (Lettuce or Redisson pools).
//!
//! Connections are not pinged on checkout (`test_on_check_out(false)`, as in
//! commons-pool's default `testOnBorrow=false`), and the pool is filled
//! before the run, so the measurement is of purchases, not of connecting.

use std::time::Duration;

use bb8_redis::RedisConnectionManager;
use bb8_redis::bb8::{Pool, PooledConnection};

use super::StrategyError;

/// A pool of Redis connections.
pub type RedisPool = Pool<RedisConnectionManager>;

/// A connection checked out of [`RedisPool`].
pub type PooledRedis<'a> = PooledConnection<'a, RedisConnectionManager>;

/// How long a request may wait for a free connection. Long: in a burst,
/// thousands of requests queue for the pool, and the queueing is part of
/// what is measured, not an error.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(600);

/// Opens a pool of `size` connections to `url`, all connected on return.
pub async fn connect(url: &str, size: u32) -> Result<RedisPool, StrategyError> {
    let manager = RedisConnectionManager::new(url)?;
    let pool = Pool::builder()
        .max_size(size)
        .min_idle(Some(size))
        .test_on_check_out(false)
        .connection_timeout(CHECKOUT_TIMEOUT)
        .build(manager)
        .await?;
    // Hold every connection at once, so each is established now.
    let mut held = Vec::with_capacity(size as usize);
    for _ in 0..size {
        held.push(checkout(&pool).await?);
    }
    drop(held);
    Ok(pool)
}

/// Checks out a connection.
pub async fn checkout(pool: &RedisPool) -> Result<PooledRedis<'_>, StrategyError> {
    pool.get()
        .await
        .map_err(|e| StrategyError::Other(format!("Redis pool: {e}")))
}
