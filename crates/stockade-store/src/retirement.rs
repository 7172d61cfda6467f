//! What the retirement of ended sales needs from the store: which sales
//! ended in a window of time, and dropping the releases an engine that
//! forgot the sale can no longer take.

use chrono::{DateTime, Utc};
use sqlx::Row;
use stockade_core::SaleId;

use super::{OrderStore, StoreError, corrupt};

impl OrderStore {
    /// The sales whose window ended in `(after, until]`, with their end.
    pub async fn ended_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<(SaleId, DateTime<Utc>)>, StoreError> {
        self.calls
            .run(async {
                let rows = sqlx::query(
                    "SELECT id, ends_at_ms FROM sales
              WHERE ends_at_ms > $1 AND ends_at_ms <= $2 ORDER BY ends_at_ms",
                )
                .bind(after.timestamp_millis())
                .bind(until.timestamp_millis())
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let id: String = row.try_get("id")?;
                        let ends: i64 = row.try_get("ends_at_ms")?;
                        Ok((
                            SaleId::new(id).map_err(|e| corrupt("sale id", e.reason))?,
                            DateTime::from_timestamp_millis(ends)
                                .ok_or_else(|| corrupt("sale end", ends))?,
                        ))
                    })
                    .collect()
            })
            .await
    }

    /// Drops the releases owed to the engine for `sale`: the engine has
    /// forgotten the ended sale, and nothing is sold out of its window.
    pub async fn drop_pending_releases(&self, sale: &SaleId) -> Result<(), StoreError> {
        self.calls
            .run(async {
                sqlx::query("DELETE FROM pending_releases WHERE sale_id = $1")
                    .bind(sale.as_str())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            })
            .await
    }
}
