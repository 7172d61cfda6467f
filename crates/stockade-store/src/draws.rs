//! Draw sales in the store: the draw's settings and secret seed, saved
//! with the sale; the entries; and the draw's results, written under a
//! lease so that exactly one instance runs a draw (or its roll-down) at a
//! time, and another takes over once an instance that died lets its lease
//! run out.
//!
//! The store only keeps and fences: the draw itself (the order, the
//! winners' purchases, the roll-down) is the service's.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use stockade_core::draw::{DrawConfig, EntryId, EntryResult, Seed};
use stockade_core::{Item, OrderId, OrderStatus, SaleId, TierName, UserId};

use super::{OrderStore, StoreError, StoreKind, VOID, corrupt, millis};

/// A draw as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawRecord {
    /// When entries open and close.
    pub config: DrawConfig,
    /// The SHA-256 of the seed, hex: public from the sale's creation.
    pub commitment: String,
    seed: String,
    /// When the draw was made (None: not yet).
    pub drawn_at: Option<DateTime<Utc>>,
    /// When the last waitlisted entries were told they lost.
    pub settled_at: Option<DateTime<Utc>>,
}

impl DrawRecord {
    /// The seed, once the draw is made (it is secret before).
    pub fn published_seed(&self) -> Option<&str> {
        self.drawn_at.map(|_| self.seed.as_str())
    }

    /// The seed, for the instance making the draw.
    pub fn seed(&self) -> Result<Seed, StoreError> {
        Seed::from_hex(&self.seed).map_err(|e| corrupt("draw seed", e))
    }
}

/// One entry of a draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's random id.
    pub id: EntryId,
    /// The sale.
    pub sale_id: SaleId,
    /// The buyer.
    pub user_id: UserId,
    /// What the buyer would buy.
    pub items: Vec<Item>,
    /// The buyer's tier when they entered.
    pub tier: Option<TierName>,
    /// When they entered.
    pub created_at: DateTime<Utc>,
    /// Its place in the draw's order (0 first), once drawn.
    pub position: Option<u32>,
    /// Where it stands.
    pub result: EntryResult,
    /// Its order, when it won one.
    pub order_id: Option<OrderId>,
}

/// The answer to an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entered {
    /// A new entry.
    New(Entry),
    /// The buyer had entered already: their entry, unchanged.
    Again(Entry),
    /// Entries have not opened yet.
    NotOpen(DateTime<Utc>),
    /// Entries have closed.
    Closed(DateTime<Utc>),
    /// The sale is sold to whoever is fastest, not drawn.
    NotADraw,
}

/// What a draw's run writes for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryUpdate {
    /// The entry.
    pub id: EntryId,
    /// Its new result.
    pub result: EntryResult,
    /// Its order, when it won.
    pub order_id: Option<OrderId>,
}

const ENTRY_COLUMNS: &str =
    "id, sale_id, user_id, items, tier, created_at_ms, position, result, order_id";

