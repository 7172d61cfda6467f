//! The ways of selling limited stock that `stockade bench` compares, behind
//! one [`Strategy`] interface: set up a sale on a clean state, decide one
//! buyer's purchase, and report what the server holds afterwards.
//!
//! | strategy | how one purchase is decided |
//! | --- | --- |
//! | `pg-for-update` | a client-side transaction: `SELECT ... FOR UPDATE` of the sale row, duplicate check, decrement, insert the order, commit (six round trips) |
//! | `pg-conditional` | one statement: a conditional `UPDATE ... WHERE remaining >= 1` and the order insert in a CTE, a unique index against duplicates |
//! | `redis-lock` | acquire a Redis lock for the sale (`stockade-lock`), read stock and buyer, write both, release |
//! | `redis-decr` | `DECR`, and `INCR` back when the result is negative: no duplicate check |
//! | `redis-lua` | one `EVALSHA` of a per-request Lua script (duplicate check, stock check, decrement) through a connection pool |
//! | `stockade-redis`, `stockade-postgres`, `stockade-memory` | Stockade's own engines through [`stockade_core::Engine`]; on PostgreSQL, the order store deciding itself (`stockade_store::StoreEngine`) |
//!
//! The hand-written strategies follow the founding articles, including
//! their connection pools; they are deliberately not improved.

mod engines;
mod pg_conditional;
mod pg_for_update;
pub(crate) mod pg_schema;
mod redis_decr;
pub(crate) mod redis_keys;
mod redis_lock;
mod redis_lua;
pub(crate) mod redis_pool;

/// The commands the Lua scripts call, listed by `build.rs`.
mod script_commands {
    include!(concat!(env!("OUT_DIR"), "/script_commands.rs"));
}

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;

pub use engines::EngineStrategy;
pub use pg_conditional::PgConditional;
pub use pg_for_update::PgForUpdate;
pub use redis_decr::RedisDecr;
pub use redis_lock::RedisLock;
pub use redis_lua::RedisLua;

/// The strategies, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StrategyKind {
    /// Row lock held across client round trips.
    PgForUpdate,
    /// One conditional update, no explicit lock.
    PgConditional,
    /// A distributed lock around read-check-write.
    RedisLock,
    /// DECR with INCR compensation.
    RedisDecr,
    /// A Lua script per request through a pool.
    RedisLua,
    /// Stockade's Redis engine.
    StockadeRedis,
    /// Stockade's PostgreSQL engine: the order store deciding itself.
    StockadePostgres,
    /// Stockade's in-memory engine.
    StockadeMemory,
}

impl StrategyKind {
    /// Every strategy, in the order a run reports them.
    pub const ALL: [StrategyKind; 8] = [
        Self::PgForUpdate,
        Self::PgConditional,
        Self::RedisLock,
        Self::RedisDecr,
        Self::RedisLua,
        Self::StockadeRedis,
        Self::StockadePostgres,
        Self::StockadeMemory,
    ];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PgForUpdate => "pg-for-update",
            Self::PgConditional => "pg-conditional",
            Self::RedisLock => "redis-lock",
            Self::RedisDecr => "redis-decr",
            Self::RedisLua => "redis-lua",
            Self::StockadeRedis => "stockade-redis",
            Self::StockadePostgres => "stockade-postgres",
            Self::StockadeMemory => "stockade-memory",
        }
    }

    /// Whether it needs a Redis server.
    pub fn needs_redis(self) -> bool {
        matches!(
            self,
            Self::RedisLock | Self::RedisDecr | Self::RedisLua | Self::StockadeRedis
        )
    }

    /// The Redis commands this strategy's Lua scripts call (read from the
    /// scripts' sources at build time, see `build.rs`): `INFO commandstats`
    /// counts them again on their own, while the script's `EVALSHA` time
    /// already includes them.
    pub fn redis_script_commands(self) -> &'static [&'static str] {
        match self {
            Self::RedisLua => script_commands::FCFS_SCRIPT_COMMANDS,
            Self::StockadeRedis => script_commands::ENGINE_SCRIPT_COMMANDS,
            Self::RedisLock => script_commands::LOCK_SCRIPT_COMMANDS,
            Self::PgForUpdate
            | Self::PgConditional
            | Self::RedisDecr
            | Self::StockadePostgres
            | Self::StockadeMemory => &[],
        }
    }

    /// The commands this strategy sends on its own that its scripts also
    /// call: `INFO commandstats` cannot tell the two apart, so their time
    /// is left out of the Redis time per purchase, which is then a lower
    /// bound (the report says by how much at most). `redis-lock` reads the
    /// stock with `GET`, which the lock's scripts also call.
    pub fn redis_commands_also_in_scripts(self) -> &'static [&'static str] {
        match self {
            Self::RedisLock => &["get"],
            _ => &[],
        }
    }

    /// Whether it can sell a sale of several SKUs (`--skus`): Stockade's
    /// engines; the baselines sell one counter.
    pub fn sells_skus(self) -> bool {
        matches!(
            self,
            Self::StockadeRedis | Self::StockadePostgres | Self::StockadeMemory
        )
    }

    /// Whether it needs a PostgreSQL server.
    pub fn needs_postgres(self) -> bool {
        matches!(
            self,
            Self::PgForUpdate | Self::PgConditional | Self::StockadePostgres
        )
    }

    /// Parses a comma-separated list (`redis-lua,stockade-redis`), keeping
    /// the order given and dropping repeats.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, String> {
        let mut kinds = Vec::new();
        for name in list.split(',').map(str::trim) {
            if name.is_empty() {
                continue;
            }
            let kind: Self = name.parse()?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Err("name at least one strategy".into());
        }
        Ok(kinds)
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StrategyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown strategy {s:?}: choose from {}", names.join(", "))
            })
    }
}

