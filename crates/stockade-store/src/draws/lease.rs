//! The draws' clock and lease: both on the store's clock, so instances
//! whose clocks differ agree on when entries close and when a lease ran
//! out.

use std::sync::atomic::Ordering;

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::{Any, Row, Transaction};
use stockade_core::SaleId;

use super::super::{OrderStore, StoreError, StoreKind, millis};

impl OrderStore {
    /// The store's clock as the draws read it.
    pub async fn draw_clock(&self) -> Result<DateTime<Utc>, StoreError> {
        self.calls
            .run(async { millis(self.draw_clock_ms(&self.pool).await?) })
            .await
    }

    /// Moves the draws' reading of the store's clock by `by`, for this
    /// handle and its clones: what a manual clock is to an instance, for
    /// tests of entries closing and leases running out.
    pub fn shift_clock(&self, by: TimeDelta) {
        self.clock_shift_ms
            .fetch_add(by.num_milliseconds(), Ordering::Relaxed);
    }

    pub(super) async fn draw_clock_ms<'c>(
        &self,
        executor: impl sqlx::Executor<'c, Database = Any>,
    ) -> Result<i64, StoreError> {
        let shift = self.clock_shift_ms.load(Ordering::Relaxed);
        Ok(self.read_clock(executor).await? + shift)
    }

    /// Takes (or renews) the lease of the draw of `sale` for `owner` for
    /// `lease` from now on the store's clock, if nobody else holds it. True
    /// if `owner` holds it now: a runner asks before each purchase, and
    /// stops at once on false.
    pub async fn claim_draw(
        &self,
        sale: &SaleId,
        owner: &str,
        lease: TimeDelta,
    ) -> Result<bool, StoreError> {
        self.calls
            .run(async {
                let now = self.draw_clock_ms(&self.pool).await?;
                let claimed = sqlx::query(
                    "UPDATE draws SET lease_owner = $1, lease_until_ms = $2
              WHERE sale_id = $3
                AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until_ms <= $4)",
                )
                .bind(owner)
                .bind(now.saturating_add(lease.num_milliseconds()))
                .bind(sale.as_str())
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(claimed.rows_affected() == 1)
            })
            .await
    }

    /// Lets the lease of `owner` go (another instance may run the draw's
    /// next step at once).
    pub async fn release_draw(&self, sale: &SaleId, owner: &str) -> Result<(), StoreError> {
        self.calls
            .run(async {
                sqlx::query(
                    "UPDATE draws SET lease_owner = NULL, lease_until_ms = NULL
              WHERE sale_id = $1 AND lease_owner = $2",
                )
                .bind(sale.as_str())
                .bind(owner)
                .execute(&self.pool)
                .await?;
                Ok(())
            })
            .await
    }

    /// Locks the draw's row for the transaction and says whether `owner`
    /// holds its lease at the store's clock now.
    pub(super) async fn lock_lease(
        &self,
        tx: &mut Transaction<'_, Any>,
        sale: &SaleId,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let sql = match self.kind {
            StoreKind::Postgres => {
                "SELECT lease_owner, lease_until_ms FROM draws WHERE sale_id = $1 FOR UPDATE"
            }
            StoreKind::Sqlite => {
                "UPDATE draws SET lease_owner = lease_owner WHERE sale_id = $1
                 RETURNING lease_owner, lease_until_ms"
            }
        };
        let Some(row) = sqlx::query(sql)
            .bind(sale.as_str())
            .fetch_optional(&mut **tx)
            .await?
        else {
            return Ok(false);
        };
        let holder: Option<String> = row.try_get("lease_owner")?;
        let until: Option<i64> = row.try_get("lease_until_ms")?;
        let now = self.draw_clock_ms(&mut **tx).await?;
        Ok(holder.as_deref() == Some(owner) && until.is_some_and(|until| now < until))
    }
}
