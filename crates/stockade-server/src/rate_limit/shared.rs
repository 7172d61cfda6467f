//! Limits kept in Redis and shared by every instance on it: each check is
//! one call of `gcra.lua`, which reads and moves the key's theoretical
//! arrival time atomically.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;
use stockade_core::Clock;
use stockade_engine::redis::SharedConnection;

use super::{Limit, Scope};

static GCRA: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("gcra.lua")));

/// The prefix of every rate-limit key.
pub const KEY_PREFIX: &str = "stockade:limit:";

/// The Redis limits.
pub(super) struct SharedLimits {
    connection: SharedConnection,
    clock: Arc<dyn Clock>,
}

impl SharedLimits {
    /// Limits on the engine's own connection (standalone, Sentinel or
    /// Cluster alike: each check touches one key).
    pub(super) fn new(connection: SharedConnection, clock: Arc<dyn Clock>) -> Self {
        Self { connection, clock }
    }

    /// None if the request conforms, else how long until it would. When
    /// Redis cannot be asked, the request is let through (logged and
    /// counted): a limit protects the service, it is not a reason to
    /// refuse buyers while the engine may still be up.
    pub(super) async fn check(&self, scope: Scope, limit: Limit, key: &str) -> Option<Duration> {
        let now = self.clock.now().timestamp_micros();
        let interval = limit.interval().as_micros() as i64;
        let mut connection = self.connection.clone();
        let reply: Result<(i64, i64), _> = GCRA
            .key(format!("{KEY_PREFIX}{}:{key}", scope.name()))
            .arg(now)
            .arg(interval.max(1))
            .arg(limit.burst)
            .invoke_async(&mut connection)
            .await;
        match reply {
            Ok((1, _)) => None,
            Ok((_, wait)) => Some(Duration::from_micros(wait.max(0) as u64)),
            Err(error) => {
                tracing::warn!(%error, "rate limit check failed; letting the request through");
                metrics::counter!("stockade_rate_limit_errors_total").increment(1);
                None
            }
        }
    }
}
