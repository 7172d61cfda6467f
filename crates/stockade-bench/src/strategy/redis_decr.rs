//! `redis-decr`: the founding article's first approach. `DECR` the stock; a
//! result of zero or more is a sale, a negative one is "sold out" and is
//! compensated with `INCR`.
//!
//! Kept as the article wrote it: there is no duplicate check (a buyer who
//! taps twice gets two items) and no record of who bought, and while the
//! crowd outnumbers the stock the stored value goes negative between a
//! `DECR` and its `INCR`. The strategy reports the lowest value it saw, so
//! the check can say so.

use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use redis::AsyncCommands;

use super::redis_keys::FcfsKeys;
use super::redis_pool::{self, RedisPool};
use super::{Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification};

/// DECR with INCR compensation.
pub struct RedisDecr {
    url: String,
    pool: RedisPool,
    keys: Option<FcfsKeys>,
    lowest: AtomicI64,
}

impl RedisDecr {
    /// Connects a pool of `pool_size` connections to `url`.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StrategyError> {
        Ok(Self {
            url: url.to_owned(),
            pool: redis_pool::connect(url, pool_size).await?,
            keys: None,
            lowest: AtomicI64::new(i64::MAX),
        })
    }
}

#[async_trait]
impl Purchaser for RedisDecr {
    async fn purchase(&self, _buyer: &str) -> Answer {
        let keys = self.keys.as_ref().expect("setup runs before purchases");
        let mut conn = match redis_pool::checkout(&self.pool).await {
            Ok(conn) => conn,
            Err(error) => return Answer::Failed(error.to_string()),
        };
        let after: i64 = match conn.decr(&keys.stock, 1).await {
            Ok(after) => after,
            Err(error) => return Answer::Failed(error.to_string()),
        };
        self.lowest.fetch_min(after, Ordering::Relaxed);
        if after >= 0 {
            return Answer::Purchased;
        }
        match conn.incr::<_, _, i64>(&keys.stock, 1).await {
            Ok(_) => Answer::SoldOut,
            Err(error) => Answer::Failed(format!("the compensating INCR failed: {error}")),
        }
    }
}

#[async_trait]
impl Strategy for RedisDecr {
    fn kind(&self) -> StrategyKind {
        StrategyKind::RedisDecr
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        let keys = FcfsKeys::new(&sale.id);
        let mut conn = redis_pool::checkout(&self.pool).await?;
        let () = conn.set(&keys.stock, sale.stock).await?;
        drop(conn);
        self.lowest.store(i64::from(sale.stock), Ordering::Relaxed);
        self.keys = Some(keys);
        Ok(())
    }

    async fn verify(&self) -> Result<Verification, StrategyError> {
        let keys = self.keys.as_ref().expect("setup runs before verify");
        let mut verification = super::redis_lua::verify_fcfs(
            &self.url,
            keys,
            Some(self.lowest.load(Ordering::Relaxed)),
        )
        .await?;
        // DECR records no buyers: there is nothing to compare with.
        verification.recorded_orders = None;
        Ok(verification)
    }
}
