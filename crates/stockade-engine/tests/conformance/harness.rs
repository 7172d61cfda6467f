//! How each engine is set up for a conformance test: a fresh engine on a
//! fresh backend, with a manual clock the test can move.
//!
//! `postgres` and `sqlite` are the order store deciding purchases itself
//! ([`StoreEngine`], [`Durability::Committed`]); memory and Redis keep
//! their own stock beside the store ([`Durability::Outbox`]).
//!
//! [`Durability::Committed`]: stockade_core::Durability::Committed
//! [`Durability::Outbox`]: stockade_core::Durability::Outbox

use std::any::Any;
use std::sync::Arc;

use chrono::Utc;
use stockade_core::{Engine, ManualClock};
use stockade_engine::{MemoryEngine, RedisEngine, RedisEngineConfig, ScriptsMode};
use stockade_sim::redis::SimRedis;
use stockade_store::{OrderStore, StoreEngine};
use stockade_test_support::{PostgresServer, RedisServer};

/// An engine under test, its clock, and whatever keeps its backend alive.
pub struct Harness {
    pub engine: Arc<dyn Engine>,
    pub clock: ManualClock,
    /// The order store the engine decides in, for the store engines: a
    /// scenario reads what it committed there.
    pub store: Option<OrderStore>,
    /// Whether sales are split over shards, whose outboxes are merged by
    /// the millisecond (orders of one millisecond in no set order).
    pub sharded: bool,
    _backend: Box<dyn Any + Send + Sync>,
}

fn clock() -> ManualClock {
    ManualClock::new(Utc::now())
}

pub async fn memory() -> Harness {
    let clock = clock();
    Harness {
        engine: Arc::new(MemoryEngine::new(Arc::new(clock.clone()))),
        clock,
        store: None,
        sharded: false,
        _backend: Box::new(()),
    }
}

/// The Redis engine as it runs by default: its scripts as a Functions
/// library on the Redis 7 the tests start.
pub async fn redis() -> Harness {
    redis_with(ScriptsMode::Auto).await
}

/// The Redis engine with its scripts forced to EVALSHA, as on Redis 6.
pub async fn redis_eval() -> Harness {
    redis_with(ScriptsMode::Eval).await
}

async fn redis_with(scripts: ScriptsMode) -> Harness {
    let server = RedisServer::start().expect("start redis-server");
    let clock = clock();
    let engine = RedisEngine::connect(
        &RedisEngineConfig::new(server.url()).scripts(scripts),
        Arc::new(clock.clone()),
    )
    .await
    .expect("connect to redis");
    Harness {
        engine: Arc::new(engine),
        clock,
        store: None,
        sharded: false,
        _backend: Box::new(server),
    }
}

/// Redis with every sale that can be split spread over three shards
/// (`sharded.rs`).
pub async fn redis_sharded() -> Harness {
    let mut harness = redis().await;
    harness.engine = Arc::new(crate::sharded::Sharded {
        inner: harness.engine,
    });
    harness.sharded = true;
    harness
}

/// The Redis engine on the simulator's in-process Redis, reached through
/// a [`Connector`](stockade_engine::Connector) and sharing the scenario's
/// clock; its tests run on a current-thread runtime with paused time.
pub async fn sim() -> Harness {
    sim_with(ScriptsMode::Auto).await
}

/// The simulated Redis with the scripts forced to EVALSHA.
pub async fn sim_eval() -> Harness {
    sim_with(ScriptsMode::Eval).await
}

/// The simulated Redis with every sale that can be split spread over
/// three shards.
pub async fn sim_sharded() -> Harness {
    let mut harness = sim().await;
    harness.engine = Arc::new(crate::sharded::Sharded {
        inner: harness.engine,
    });
    harness.sharded = true;
    harness
}

async fn sim_with(scripts: ScriptsMode) -> Harness {
    let clock = clock();
    let server = SimRedis::new("conformance", Arc::new(clock.clone()));
    let engine = RedisEngine::connect(
        &RedisEngineConfig::connected(Arc::new(server.clone())).scripts(scripts),
        Arc::new(clock.clone()),
    )
    .await
    .expect("connect to the simulated redis");
    Harness {
        engine: Arc::new(engine),
        clock,
        store: None,
        sharded: false,
        _backend: Box::new(server),
    }
}

/// The store engine on `url`, its backend kept alive by `backend`.
async fn store_engine(url: &str, backend: Box<dyn Any + Send + Sync>) -> Harness {
    let store = OrderStore::open(url).await.expect("open the order store");
    let clock = clock();
    Harness {
        engine: Arc::new(StoreEngine::new(store.clone(), Arc::new(clock.clone()))),
        clock,
        store: Some(store),
        sharded: false,
        _backend: backend,
    }
}

/// The store engine on a fresh database of a throwaway PostgreSQL.
pub async fn postgres() -> Harness {
    let server = PostgresServer::start().expect("start postgres");
    let url = server.fresh_database().await.expect("create a database");
    store_engine(&url, Box::new(server)).await
}

/// The store engine on a SQLite file in a temporary directory.
pub async fn sqlite() -> Harness {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("orders.db").display()
    );
    store_engine(&url, Box::new(dir)).await
}
