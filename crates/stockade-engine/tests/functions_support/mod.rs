//! What the tests of the scripts' library share: an engine on a URL with a
//! scripts mode, and what a server says about its scripts.

use std::sync::Arc;

use stockade_core::{Engine, EngineError, Purchase, PurchaseOutcome, SaleSpec, SystemClock};
use stockade_engine::{RedisEngine, RedisEngineConfig, ScriptsMode};
use stockade_test_support::RedisServer;

pub async fn connect(url: &str, scripts: ScriptsMode) -> Arc<RedisEngine> {
    let config = RedisEngineConfig::from_url(url).unwrap().scripts(scripts);
    Arc::new(
        RedisEngine::connect(&config, Arc::new(SystemClock))
            .await
            .unwrap(),
    )
}

pub fn spec(id: &str, stock: u32) -> SaleSpec {
    SaleSpec::builder(id, stock).unwrap().build().unwrap()
}

pub async fn buy(
    engine: &RedisEngine,
    sale: &str,
    user: &str,
) -> Result<PurchaseOutcome, EngineError> {
    engine
        .purchase(&Purchase::new(sale, user, 1).unwrap())
        .await
}

/// How many times `server` ran `command` (`fcall`, `evalsha`,
/// `function|load`), from `INFO commandstats`.
pub fn calls(server: &RedisServer, command: &str) -> u64 {
    let stats = server.command(&["INFO", "commandstats"]).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// Whether `server` holds a Functions library whose name starts with
/// `name` (`FUNCTION LIST LIBRARYNAME` takes a glob pattern).
pub fn has_library(server: &RedisServer, name: &str) -> bool {
    let pattern = format!("{name}*");
    let listed = server
        .command(&["FUNCTION", "LIST", "LIBRARYNAME", &pattern])
        .unwrap();
    listed.lines().any(|line| line.starts_with(name))
}
