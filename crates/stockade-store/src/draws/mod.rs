//! Draw sales in the store: the draw's settings and sealed seed (a nonce
//! and the commitment: the seed also needs the draw key, which the store
//! does not hold; see [`stockade_core::draw::seal`]), saved with the sale; the entries; and the draw's results, written under a
//! lease so that exactly one instance runs a draw (or its roll-down) at a
//! time, and another takes over once an instance that died lets its lease
//! run out.
//!
//! The store only keeps and fences: the draw itself (the order, the
//! winners' purchases, the roll-down) is the service's.

mod enter;
mod freeze;
mod lease;

pub use enter::{EnteredMany, NewEntry};
pub use freeze::Freeze;

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use stockade_core::draw::{DrawConfig, EntryId, EntryResult, Sealed, Seed};
use stockade_core::{Item, OrderId, OrderStatus, SaleId, TierName, UserId};

use super::{OrderStore, StoreError, VOID, corrupt, millis};

/// A draw as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawRecord {
    /// When entries open and close.
    pub config: DrawConfig,
    /// The SHA-256 of the seed, hex: public from the sale's creation.
    pub commitment: String,
    /// The seed, hex: None until the entry set is frozen (then derived
    /// from the draw key and checked against `commitment`); a draw created
    /// before seeds were sealed has had it from its creation.
    seed: Option<String>,
    /// The digest of the frozen entry set (None: not frozen yet).
    pub entry_digest: Option<String>,
    /// When the draw was made (None: not yet).
    pub drawn_at: Option<DateTime<Utc>>,
    /// When the last waitlisted entries were told they lost.
    pub settled_at: Option<DateTime<Utc>>,
}

impl DrawRecord {
    /// The seed, once the draw is made (it is secret before).
    pub fn published_seed(&self) -> Option<&str> {
        self.drawn_at.and(self.seed.as_deref())
    }