impl OrderStore {
    /// Records a draw sale's settings and seed, in the transaction that
    /// creates the sale (`tx`).
    pub(crate) async fn insert_draw(
        tx: &mut Transaction<'_, Any>,
        sale: &SaleId,
        config: &DrawConfig,
        seed: &Seed,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO draws (sale_id, entries_open_at_ms, entries_close_at_ms, seed, commitment)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(sale.as_str())
        .bind(config.open_at.timestamp_millis())
        .bind(config.close_at.timestamp_millis())
        .bind(seed.to_hex())
        .bind(seed.commitment())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// The draw of `sale`, if it is a draw sale.
    pub async fn draw(&self, sale: &SaleId) -> Result<Option<DrawRecord>, StoreError> {
        sqlx::query(
            "SELECT entries_open_at_ms, entries_close_at_ms, seed, commitment, drawn_at_ms,
                    settled_at_ms
               FROM draws WHERE sale_id = $1",
        )
        .bind(sale.as_str())
        .fetch_optional(&self.pool)
        .await?
        .map(|row| draw_from_row(&row))
        .transpose()
    }

    /// Enters `user` in the draw of `sale` at `now` (the caller's clock),
    /// once: a second entry of the same buyer answers the first.
    pub async fn enter_draw(
        &self,
        sale: &SaleId,
        user: &UserId,
        items: &[Item],
        tier: Option<&TierName>,
        now: DateTime<Utc>,
    ) -> Result<Entered, StoreError> {
        let Some(draw) = self.draw(sale).await? else {
            return Ok(Entered::NotADraw);
        };
        if let Some(existing) = self.entry_of(sale, user).await? {
            return Ok(Entered::Again(existing));
        }
        if now < draw.config.open_at {
            return Ok(Entered::NotOpen(draw.config.open_at));
        }
        if now >= draw.config.close_at {
            return Ok(Entered::Closed(draw.config.close_at));
        }
        let entry = Entry {
            id: EntryId::random(),
            sale_id: sale.clone(),
            user_id: user.clone(),
            items: items.to_vec(),
            tier: tier.cloned(),
            created_at: millis(now.timestamp_millis())?,
            position: None,
            result: EntryResult::Entered,
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
        .bind(now.timestamp_millis())
        .bind(EntryResult::Entered.as_str())
        .execute(&self.pool)
        .await?;
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

    /// The entry of `user` in the draw of `sale`.
    pub async fn entry_of(
        &self,
        sale: &SaleId,
        user: &UserId,
    ) -> Result<Option<Entry>, StoreError> {
        sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE sale_id = $1 AND user_id = $2"
        ))
        .bind(sale.as_str())
        .bind(user.as_str())
        .fetch_optional(&self.pool)
        .await?
        .map(|row| entry_from_row(&row))
        .transpose()
    }

    /// Every entry of the draw of `sale`: in the draw's order once drawn,
    /// by id before.
    pub async fn entries(&self, sale: &SaleId) -> Result<Vec<Entry>, StoreError> {
        sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE sale_id = $1 ORDER BY position, id"
        ))
        .bind(sale.as_str())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(entry_from_row)
        .collect()
    }

    /// Every entry of the draw of `sale` in the draw's order, with the
    /// status of the order it won (None: no order, or one not committed
    /// yet): one read for a roll-down pass.
    pub async fn entries_with_orders(
        &self,
        sale: &SaleId,
    ) -> Result<Vec<(Entry, Option<OrderStatus>)>, StoreError> {
        let columns = ENTRY_COLUMNS
            .split(", ")
            .map(|c| format!("e.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        sqlx::query(&format!(
            "SELECT {columns}, o.status AS order_status
               FROM draw_entries e LEFT JOIN orders o ON o.id = e.order_id
              WHERE e.sale_id = $1 ORDER BY e.position, e.id"
        ))
        .bind(sale.as_str())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            let status: Option<String> = row.try_get("order_status")?;
            let status = match status.as_deref() {
                None | Some(VOID) => None,
                Some(status) => Some(status.parse().map_err(|e| corrupt("order status", e))?),
            };
            Ok((entry_from_row(row)?, status))
        })
        .collect()
    }

    /// The draw sales with work to do at `now`: entries closed and no draw
    /// made yet, or a draw made and not settled (its roll-down).
    pub async fn draws_to_run(&self, now: DateTime<Utc>) -> Result<Vec<SaleId>, StoreError> {
        sqlx::query(
            "SELECT sale_id FROM draws
              WHERE (drawn_at_ms IS NULL AND entries_close_at_ms <= $1) OR
                    (drawn_at_ms IS NOT NULL AND settled_at_ms IS NULL)
              ORDER BY sale_id",
        )
        .bind(now.timestamp_millis())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            let id: String = row.try_get("sale_id")?;
            SaleId::new(id).map_err(|e| corrupt("sale id", e))
        })
        .collect()
    }

    /// Takes the lease of the draw of `sale` for `owner` until `until`, if
    /// nobody else holds it at `now` (the caller's clock; an owner renews
    /// its own). True if `owner` holds it now.
    pub async fn claim_draw(
        &self,
        sale: &SaleId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let claimed = sqlx::query(
            "UPDATE draws SET lease_owner = $1, lease_until_ms = $2
              WHERE sale_id = $3
                AND (lease_owner IS NULL OR lease_owner = $1 OR lease_until_ms <= $4)",
        )
        .bind(owner)
        .bind(until.timestamp_millis())
        .bind(sale.as_str())
        .bind(now.timestamp_millis())
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Lets the lease of `owner` go (another instance may run the draw's
    /// next step at once).
    pub async fn release_draw(&self, sale: &SaleId, owner: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE draws SET lease_owner = NULL, lease_until_ms = NULL
              WHERE sale_id = $1 AND lease_owner = $2",
        )
        .bind(sale.as_str())
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Writes a run of the draw of `sale`, if `owner` still holds its
    /// lease: the entries' places (`positions`, when the draw is made now,
    /// with `drawn_at`), their results, and `settled_at` when the run
    /// settled the draw. All or nothing; false (nothing written) if the
    /// lease passed to another instance.
    pub async fn record_draw(
        &self,
        sale: &SaleId,
        owner: &str,
        positions: &[(EntryId, u32)],
        drawn_at: Option<DateTime<Utc>>,
        updates: &[EntryUpdate],
        settled_at: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        if !self.lock_lease(&mut tx, sale, owner).await? {
            return Ok(false);
        }
        for (id, position) in positions {
            sqlx::query("UPDATE draw_entries SET position = $1 WHERE id = $2 AND sale_id = $3")
                .bind(i64::from(*position))
                .bind(id.as_str())
                .bind(sale.as_str())
                .execute(&mut *tx)
                .await?;
        }
        for update in updates {
            sqlx::query(
                "UPDATE draw_entries SET result = $1, order_id = $2 WHERE id = $3 AND sale_id = $4",
            )
            .bind(update.result.as_str())
            .bind(update.order_id.map(|id| id.to_string()))
            .bind(update.id.as_str())
            .bind(sale.as_str())
            .execute(&mut *tx)
            .await?;
        }
        if let Some(at) = drawn_at {
            sqlx::query(
                "UPDATE draws SET drawn_at_ms = $1 WHERE sale_id = $2 AND drawn_at_ms IS NULL",
            )
            .bind(at.timestamp_millis())
            .bind(sale.as_str())
            .execute(&mut *tx)
            .await?;
        }
        if let Some(at) = settled_at {
            sqlx::query("UPDATE draws SET settled_at_ms = $1 WHERE sale_id = $2")
                .bind(at.timestamp_millis())
                .bind(sale.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Locks the draw's row for the transaction and says whether `owner`
    /// holds its lease.
    async fn lock_lease(
        &self,
        tx: &mut Transaction<'_, Any>,
        sale: &SaleId,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let sql = match self.kind {
            StoreKind::Postgres => "SELECT lease_owner FROM draws WHERE sale_id = $1 FOR UPDATE",
            StoreKind::Sqlite => {
                "UPDATE draws SET lease_owner = lease_owner WHERE sale_id = $1 RETURNING lease_owner"
            }
        };
        let row = sqlx::query(sql)
            .bind(sale.as_str())
            .fetch_optional(&mut **tx)
            .await?;
        let holder: Option<String> = match row {
            Some(row) => row.try_get("lease_owner")?,
            None => None,
        };
        Ok(holder.as_deref() == Some(owner))
    }
}

fn draw_from_row(row: &AnyRow) -> Result<DrawRecord, StoreError> {
    let open: i64 = row.try_get("entries_open_at_ms")?;
    let close: i64 = row.try_get("entries_close_at_ms")?;
    let drawn: Option<i64> = row.try_get("drawn_at_ms")?;
    let settled: Option<i64> = row.try_get("settled_at_ms")?;
    Ok(DrawRecord {
        config: DrawConfig::new(millis(open)?, millis(close)?).map_err(|e| corrupt("draw", e))?,
        commitment: row.try_get("commitment")?,
        seed: row.try_get("seed")?,
        drawn_at: drawn.map(millis).transpose()?,
        settled_at: settled.map(millis).transpose()?,
    })
}

fn entry_from_row(row: &AnyRow) -> Result<Entry, StoreError> {
    let id: String = row.try_get("id")?;
    let sale: String = row.try_get("sale_id")?;
    let user: String = row.try_get("user_id")?;
    let items: String = row.try_get("items")?;
    let tier: Option<String> = row.try_get("tier")?;
    let created: i64 = row.try_get("created_at_ms")?;
    let position: Option<i64> = row.try_get("position")?;
    let result: String = row.try_get("result")?;
    let order: Option<String> = row.try_get("order_id")?;
    let invalid = |e: stockade_core::ValidationError| corrupt("draw entry", e);
    Ok(Entry {
        id: id.parse().map_err(invalid)?,
        sale_id: SaleId::new(sale).map_err(invalid)?,
        user_id: UserId::stored(user).map_err(invalid)?,
        items: Item::decode_list(&items).map_err(invalid)?,
        tier: tier.map(TierName::new).transpose().map_err(invalid)?,
        created_at: millis(created)?,
        position: position
            .map(|p| u32::try_from(p).map_err(|e| corrupt("entry position", e)))
            .transpose()?,
        result: result.parse().map_err(invalid)?,
        order_id: order
            .map(|o| o.parse().map_err(|e| corrupt("order id", e)))
            .transpose()?,
    })
}
