//! A sale's waiting room, saved in the transaction that creates the sale
//! (so no instance ever sees the sale without it) and never changed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;
use stockade_core::{SaleId, SaleSpec};

use super::{OrderStore, SALE_COLUMNS, SaveSale, StoreError, corrupt, insert_sale, sale_from_row};
use stockade_core::RoomConfig;
use stockade_core::draw::{DrawConfig, Sealed};

impl OrderStore {
    /// Records a sale with its waiting room (or none), unless a sale with
    /// that id exists. Also answers the existing sale's waiting room, so
    /// the caller can tell an identical request from a conflicting one.
    ///
    /// A draw sale's settings and sealed seed (`draw`: its nonce and
    /// commitment, never the seed) are saved in the same transaction; an existing sale's draw is answered as its room
    /// is.
    pub async fn save_sale_with_room(
        &self,
        spec: &SaleSpec,
        room: Option<&RoomConfig>,
        draw: Option<(&DrawConfig, &Sealed)>,
        now: DateTime<Utc>,
    ) -> Result<(SaveSale, Option<RoomConfig>, Option<DrawConfig>), StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                if insert_sale(&mut *tx, spec, now).await? {
                    if let Some((config, sealed)) = draw {
                        Self::insert_draw(&mut tx, spec.id(), config, sealed).await?;
                    }
                    if let Some(room) = room {
                        sqlx::query(
                            "INSERT INTO waiting_rooms
                         (sale_id, admit_per_second, admission_ttl_ms, admission_factor_milli)
                     VALUES ($1, $2, $3, $4)",
                        )
                        .bind(spec.id().as_str())
                        .bind(i64::from(room.admit_per_second))
                        .bind(room.admission_ttl.as_millis() as i64)
                        .bind(i64::from(room.admission_factor_milli))
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    return Ok((
                        SaveSale::Created,
                        room.copied(),
                        draw.map(|(config, _)| *config),
                    ));
                }
                tx.rollback().await?;
                let (existing, existing_room, _) = self
                    .sale_with_room(spec.id())
                    .await?
                    .ok_or_else(|| StoreError::Failed(format!("sale {} vanished", spec.id())))?;
                let saved = if existing == *spec {
                    SaveSale::Exists
                } else {
                    SaveSale::Conflict(Box::new(existing))
                };
                let existing_draw = self.draw(spec.id()).await?.map(|draw| draw.config);
                Ok((saved, existing_room, existing_draw))
            })
            .await
    }

    /// The sales with a waiting room that have not ended at `now`: the
    /// rooms the tickers serve, whatever Redis remembers of them.
    pub async fn open_rooms(&self, now: DateTime<Utc>) -> Result<Vec<SaleId>, StoreError> {
        self.calls
            .run(async {
                let rows = sqlx::query(
                    "SELECT s.id FROM sales s JOIN waiting_rooms w ON w.sale_id = s.id
              WHERE s.ends_at_ms IS NULL OR s.ends_at_ms > $1
              ORDER BY s.id",
                )
                .bind(now.timestamp_millis())
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let id: String = row.try_get("id")?;
                        SaleId::new(id).map_err(|e| corrupt("sale id", e))
                    })
                    .collect()
            })
            .await
    }

    /// A sale, its waiting room, and whether it is a draw sale, in one
    /// read.
    pub async fn sale_with_room(
        &self,
        id: &SaleId,
    ) -> Result<Option<(SaleSpec, Option<RoomConfig>, bool)>, StoreError> {
        self.calls
            .run(async {
                let columns = SALE_COLUMNS
                    .split(", ")
                    .map(|c| format!("s.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let Some(row) = sqlx::query(&format!(
            "SELECT {columns}, w.admit_per_second, w.admission_ttl_ms, w.admission_factor_milli,
                    d.sale_id AS draw_sale
               FROM sales s LEFT JOIN waiting_rooms w ON w.sale_id = s.id
                            LEFT JOIN draws d ON d.sale_id = s.id
              WHERE s.id = $1"
        ))
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?
                else {
                    return Ok(None);
                };
                let spec = sale_from_row(&row)?;
                let rate: Option<i64> = row.try_get("admit_per_second")?;
                let ttl: Option<i64> = row.try_get("admission_ttl_ms")?;
                let factor: Option<i64> = row.try_get("admission_factor_milli")?;
                let room = match (rate, ttl, factor) {
                    (Some(rate), Some(ttl), Some(factor)) => Some(
                        RoomConfig::new(
                            u32::try_from(rate).map_err(|e| corrupt("admission rate", e))?,
                            Duration::from_millis(
                                u64::try_from(ttl).map_err(|e| corrupt("admission ttl", e))?,
                            ),
                            u32::try_from(factor).map_err(|e| corrupt("admission factor", e))?,
                        )
                        .map_err(|e| corrupt("waiting room", e))?,
                    ),
                    _ => None,
                };
                let draw: Option<String> = row.try_get("draw_sale")?;
                Ok(Some((spec, room, draw.is_some())))
            })
            .await
    }
}
