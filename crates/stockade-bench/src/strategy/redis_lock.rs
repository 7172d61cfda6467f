//! `redis-lock`: the lock-based approach of the founding articles. Each
//! purchase takes the sale's Redis lock (with `stockade-lock`: `SET NX PX`
//! plus a fencing counter, released by compare-and-delete, waiters woken by
//! pub/sub), reads the stock and whether the buyer already bought, writes
//! the decrement and the buyer, and releases the lock.
//!
//! Reads and writes are one pipelined round trip each, through the same
//! kind of connection pool as the other hand-written Redis strategies. The
//! lock serialises every purchase of the sale, including the ones that end
//! up "sold out", which is what this strategy costs.

use std::time::Duration;

use async_trait::async_trait;
use redis::AsyncCommands;
use stockade_lock::{Lease, LockError, Locks};

use super::redis_keys::{FcfsKeys, PREFIX};
use super::redis_pool::{self, RedisPool};
use super::{Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification};

/// How long a purchase may wait for the lock. Long: in a burst every buyer
/// queues for the one lock, and the queueing is what is measured.
const LOCK_WAIT: Duration = Duration::from_secs(600);
/// The lease of each acquisition: far above the critical section (two
/// round trips), so it only matters if the process stalls.
const LEASE: Duration = Duration::from_secs(10);

/// A distributed lock around read-check-write.
pub struct RedisLock {
    url: String,
    pool: RedisPool,
    locks: Locks,
    keys: Option<FcfsKeys>,
}

impl RedisLock {
    /// Connects a lock client and a pool of `pool_size` connections to `url`.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StrategyError> {
        let locks = Locks::builder()
            .node(url)
            .key_prefix(format!("{PREFIX}lock"))
            .connect()
            .await?;
        Ok(Self {
            url: url.to_owned(),
            pool: redis_pool::connect(url, pool_size).await?,
            locks,
            keys: None,
        })
    }

    async fn decide(&self, keys: &FcfsKeys, buyer: &str) -> Result<Answer, StrategyError> {
        let mut conn = redis_pool::checkout(&self.pool).await?;
        let (stock, bought): (Option<i64>, bool) = redis::pipe()
            .get(&keys.stock)
            .sismember(&keys.buyers, buyer)
            .query_async(&mut *conn)
            .await?;
        if bought {
            return Ok(Answer::AlreadyPurchased);
        }
        if stock.unwrap_or(0) <= 0 {
            return Ok(Answer::SoldOut);
        }
        let () = redis::pipe()
            .decr(&keys.stock, 1)
            .ignore()
            .sadd(&keys.buyers, buyer)
            .ignore()
            .query_async(&mut *conn)
            .await?;
        Ok(Answer::Purchased)
    }
}

#[async_trait]
impl Purchaser for RedisLock {
    async fn purchase(&self, buyer: &str) -> Answer {
        let keys = self.keys.as_ref().expect("setup runs before purchases");
        let guard = match self
            .locks
            .lock_with(&keys.lock, LOCK_WAIT, Lease::Fixed(LEASE))
            .await
        {
            Ok(guard) => guard,
            Err(error) => return Answer::Failed(format!("acquiring the lock: {error}")),
        };
        let answer = self.decide(keys, buyer).await;
        let released = guard.release().await;
        match (answer, released) {
            (Err(error), _) => Answer::Failed(error.to_string()),
            // The write may have overlapped another holder's: say so.
            (Ok(_), Err(error @ LockError::NotHeld { .. })) => Answer::Failed(format!(
                "the lease ran out inside the critical section: {error}"
            )),
            (Ok(_), Err(error)) => Answer::Failed(format!("releasing the lock: {error}")),
            (Ok(answer), Ok(())) => answer,
        }
    }
}

#[async_trait]
impl Strategy for RedisLock {
    fn kind(&self) -> StrategyKind {
        StrategyKind::RedisLock
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        let keys = FcfsKeys::new(&sale.id);
        let mut conn = redis_pool::checkout(&self.pool).await?;
        let () = conn.set(&keys.stock, sale.stock).await?;
        drop(conn);
        // Take and release the lock once, so the lock scripts are loaded.
        self.locks
            .lock_with(&keys.lock, LOCK_WAIT, Lease::Fixed(LEASE))
            .await?
            .release()
            .await?;
        self.keys = Some(keys);
        Ok(())
    }

    async fn verify(&self) -> Result<Verification, StrategyError> {
        let keys = self.keys.as_ref().expect("setup runs before verify");
        super::redis_lua::verify_fcfs(&self.url, keys, None).await
    }
}
