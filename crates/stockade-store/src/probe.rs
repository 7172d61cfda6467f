//! The readiness probe's own way to the database: a pool of one
//! connection beside the store's, so the ping never queues behind sale
//! traffic for a pooled connection, and a short timeout, so a database
//! that stopped answering reads as down within a probe's period.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

use crate::{StoreError, StoreKind, sqlite};

/// How long the ping may take, connecting included: half the 1 s timeout
/// of the shipped Kubernetes readiness probe, so a database that hangs is
/// reported down rather than failing the probe.
pub const PING_TIMEOUT: Duration = Duration::from_millis(500);

/// The probe's pool: one connection, opened on the first ping (and again
/// after it broke).
pub(crate) fn pool(url: &str, kind: StoreKind) -> Result<AnyPool, sqlx::Error> {
    let mut options = AnyPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .acquire_timeout(PING_TIMEOUT);
    if kind == StoreKind::Sqlite {
        options = options
            .after_connect(|conn, _meta| Box::pin(async move { sqlite::configure(conn).await }));
    }
    options.connect_lazy(url)
}

/// `SELECT 1` on the probe's connection, within [`PING_TIMEOUT`].
pub(crate) async fn ping(pool: &AnyPool) -> Result<(), StoreError> {
    match tokio::time::timeout(PING_TIMEOUT, sqlx::query("SELECT 1").execute(pool)).await {
        Ok(result) => result.map(|_| ()).map_err(StoreError::from),
        Err(_) => Err(StoreError::Unavailable(sqlx::Error::Io(
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer to the readiness ping within {PING_TIMEOUT:?}"),
            ),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::OrderStore;

    /// Sale traffic holding every connection of the store's pool must not
    /// make the readiness ping wait for one (it would answer "down" after
    /// the pool's acquire timeout, on every instance at once).
    #[tokio::test]
    async fn the_ping_answers_while_sale_traffic_holds_every_pooled_connection() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("orders.db").display()
        );
        let store = OrderStore::open(&url).await.unwrap();
        let mut held = Vec::new();
        while let Ok(Ok(conn)) =
            tokio::time::timeout(Duration::from_millis(200), store.pool.acquire()).await
        {
            held.push(conn);
        }
        assert!(!held.is_empty());
        let ping = tokio::time::timeout(Duration::from_secs(2), store.ping()).await;
        assert!(
            matches!(ping, Ok(Ok(()))),
            "the ping with all {} pooled connections in use: {ping:?}",
            held.len()
        );
    }
}
