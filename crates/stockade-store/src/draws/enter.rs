//! Entering a draw: the entry is inserted only while the draw's window is
//! open on the store's clock and its entry set is not frozen, judged under
//! a lock of the draw's row that the freeze takes exclusively, so no entry
//! slips in after the draw read the set.

use sqlx::{Any, Row, Transaction};
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
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                let Some(window) = self.lock_entries(&mut tx, sale).await? else {
                    return Ok(Entered::NotADraw);
                };
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
                if let Some(refused) = window.refuses_at(now)? {
                    return Ok(refused);
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
            })
            .await
    }

    /// Locks the draw's row for an entry (shared with other entries on
    /// PostgreSQL, exclusive with the freeze, `lock_lease`; SQLite has one
    /// writer anyway) and reads its entry window. None: not a draw sale.
    async fn lock_entries(
        &self,
        tx: &mut Transaction<'_, Any>,
        sale: &SaleId,
    ) -> Result<Option<EntryWindow>, StoreError> {
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
            .fetch_optional(&mut **tx)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(EntryWindow {
            open: draw.try_get("entries_open_at_ms")?,
            close: draw.try_get("entries_close_at_ms")?,
            frozen: draw.try_get::<Option<i64>, _>("frozen_at_ms")?.is_some(),
        }))
    }

    /// Enters many buyers in the draw of `sale` in one transaction, as
    /// [`OrderStore::enter_draw`] enters one (the same window on the
    /// store's clock, under the same lock; a buyer who entered before
    /// keeps that entry): for loading a large draw at once, as its
    /// benchmark does. The entries are taken as they are: the API checks
    /// an entry against the sale, this does not.
    pub async fn enter_draw_many(
        &self,
        sale: &SaleId,
        entries: &[NewEntry],
    ) -> Result<EnteredMany, StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                let Some(window) = self.lock_entries(&mut tx, sale).await? else {
                    return Ok(EnteredMany::Refused(Entered::NotADraw));
                };
                let now = self.draw_clock_ms(&mut *tx).await?;
                if let Some(refused) = window.refuses_at(now)? {
                    return Ok(EnteredMany::Refused(refused));
                }
                let mut new = 0;
                for chunk in entries.chunks(INSERT_CHUNK) {
                    let values = (0..chunk.len())
                        .map(|i| {
                            let at = 4 * i + 4;
                            format!("(${at}, $1, ${}, ${}, ${}, $2, $3)", at + 1, at + 2, at + 3)
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    let sql = format!(
                "INSERT INTO draw_entries (id, sale_id, user_id, items, tier, created_at_ms, result)
                 VALUES {values} ON CONFLICT (sale_id, user_id) DO NOTHING"
            );
                    let mut query = sqlx::query(&sql)
                        .bind(sale.as_str())
                        .bind(now)
                        .bind(EntryResult::Entered.as_str());
                    for entry in chunk {
                        query = query
                            .bind(EntryId::random().as_str().to_owned())
                            .bind(entry.user_id.as_str())
                            .bind(Item::encode_list(&entry.items))
                            .bind(entry.tier.as_ref().map(TierName::as_str));
                    }
                    new += query.execute(&mut *tx).await?.rows_affected();
                }
                tx.commit().await?;
                Ok(EnteredMany::New(new))
            })
            .await
    }
}

/// A draw's entry window, as an entry reads it under the draw's lock.
struct EntryWindow {
    open: i64,
    close: i64,
    frozen: bool,
}

impl EntryWindow {
    /// Why an entry at `now` (store clock, ms) is refused, if it is.
    fn refuses_at(&self, now: i64) -> Result<Option<Entered>, StoreError> {
        Ok(if self.frozen || now >= self.close {
            Some(Entered::Closed(millis(self.close)?))
        } else if now < self.open {
            Some(Entered::NotOpen(millis(self.open)?))
        } else {
            None
        })
    }
}

/// One buyer's entry, for [`OrderStore::enter_draw_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// The buyer.
    pub user_id: UserId,
    /// What they would buy.
    pub items: Vec<Item>,
    /// Their tier.
    pub tier: Option<TierName>,
}

/// What entering many buyers came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnteredMany {
    /// This many new entries (buyers who had entered keep their entry).
    New(u64),
    /// None: not open, closed, or not a draw sale.
    Refused(Entered),
}

/// Entries per insert statement (four values each besides the three
/// shared, within SQLite's and PostgreSQL's limits on parameters).
const INSERT_CHUNK: usize = 1_000;
