//! How each engine is set up for a conformance test: a fresh engine on a
//! fresh backend, with a manual clock the test can move.

use std::any::Any;
use std::sync::Arc;

use chrono::Utc;
use stockade_core::{Engine, ManualClock};
use stockade_engine::{MemoryEngine, PostgresEngine, RedisEngine, RedisEngineConfig};
use stockade_test_support::{PostgresServer, RedisServer};

/// An engine under test, its clock, and whatever keeps its backend alive.
pub struct Harness {
    pub engine: Arc<dyn Engine>,
    pub clock: ManualClock,
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
        _backend: Box::new(()),
    }
}

pub async fn redis() -> Harness {
    let server = RedisServer::start().expect("start redis-server");
    let clock = clock();
    let engine = RedisEngine::connect(
        &RedisEngineConfig::new(server.url()),
        Arc::new(clock.clone()),
    )
    .await
    .expect("connect to redis");
    Harness {
        engine: Arc::new(engine),
        clock,
        _backend: Box::new(server),
    }
}

pub async fn postgres() -> Harness {
    let server = PostgresServer::start().expect("start postgres");
    let url = server.fresh_database().await.expect("create a database");
    let clock = clock();
    let engine = PostgresEngine::connect(&url, 32, Arc::new(clock.clone()))
        .await
        .expect("connect to postgres");
    Harness {
        engine: Arc::new(engine),
        clock,
        _backend: Box::new(server),
    }
}
