//! Helpers shared by the tests.

use std::collections::HashMap;
use std::time::Duration;

use stockade_lock::Locks;
use stockade_test_support::RedisServer;

/// The watchdog lease the tests use: short, so that loss is noticed quickly.
pub const WATCHDOG_LEASE: Duration = Duration::from_millis(600);

/// Starts a throwaway redis-server (an error, never a skip, if missing).
pub fn redis() -> RedisServer {
    RedisServer::start().expect("starting redis-server")
}

/// A client of one node with test-friendly timings.
pub async fn client(url: &str) -> Locks {
    Locks::builder()
        .node(url)
        .watchdog_lease(WATCHDOG_LEASE)
        .command_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect("connecting the lock client")
}

/// A plain connection for poking at the server.
pub async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Runs a command on a plain connection.
pub async fn cmd<T: redis::FromRedisValue>(url: &str, args: &[&str]) -> T {
    let mut connection = raw(url).await;
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query_async(&mut connection).await.unwrap()
}

/// Calls per command (`INFO commandstats`), lower-cased names.
pub async fn command_calls(url: &str) -> HashMap<String, u64> {
    let info: String = cmd(url, &["INFO", "commandstats"]).await;
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// Commands run between two snapshots, leaving out the snapshots' own INFO.
pub fn calls_between(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> u64 {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, calls)| calls - before.get(name).copied().unwrap_or(0))
        .sum()
}

/// The key a lock named `name` lives under (default prefix).
pub fn lock_key(name: &str) -> String {
    format!("stockade-lock:{{{name}}}")
}
