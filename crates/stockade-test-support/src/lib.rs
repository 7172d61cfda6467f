//! Throwaway servers for Stockade's tests and benchmarks.
//!
//! Every suite that needs Redis or PostgreSQL starts its own instance on a
//! free port in a temporary directory, so a test can kill, restart, pause or
//! flush it without disturbing anything else on the machine. The process is
//! stopped and the directory removed when the handle is dropped.
//!
//! A missing server binary is an error that says what to install: no suite is
//! ever skipped silently.
//!
//! ```no_run
//! use stockade_test_support::{RedisServer, PostgresServer};
//! # async fn demo() -> Result<(), stockade_test_support::TestSupportError> {
//! let redis = RedisServer::start()?;
//! println!("redis at {}", redis.url());
//! let pg = PostgresServer::start()?;
//! let db_url = pg.fresh_database().await?;
//! println!("a fresh database at {db_url}");
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`browser`]: a headless Chromium over WebDriver for page tests.
//! - [`binaries`]: finding `redis-server`, `postgres`, `initdb` on the machine,
//!   and a Redis 6 `redis-server` where `scripts/test` installs it.
//! - [`process`]: the child-process handle shared by both servers.
//! - [`redis_server`]: the throwaway [`RedisServer`] (Redis 6 too).
//! - [`redis_sentinel`]: [`RedisSentinelGroup`], a primary, a replica and
//!   three sentinels, with an ordered failover.
//! - [`redis_cluster`]: [`RedisCluster`], three primaries, with the
//!   migration of a slot under load.
//! - [`partition`]: [`PartitionProxy`], a TCP proxy that black-holes its
//!   traffic on demand (one process cut off from a server).
//! - [`postgres_server`]: [`PostgresServer`] (initdb + postgres, or a fresh
//!   database on the server named by `DATABASE_URL`).

use std::time::Duration;

pub mod binaries;
pub mod browser;
mod error;
pub mod partition;
pub mod postgres_server;
pub mod process;
pub mod redis_cluster;
pub mod redis_sentinel;
pub mod redis_server;
pub mod serve;

pub use error::TestSupportError;
pub use partition::PartitionProxy;
pub use postgres_server::PostgresServer;
pub use redis_cluster::RedisCluster;
pub use redis_sentinel::RedisSentinelGroup;
pub use redis_server::RedisServer;
pub use serve::ServeProcess;

/// Starts a server with `start` on a free port, trying three ports (with
/// `backon`): another process may take the port between [`free_port`] and
/// the server's bind.
pub fn on_a_free_port<T>(
    mut start: impl FnMut(u16) -> Result<T, TestSupportError>,
) -> Result<T, TestSupportError> {
    use backon::{BlockingRetryable, ConstantBuilder};
    (|| start(free_port()?))
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::ZERO)
                .with_max_times(2),
        )
        .call()
}

/// Starts a killed server again on its own port with `start`, for up to
/// five seconds: the port may linger briefly after the kill.
pub fn on_its_port_again(
    mut start: impl FnMut() -> Result<(), TestSupportError>,
) -> Result<(), TestSupportError> {
    use backon::{BlockingRetryable, ConstantBuilder};
    (|| start())
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(100))
                .with_max_times(49),
        )
        .call()
}

/// Asks the kernel for a free TCP port on the loopback interface.
///
/// The port is released before it is returned, so another process may take
/// it first; callers retry their start-up when that happens.
pub fn free_port() -> Result<u16, TestSupportError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| TestSupportError::Io("binding 127.0.0.1:0 to find a free port".into(), e))?;
    let port = listener
        .local_addr()
        .map_err(|e| TestSupportError::Io("reading the free port".into(), e))?
        .port();
    Ok(port)
}