    /// The seed, once the entry set is frozen (None before: sealed).
    pub fn seed(&self) -> Result<Option<Seed>, StoreError> {
        self.seed
            .as_deref()
            .map(|hex| Seed::from_hex(hex).map_err(|e| corrupt("draw seed", e)))
            .transpose()
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
    /// What the draw gave it, before any roll-down (None: not drawn yet,
    /// or drawn before this was kept).
    pub drawn_result: Option<EntryResult>,
    /// Its order, when it won one.
    pub order_id: Option<OrderId>,
}

/// What became of the order an entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryOrder {
    /// None (the entry names no order), or one not committed yet.
    Missing,
    /// The store refused it: nothing was sold.
    Void,
    /// A committed order, with its status.
    Is(OrderStatus),
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
    "id, sale_id, user_id, items, tier, created_at_ms, position, result, drawn_result, order_id";

impl OrderStore {
    /// Records a draw sale's settings and sealed seed (its nonce and
    /// commitment: no seed), in the transaction that creates the sale
    /// (`tx`).
    pub(crate) async fn insert_draw(
        tx: &mut Transaction<'_, Any>,
        sale: &SaleId,
        config: &DrawConfig,
        sealed: &Sealed,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO draws (sale_id, entries_open_at_ms, entries_close_at_ms, nonce, commitment)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(sale.as_str())
        .bind(config.open_at.timestamp_millis())
        .bind(config.close_at.timestamp_millis())
        .bind(sealed.nonce.to_hex())
        .bind(&sealed.commitment)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// The draw of `sale`, if it is a draw sale.
    pub async fn draw(&self, sale: &SaleId) -> Result<Option<DrawRecord>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(
            "SELECT entries_open_at_ms, entries_close_at_ms, seed, commitment, entry_digest,
                    drawn_at_ms, settled_at_ms
               FROM draws WHERE sale_id = $1",
        )
        .bind(sale.as_str())
        .fetch_optional(&self.pool)
        .await?
        .map(|row| draw_from_row(&row))
        .transpose()
            })
            .await
    }

    /// The entry of `user` in the draw of `sale`.
    pub async fn entry_of(
        &self,
        sale: &SaleId,
        user: &UserId,
    ) -> Result<Option<Entry>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE sale_id = $1 AND user_id = $2"
                ))
                .bind(sale.as_str())
                .bind(user.as_str())
                .fetch_optional(&self.pool)
                .await?
                .map(|row| entry_from_row(&row))
                .transpose()
            })
            .await
    }

    /// Every entry of the draw of `sale`: in the draw's order once its set
    /// is frozen (then every entry has a position), by id before.
    pub async fn entries(&self, sale: &SaleId) -> Result<Vec<Entry>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM draw_entries WHERE sale_id = $1 ORDER BY position, id"
        ))
        .bind(sale.as_str())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(entry_from_row)
        .collect()
            })
            .await
    }

    /// How many entries the draw of `sale` has.
    pub async fn entry_count(&self, sale: &SaleId) -> Result<u64, StoreError> {
        self.calls
            .run(async {
                let count: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM draw_entries WHERE sale_id = $1")
                        .bind(sale.as_str())
                        .fetch_one(&self.pool)
                        .await?;
                Ok(u64::try_from(count).unwrap_or_default())
            })
            .await
    }

    /// Up to `limit` entries of the frozen set of the draw of `sale`, in
    /// the draw's order, after the place `after` (None: from the first):
    /// one indexed read per page of the published draw.
    pub async fn placed_entries(
        &self,
        sale: &SaleId,
        after: Option<u32>,
        limit: u32,
    ) -> Result<Vec<Entry>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM draw_entries
              WHERE sale_id = $1 AND position > $2 ORDER BY position LIMIT $3"
                ))
                .bind(sale.as_str())
                .bind(after.map_or(-1, i64::from))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(entry_from_row)
                .collect()
            })
            .await
    }

    /// Every entry of the draw of `sale` in the draw's order, with what
    /// became of the order it names: one read for a roll-down pass.
    pub async fn entries_with_orders(
        &self,
        sale: &SaleId,
    ) -> Result<Vec<(Entry, EntryOrder)>, StoreError> {
        self.calls
            .run(async {
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
                    let order = match status.as_deref() {
                        None => EntryOrder::Missing,
                        Some(VOID) => EntryOrder::Void,
                        Some(status) => {
                            EntryOrder::Is(status.parse().map_err(|e| corrupt("order status", e))?)
                        }
                    };
                    Ok((entry_from_row(row)?, order))
                })
                .collect()
            })
            .await
    }

    /// The draw sales with work to do now on the store's clock: entries
    /// closed and no draw made yet, or a draw made and not settled (its
    /// roll-down), each with whether it is drawn.
    pub async fn draws_to_run(&self) -> Result<Vec<(SaleId, bool)>, StoreError> {
        self.calls
            .run(async {
                let now = self.draw_clock_ms(&self.pool).await?;
                sqlx::query(
                    "SELECT sale_id, drawn_at_ms FROM draws
              WHERE (drawn_at_ms IS NULL AND entries_close_at_ms <= $1) OR
                    (drawn_at_ms IS NOT NULL AND settled_at_ms IS NULL)
              ORDER BY sale_id",
                )
                .bind(now)
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| {
                    let id: String = row.try_get("sale_id")?;
                    let drawn: Option<i64> = row.try_get("drawn_at_ms")?;
                    Ok((
                        SaleId::new(id).map_err(|e| corrupt("sale id", e))?,
                        drawn.is_some(),
                    ))
                })
                .collect()
            })
            .await
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
        entry_digest: row.try_get("entry_digest")?,
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
    let drawn_result: Option<String> = row.try_get("drawn_result")?;
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
        drawn_result: drawn_result
            .map(|r| r.parse())
            .transpose()
            .map_err(invalid)?,
        order_id: order
            .map(|o| o.parse().map_err(|e| corrupt("order id", e)))
            .transpose()?,
    })
}