/// The sale a strategy sets up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleSetup {
    /// A fresh id (`A-Za-z0-9_-`, at most 64 characters).
    pub id: String,
    /// Items on sale.
    pub stock: u32,
    /// SKUs the stock is split over ([`crate::scenario::skus`]); only the
    /// Stockade strategies sell more than one.
    pub skus: u32,
}

/// The answer to one purchase request, as the buyer would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The buyer got an item.
    Purchased,
    /// No stock left.
    SoldOut,
    /// Refused because this buyer already bought.
    AlreadyPurchased,
    /// The request failed (a timeout, a lost connection, a database error).
    Failed(String),
}

/// What the server holds once the run is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Stock left according to the server (negative if a strategy broke).
    pub remaining: i64,
    /// Orders (or buyers) the server recorded, where it records any.
    pub recorded_orders: Option<u64>,
    /// The lowest stock value the strategy saw stored during the run, where
    /// it can see one (DECR returns it).
    pub lowest_stock_seen: Option<i64>,
}

/// Why a strategy could not be set up or checked.
#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    /// Redis failed.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// PostgreSQL failed.
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] sqlx::Error),
    /// A Stockade engine failed.
    #[error("engine: {0}")]
    Engine(#[from] stockade_core::EngineError),
    /// The order store failed.
    #[error("order store: {0}")]
    Store(#[from] stockade_store::StoreError),
    /// The lock library failed.
    #[error("lock: {0}")]
    Lock(#[from] stockade_lock::LockError),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Anything that answers a buyer's request for one item: a strategy, or a
/// running service over HTTP.
#[async_trait]
pub trait Purchaser: Send + Sync {
    /// Decides one buyer's request for one item.
    async fn purchase(&self, buyer: &str) -> Answer;
}

/// One way of selling stock.
///
/// A run calls [`setup`](Strategy::setup) once on a clean server, then
/// [`settle`](Strategy::settle), then [`purchase`](Purchaser::purchase) from
/// many tasks at once, then [`finish`](Strategy::finish) and
/// [`verify`](Strategy::verify).
#[async_trait]
pub trait Strategy: Purchaser {
    /// Which strategy this is.
    fn kind(&self) -> StrategyKind;

    /// Creates the sale with all its stock, and warms connection pools so
    /// that the run measures purchases, not connecting.
    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError>;

    /// Makes the server's activity counters current before the run is
    /// measured (PostgreSQL reports transactions lazily). Default: nothing.
    async fn settle(&self) -> Result<(), StrategyError> {
        Ok(())
    }

    /// Closes what the run used, so the server's counters are final.
    async fn finish(&self) {}

    /// Reads what the server holds for the sale, over a fresh connection.
    async fn verify(&self) -> Result<Verification, StrategyError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in StrategyKind::ALL {
            assert_eq!(kind.as_str().parse::<StrategyKind>().unwrap(), kind);
        }
    }

    #[test]
    fn lists_keep_their_order_and_drop_repeats() {
        assert_eq!(
            StrategyKind::parse_list("redis-lua, pg-for-update,redis-lua").unwrap(),
            vec![StrategyKind::RedisLua, StrategyKind::PgForUpdate]
        );
        let unknown = StrategyKind::parse_list("redis-lua,redis-magic").unwrap_err();
        assert!(unknown.contains("redis-magic") && unknown.contains("pg-for-update"));
        assert!(StrategyKind::parse_list(" , ").is_err());
    }

    #[test]
    fn each_strategy_names_the_servers_it_needs() {
        assert!(StrategyKind::RedisLua.needs_redis());
        assert!(!StrategyKind::RedisLua.needs_postgres());
        assert!(StrategyKind::StockadePostgres.needs_postgres());
        assert!(!StrategyKind::StockadeMemory.needs_redis());
        assert!(!StrategyKind::StockadeMemory.needs_postgres());
    }

    #[test]
    fn the_script_commands_are_read_from_the_scripts() {
        // lua/fcfs_purchase.lua: SISMEMBER, GET, DECR, SADD.
        assert_eq!(
            StrategyKind::RedisLua.redis_script_commands(),
            ["decr", "get", "sadd", "sismember"]
        );
        for kind in [StrategyKind::StockadeRedis, StrategyKind::RedisLock] {
            let commands = kind.redis_script_commands();
            assert!(!commands.is_empty(), "{kind}");
            assert!(
                commands.iter().all(|c| *c == c.to_ascii_lowercase()),
                "{kind}: {commands:?}"
            );
        }
        for kind in StrategyKind::ALL {
            if !kind.needs_redis() {
                assert!(kind.redis_script_commands().is_empty(), "{kind}");
            }
            for command in kind.redis_commands_also_in_scripts() {
                assert!(
                    kind.redis_script_commands().contains(command),
                    "{kind}: {command}"
                );
            }
        }
    }
}
