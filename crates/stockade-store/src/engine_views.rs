//! Every instance's view of the engine, kept in the store so that a change
//! of authority is decided from more than one instance's view.
//!
//! Each instance reports once a second whether it reached the engine
//! ([`OrderStore::report_engine_view`]). A sale moves to the fallback only
//! when no instance has reached the engine for a quiet period
//! ([`OrderStore::fallback_hold`]): an instance cut off from Redis by a
//! partition answers 503 instead of moving the sale from under the
//! instances still selling through Redis. Each also reports the orders it
//! accepted and has not committed; the move waits for them, so the
//! fallback never sells the stock of an order named before the move. Times are the store's clock, so
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

/// What holds a move to the fallback off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackHold {
    /// Some instance reached the engine within the quiet period (a
    /// partition cut the asking instance off; the others sell through
    /// Redis).
    Reached,
    /// Some live instance still has orders the engine accepted on their way
    /// to the store, or has not reported since it last reached the engine
    /// (it may have accepted some since): moving now would let the
    /// fallback sell their stock, and void them when they commit.
    Committing,
}

impl OrderStore {
    /// Records this instance's view of the engine: it reached it just now
    /// (`reached`), or it did not (the last time it did stays), and how
    /// many orders it has accepted from the engine and not committed yet.
    pub async fn report_engine_view(
        &self,
        instance: &str,
        reached: bool,
        in_flight: usize,
    ) -> Result<(), StoreError> {
        // The clock is read once: PostgreSQL's `clock_timestamp()` moves
        // between two calls in one statement, and a report that reached the
        // engine must record the same instant for both (see `fallback_hold`:
        // reported at or before the last reach means "may have accepted
        // orders since").
        let now = store_now_ms(self.kind());
        let (first, reached_at) = if reached {
            ("clock.now_ms", "EXCLUDED.reported_at_ms")
        } else {
            ("NULL", "engine_views.reached_at_ms")
        };
        // `WHERE true`: SQLite needs it to read `ON CONFLICT` after a SELECT.
        let sql = format!(
            "INSERT INTO engine_views (instance, reached_at_ms, reported_at_ms, in_flight)
             SELECT $1, {first}, clock.now_ms, $2 FROM (SELECT {now} AS now_ms) AS clock WHERE true
             ON CONFLICT (instance) DO UPDATE
                SET reached_at_ms = {reached_at}, reported_at_ms = EXCLUDED.reported_at_ms,
                    in_flight = EXCLUDED.in_flight",
        );
        sqlx::query(&sql)
            .bind(instance)
            .bind(i64::try_from(in_flight).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
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

    /// What holds a move to the fallback off, if anything (by the store's
    /// clock): an instance that reached the engine within `quiet`, or an
    /// instance that reported within `live` (instances silent longer are
    /// gone, or cut off from the store too) with orders still to commit or
    /// no report since its last contact with the engine.
    pub async fn fallback_hold(
        &self,
        quiet: Duration,
        live: Duration,
    ) -> Result<Option<FallbackHold>, StoreError> {
        let now = store_now_ms(self.kind());
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT
                COALESCE(SUM(CASE WHEN reached_at_ms > {now} - $1 THEN 1 ELSE 0 END), 0) AS reached,
                COALESCE(SUM(CASE WHEN reported_at_ms > {now} - $2
                                   AND (in_flight > 0 OR reported_at_ms <= COALESCE(reached_at_ms, -1))
                                  THEN 1 ELSE 0 END), 0) AS committing
               FROM engine_views"
        );
        let row = sqlx::query(&sql)
            .bind(ms(quiet))
            .bind(ms(live))
            .fetch_one(&self.pool)
            .await?;
        let reached: i64 = sqlx::Row::try_get(&row, "reached")?;
        let committing: i64 = sqlx::Row::try_get(&row, "committing")?;
        Ok(if reached > 0 {
            Some(FallbackHold::Reached)
        } else if committing > 0 {
            Some(FallbackHold::Committing)
        } else {
            None
        })
    }
}
