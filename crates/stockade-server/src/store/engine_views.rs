//! Every instance's view of the engine, kept in the store so that a change
//! of authority is decided from more than one instance's view.
//!
//! Each instance reports once a second whether it reached the engine
//! ([`OrderStore::report_engine_view`]). A sale moves to the fallback only
//! when no instance has reached the engine for a quiet period
//! ([`OrderStore::engine_reached_within`]): an instance cut off from Redis
//! by a partition answers 503 instead of moving the sale from under the
//! instances still selling through Redis. Times are the store's clock, so
//! instances' clocks never meet.

use std::time::Duration;

use super::{OrderStore, StoreError, StoreKind};

/// Milliseconds since the Unix epoch on the store's clock, as SQL.
fn store_now_ms(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        StoreKind::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    }
}

impl OrderStore {
    /// Records this instance's view of the engine: it reached it just now
    /// (`reached`), or it did not (the last time it did stays).
    pub async fn report_engine_view(
        &self,
        instance: &str,
        reached: bool,
    ) -> Result<(), StoreError> {
        let now = store_now_ms(self.kind());
        let reached_at = if reached {
            now.to_owned()
        } else {
            "engine_views.reached_at_ms".to_owned()
        };
        let sql = format!(
            "INSERT INTO engine_views (instance, reached_at_ms, reported_at_ms)
             VALUES ($1, {first}, {now})
             ON CONFLICT (instance) DO UPDATE
                SET reached_at_ms = {reached_at}, reported_at_ms = {now}",
            first = if reached { now } else { "NULL" },
        );
        sqlx::query(&sql).bind(instance).execute(&self.pool).await?;
        Ok(())
    }

    /// Forgets the views of instances that have not reported for a day
    /// (each start of a process reports under a new name).
    pub async fn prune_engine_views(&self) -> Result<(), StoreError> {
        let now = store_now_ms(self.kind());
        sqlx::query(&format!(
            "DELETE FROM engine_views WHERE reported_at_ms < {now} - 86400000"
        ))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Whether any instance reached the engine within `quiet` (by the
    /// store's clock).
    pub async fn engine_reached_within(&self, quiet: Duration) -> Result<bool, StoreError> {
        let now = store_now_ms(self.kind());
        let quiet_ms = i64::try_from(quiet.as_millis()).unwrap_or(i64::MAX);
        let sql =
            format!("SELECT COUNT(*) AS n FROM engine_views WHERE reached_at_ms > {now} - $1");
        let row = sqlx::query(&sql)
            .bind(quiet_ms)
            .fetch_one(&self.pool)
            .await?;
        let n: i64 = sqlx::Row::try_get(&row, "n")?;
        Ok(n > 0)
    }
}
