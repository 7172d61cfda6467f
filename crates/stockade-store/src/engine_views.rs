//! Every instance's view of the engine, kept in the store so that a change
//! of authority is decided from more than one instance's view.
//!
//! Each instance reports once a second whether it reached the engine, and
//! the orders it accepted and has not committed, with their sales
//! ([`OrderStore::report_engine_view`]). A sale moves to the fallback only
//! when no instance has reached the engine for a quiet period and no live
//! instance has orders on their way ([`OrderStore::fallback_hold`]): an
//! instance cut off from Redis by a partition answers 503 instead of moving
//! the sale from under the instances still selling through Redis, and the
//! fallback never sells the stock of an order named before the move. A
//! rebuild advances a sale's epoch only once no live instance holds orders
//! of that sale ([`OrderStore::rebuild_hold`]), so the advance never voids
//! an order already named to a buyer. Times are the store's clock, so
//! instances' clocks never meet.

use std::time::Duration;

use stockade_core::SaleId;

use super::{OrderStore, StoreError, StoreKind};

/// A span in whole milliseconds, as the store's times are kept.
fn millis(span: Duration) -> i64 {
    i64::try_from(span.as_millis()).unwrap_or(i64::MAX)
}

impl OrderStore {
    /// Reads the store's clock on `executor` (a pooled connection, or the
    /// pool): the database server's, or the clock the store was opened
    /// with ([`crate::StoreOptions::clock`]).
    pub(crate) async fn read_clock<'c>(
        &self,
        executor: impl sqlx::Executor<'c, Database = sqlx::Any>,
    ) -> Result<i64, StoreError> {
        if let Some(clock) = &self.clock {
            return Ok(clock.now().timestamp_millis());
        }
        Ok(sqlx::query_scalar(&format!("SELECT {}", self.now_sql()))
            .fetch_one(executor)
            .await?)
    }

    /// Milliseconds since the Unix epoch on the store's clock, as SQL.
    fn now_sql(&self) -> String {
        match (&self.clock, self.kind) {
            (Some(clock), _) => clock.now().timestamp_millis().to_string(),
            (None, StoreKind::Postgres) => {
                "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)".to_owned()
            }
            (None, StoreKind::Sqlite) => {
                "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)".to_owned()
            }
        }
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

/// What an instance reports of the orders it has accepted from the engine
/// and not committed yet (named to buyers or not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InFlightOrders {
    /// How many.
    pub orders: usize,
    /// Their sales, each once.
    pub sales: Vec<SaleId>,
}

impl OrderStore {
    /// Records this instance's view of the engine: it reached it just now
    /// (`reached`), or it did not (the last time it did stays), and the
    /// orders it has accepted from the engine and not committed yet, as
    /// `in_flight` tells them. The store's clock is read first and
    /// `in_flight` asked after it, so a report stamped after some instant
    /// describes the writer after that instant (see
    /// [`OrderStore::rebuild_hold`]).
    pub async fn report_engine_view(
        &self,
        instance: &str,
        reached: bool,
        in_flight: impl FnOnce() -> InFlightOrders,
    ) -> Result<(), StoreError> {
        self.calls.run(async {
        let mut conn = self.pool.acquire().await?;
        // One instant for the report and, if it reached the engine, the
        // reach: a report that reached the engine must record the same
        // instant for both (see `fallback_hold`: reported at or before the
        // last reach means "may have accepted orders since").
        let now = self.read_clock(&mut *conn).await?;
        let in_flight = in_flight();
        let sales: Vec<&str> = in_flight.sales.iter().map(SaleId::as_str).collect();
        let reached_at = if reached {
            "EXCLUDED.reported_at_ms"
        } else {
            "engine_views.reached_at_ms"
        };
        let sql = format!(
            "INSERT INTO engine_views (instance, reached_at_ms, reported_at_ms, in_flight, in_flight_sales)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (instance) DO UPDATE
                SET reached_at_ms = {reached_at}, reported_at_ms = EXCLUDED.reported_at_ms,
                    in_flight = EXCLUDED.in_flight, in_flight_sales = EXCLUDED.in_flight_sales",
        );
        sqlx::query(&sql)
            .bind(instance)
            .bind(reached.then_some(now))
            .bind(now)
            .bind(i64::try_from(in_flight.orders).unwrap_or(i64::MAX))
            .bind(sales.join(" "))
            .execute(&mut *conn)
            .await?;
        Ok(())
        }).await
    }

