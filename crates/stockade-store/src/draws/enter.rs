//! Entering a draw: the entry is inserted only while the draw's window is
//! open on the store's clock and its entry set is not frozen, judged under
//! a lock of the draw's row that the freeze takes exclusively, so no entry
//! slips in after the draw read the set.

use sqlx::Row;
use stockade_core::draw::{EntryId, EntryResult};
use stockade_core::{Item, SaleId, TierName, UserId};

use super::super::{OrderStore, StoreError, StoreKind, millis};
use super::{ENTRY_COLUMNS, Entered, Entry, entry_from_row};

impl OrderStore {
    /// Enters `user` in the draw of `sale`, once: a second entry of the
    /// same buyer answers the first. The window is judged on the store's
    /// clock, which also dates the entry.
    pub async fn enter_draw(
        &self,
        sale: &SaleId,
        user: &UserId,
        items: &[Item],
        tier: Option<&TierName>,
    ) -> Result<Entered, StoreError> {
        let mut tx = self.pool.begin().await?;
        // Shared with other entries, exclusive with the freeze
        // (`lock_lease`); SQLite has one writer anyway.
        let lock = match self.kind {
            StoreKind::Postgres => {
                "SELECT entries_open_at_ms, entries_close_at_ms, frozen_at_ms
                   FROM draws WHERE sale_id = $1 FOR SHARE"
            }
            StoreKind::Sqlite => {
                "UPDATE draws SET sale_id = sale_id WHERE sale_id = $1
                 RETURNING entries_open_at_ms, entries_close_at_ms, frozen_at_ms"
            }
        };
        let Some(draw) = sqlx::query(lock)
            .bind(sale.as_str())
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(Entered::NotADraw);
        };
        let open: i64 = draw.try_get("entries_open_at_ms")?;
        let close: i64 = draw.try_get("entries_close_at_ms")?;
        let frozen: Option<i64> = draw.try_get("frozen_at_ms")?;
        let existing = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE sale_id = $1 AND user_id = $2"
        ))
        .bind(sale.as_str())
        .bind(user.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            return Ok(Entered::Again(entry_from_row(&row)?));
        }
        let now = self.draw_clock_ms(&mut *tx).await?;
        if frozen.is_some() || now >= close {
            return Ok(Entered::Closed(millis(close)?));
        }
        if now < open {
            return Ok(Entered::NotOpen(millis(open)?));
        }
        let entry = Entry {
            id: EntryId::random(),
            sale_id: sale.clone(),
            user_id: user.clone(),
            items: items.to_vec(),
            tier: tier.cloned(),
            created_at: millis(now)?,
            position: None,
            result: EntryResult::Entered,
            drawn_result: None,
            order_id: None,
        };
        let inserted = sqlx::query(
            "INSERT INTO draw_entries (id, sale_id, user_id, items, tier, created_at_ms, result)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (sale_id, user_id) DO NOTHING",
        )
        .bind(entry.id.as_str())
        .bind(sale.as_str())
        .bind(user.as_str())
        .bind(Item::encode_list(items))
        .bind(tier.map(TierName::as_str))
        .bind(now)
        .bind(EntryResult::Entered.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        if inserted.rows_affected() == 1 {
            return Ok(Entered::New(entry));
        }
        // The same buyer entered at the same moment elsewhere.
        let existing = self
            .entry_of(sale, user)
            .await?
            .ok_or_else(|| StoreError::Failed(format!("the entry of {user} vanished")))?;
        Ok(Entered::Again(existing))
    }
}
