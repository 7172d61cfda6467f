//! `redis-lua`: the founding article's production answer. One Lua script per
//! request (duplicate check, stock check, decrement, record the buyer), run
//! with EVALSHA through a pooled connection.

use async_trait::async_trait;
use redis::AsyncCommands;

use super::redis_keys::FcfsKeys;
use super::redis_pool::{self, RedisPool};
use super::{Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification};

/// The article's script (`lua/fcfs_purchase.lua`).
const SCRIPT: &str = include_str!("../../lua/fcfs_purchase.lua");

/// The per-request Lua script strategy.
pub struct RedisLua {
    url: String,
    pool: RedisPool,
    script: redis::Script,
    keys: Option<FcfsKeys>,
}

impl RedisLua {
    /// Connects a pool of `pool_size` connections to `url`.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StrategyError> {
        Ok(Self {
            url: url.to_owned(),
            pool: redis_pool::connect(url, pool_size).await?,
            script: redis::Script::new(SCRIPT),
            keys: None,
        })
    }

    fn keys(&self) -> &FcfsKeys {
        self.keys.as_ref().expect("setup runs before purchases")
    }
}

#[async_trait]
impl Purchaser for RedisLua {
    async fn purchase(&self, buyer: &str) -> Answer {
        let keys = self.keys();
        let mut conn = match redis_pool::checkout(&self.pool).await {
            Ok(conn) => conn,
            Err(error) => return Answer::Failed(error.to_string()),
        };
        let result: Result<i64, _> = self
            .script
            .key(&keys.stock)
            .key(&keys.buyers)
            .arg(buyer)
            .invoke_async(&mut *conn)
            .await;
        match result {
            Ok(-2) => Answer::AlreadyPurchased,
            Ok(-1) => Answer::SoldOut,
            Ok(remaining) if remaining >= 0 => Answer::Purchased,
            Ok(other) => Answer::Failed(format!("the script answered {other}")),
            Err(error) => Answer::Failed(error.to_string()),
        }
    }
}

#[async_trait]
impl Strategy for RedisLua {
    fn kind(&self) -> StrategyKind {
        StrategyKind::RedisLua
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        let keys = FcfsKeys::new(&sale.id);
        let mut conn = redis_pool::checkout(&self.pool).await?;
        let () = conn.set(&keys.stock, sale.stock).await?;
        // Load the script now, as Spring does at start-up, so that the run's
        // first EVALSHA does not miss.
        let _sha: String = self.script.prepare_invoke().load_async(&mut *conn).await?;
        drop(conn);
        self.keys = Some(keys);
        Ok(())
    }

    async fn verify(&self) -> Result<Verification, StrategyError> {
        verify_fcfs(&self.url, self.keys(), None).await
    }
}

/// Reads the stock counter and the number of recorded buyers over a fresh
/// connection.
pub(crate) async fn verify_fcfs(
    url: &str,
    keys: &FcfsKeys,
    lowest_stock_seen: Option<i64>,
) -> Result<Verification, StrategyError> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let remaining: Option<i64> = conn.get(&keys.stock).await?;
    let buyers: u64 = conn.scard(&keys.buyers).await?;
    Ok(Verification {
        remaining: remaining
            .ok_or_else(|| StrategyError::Other(format!("the key {} is gone", keys.stock)))?,
        recorded_orders: Some(buyers),
        lowest_stock_seen,
    })
}