    /// The store's clock, in milliseconds since the Unix epoch.
    pub async fn clock_ms(&self) -> Result<i64, StoreError> {
        self.calls
            .run(async { self.read_clock(&self.pool).await })
            .await
    }

    /// The live instances other than `asking` (those that reported within
    /// `live`) that may still hold accepted, uncommitted orders of `sale`:
    /// their last report says so (or says only that they hold some, from a
    /// version that does not name sales), or it was stamped at or before
    /// `since` (store clock), so it may describe their writer before the
    /// caller closed the sale in the engine.
    pub async fn rebuild_hold(
        &self,
        sale: &SaleId,
        since: i64,
        live: Duration,
        asking: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.calls
            .run(async {
                let now = self.now_sql();
                let rows = sqlx::query(&format!(
                    "SELECT instance, reported_at_ms, in_flight, in_flight_sales FROM engine_views
              WHERE instance <> $1 AND reported_at_ms > {now} - $2
              ORDER BY instance"
                ))
                .bind(asking)
                .bind(millis(live))
                .fetch_all(&self.pool)
                .await?;
                let mut holding = Vec::new();
                for row in rows {
                    let reported_at: i64 = sqlx::Row::try_get(&row, "reported_at_ms")?;
                    let orders: i64 = sqlx::Row::try_get(&row, "in_flight")?;
                    let sales: Option<String> = sqlx::Row::try_get(&row, "in_flight_sales")?;
                    let holds_sale = orders > 0
                        && sales.is_none_or(|sales| sales.split(' ').any(|s| s == sale.as_str()));
                    if reported_at <= since || holds_sale {
                        holding.push(sqlx::Row::try_get(&row, "instance")?);
                    }
                }
                Ok(holding)
            })
            .await
    }

    /// How many instances reported within `live` (by the store's clock):
    /// the instances running now, as every one of them counts them.
    pub async fn live_instances(&self, live: Duration) -> Result<usize, StoreError> {
        self.calls
            .run(async {
                let now = self.now_sql();
                let count: i64 = sqlx::query_scalar(&format!(
                    "SELECT COUNT(*) FROM engine_views WHERE reported_at_ms > {now} - $1"
                ))
                .bind(millis(live))
                .fetch_one(&self.pool)
                .await?;
                Ok(usize::try_from(count).unwrap_or_default())
            })
            .await
    }

    /// Forgets the views of instances that have not reported for a day
    /// (each start of a process reports under a new name).
    pub async fn prune_engine_views(&self) -> Result<(), StoreError> {
        self.calls
            .run(async {
                let now = self.now_sql();
                sqlx::query(&format!(
                    "DELETE FROM engine_views WHERE reported_at_ms < {now} - 86400000"
                ))
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
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
        self.calls.run(async {
        let now = self.now_sql();
        let sql = format!(
            "SELECT
                COALESCE(SUM(CASE WHEN reached_at_ms > {now} - $1 THEN 1 ELSE 0 END), 0) AS reached,
                COALESCE(SUM(CASE WHEN reported_at_ms > {now} - $2
                                   AND (in_flight > 0 OR reported_at_ms <= COALESCE(reached_at_ms, -1))
                                  THEN 1 ELSE 0 END), 0) AS committing
               FROM engine_views"
        );
        let row = sqlx::query(&sql)
            .bind(millis(quiet))
            .bind(millis(live))
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
        }).await
    }
}
