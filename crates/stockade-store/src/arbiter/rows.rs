//! The rows the arbiter reads and writes: sales with their epoch, authority
//! and sold count, buyers' holdings, sold counts, and the sales' row locks.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use stockade_core::{Item, SaleId, SaleSpec, SkuId, SoldCounts, UserId};

use super::SaleState;
use crate::{OrderStore, SALE_COLUMNS, StoreError, StoreKind, corrupt, epoch_of, sale_from_row};

/// The columns of a sale's state beyond its spec.
pub(crate) const STATE_COLUMNS: &str =
    "epoch, authority, sold, sku_sold, tier_sold, undrained_epoch";

/// What one buyer holds in one sale through live orders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Items in all.
    pub total: u32,
    /// For a sale with a per-SKU limit, the items of each SKU held (SKUs
    /// held only); empty otherwise.
    pub skus: Vec<Item>,
}

impl Held {
    /// Items of `sku` held (0 unless the sale has a per-SKU limit).
    pub fn of(&self, sku: &SkuId) -> u32 {
        self.skus
            .iter()
            .find(|item| item.sku == *sku)
            .map_or(0, |item| item.quantity)
    }

    /// Adds an order's items (resolved against `spec`).
    pub(crate) fn add(&mut self, spec: &SaleSpec, items: &[(usize, u32)]) {
        for &(i, quantity) in items {
            self.total += quantity;
            if spec.per_sku_limit().is_some() {
                let sku = &spec.skus()[i].id;
                match self.skus.iter_mut().find(|item| item.sku == *sku) {
                    Some(item) => item.quantity += quantity,
                    None => self.skus.push(Item {
                        sku: sku.clone(),
                        quantity,
                    }),
                }
            }
        }
    }

    /// Takes an order's items back; None if the buyer holds less.
    pub(crate) fn take_back(&mut self, spec: &SaleSpec, items: &[(usize, u32)]) -> Option<()> {
        for &(i, quantity) in items {
            self.total = self.total.checked_sub(quantity)?;
            if spec.per_sku_limit().is_some() {
                let sku = &spec.skus()[i].id;
                let item = self.skus.iter_mut().find(|item| item.sku == *sku)?;
                item.quantity = item.quantity.checked_sub(quantity)?;
            }
        }
        self.skus.retain(|item| item.quantity > 0);
        Some(())
    }

    /// The `sku_quantities` column: None when no SKU is counted.
    pub(crate) fn sku_column(&self) -> Option<String> {
        (!self.skus.is_empty()).then(|| Item::encode_list(&self.skus))
    }

    /// A holding as its columns keep it.
    pub(crate) fn from_columns(total: i64, skus: Option<String>) -> Result<Self, StoreError> {
        Ok(Self {
            total: u32::try_from(total).map_err(|e| corrupt("holding", e))?,
            skus: skus
                .as_deref()
                .map(Item::decode_list)
                .transpose()
                .map_err(|e| corrupt("holding", e))?
                .unwrap_or_default(),
        })
    }
}

impl OrderStore {
    /// The sale with its epoch, authority and sold count.
    pub async fn sale_state(&self, sale: &SaleId) -> Result<Option<SaleState>, StoreError> {
        self.calls
            .run(async {
                let mut conn = self.pool.acquire().await?;
                Ok(read_sales(&mut conn, &[sale]).await?.remove(sale))
            })
            .await
    }

    /// Every sale with its epoch, authority and sold count; with
    /// `ended_before`, only those whose window had not ended by then (sales
    /// without an end are open): the ones the reconciler looks after.
    pub async fn sale_states(
        &self,
        ended_before: Option<DateTime<Utc>>,
    ) -> Result<Vec<SaleState>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(&format!(
                    "SELECT {SALE_COLUMNS}, {STATE_COLUMNS} FROM sales
              WHERE $1 IS NULL OR ends_at_ms IS NULL OR ends_at_ms > $1 ORDER BY id"
                ))
                .bind(ended_before.map(|t| t.timestamp_millis()))
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(sale_state_from_row)
                .collect()
            })
            .await
    }

    /// Takes the row locks of `sales` until the transaction ends, in id
    /// order. The first statement of every writing transaction, so that on
    /// SQLite the transaction holds the write lock from its start (a read
    /// first would make the upgrade fail under concurrency).
    pub(crate) async fn lock_sales(
        &self,
        tx: &mut Transaction<'_, Any>,
        sales: &[&SaleId],
    ) -> Result<(), StoreError> {
        let list = placeholders(1, sales.len());
        let sql = match self.kind {
            StoreKind::Postgres => {
                format!("SELECT id FROM sales WHERE id IN ({list}) ORDER BY id FOR UPDATE")
            }
            StoreKind::Sqlite => format!("UPDATE sales SET epoch = epoch WHERE id IN ({list})"),
        };
        let mut query = sqlx::query(&sql);
        for sale in sales {
            query = query.bind(sale.as_str());
        }
        query.execute(&mut **tx).await?;
        Ok(())
    }
}

/// `$start, $start+1, …` for `count` parameters.
pub(crate) fn placeholders(start: usize, count: usize) -> String {
    (start..start + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// At most this many ids per `IN (…)` list.
pub(crate) const IN_CHUNK: usize = 500;

pub(crate) async fn read_sales(
    conn: &mut sqlx::AnyConnection,
    sales: &[&SaleId],
) -> Result<HashMap<SaleId, SaleState>, StoreError> {
    let mut found = HashMap::new();
    for chunk in sales.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT {SALE_COLUMNS}, {STATE_COLUMNS} FROM sales WHERE id IN ({})",
            placeholders(1, chunk.len())
        );
        let mut query = sqlx::query(&sql);
        for sale in chunk {
            query = query.bind(sale.as_str());
        }
        for row in query.fetch_all(&mut *conn).await? {
            let state = sale_state_from_row(&row)?;
            found.insert(state.spec.id().clone(), state);
        }
    }
    Ok(found)
}

pub(crate) fn sale_state_from_row(row: &AnyRow) -> Result<SaleState, StoreError> {
    let epoch: i64 = row.try_get("epoch")?;
    let authority: String = row.try_get("authority")?;
    let sold: i64 = row.try_get("sold")?;
    let sku_sold: Option<String> = row.try_get("sku_sold")?;
    let tier_sold: Option<String> = row.try_get("tier_sold")?;
    let undrained: Option<i64> = row.try_get("undrained_epoch")?;
    let spec = sale_from_row(row)?;
    let sold = u32::try_from(sold).map_err(|e| corrupt("sold count", e))?;
    let sku_sold = match sku_sold {
        None if spec.skus().len() == 1 => vec![sold],
        None => {
            return Err(corrupt(
                "sold count",
                format!("sale {} has none per SKU", spec.id()),
            ));
        }
        Some(text) => text
            .split(',')
            .map(|n| n.parse::<u32>())
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|e| corrupt("sold count", e))?,
    };
    if sku_sold.len() != spec.skus().len() || sku_sold.iter().sum::<u32>() != sold {
        return Err(corrupt(
            "sold count",
            format!("sale {} sold {sold} but {sku_sold:?} per SKU", spec.id()),
        ));
    }
    let tier_sold: Vec<Vec<u32>> = match tier_sold {
        None => vec![vec![0; spec.skus().len()]; spec.tiers().len()],
        Some(text) => serde_json::from_str(&text).map_err(|e| corrupt("tier sold counts", e))?,
    };
    if tier_sold.len() != spec.tiers().len()
        || tier_sold
            .iter()
            .any(|counts| counts.len() != spec.skus().len())
    {
        return Err(corrupt(
            "tier sold counts",
            format!("sale {} has {tier_sold:?}", spec.id()),
        ));
    }
    Ok(SaleState {
        undrained: undrained.map(epoch_of).transpose()?,
        epoch: epoch_of(epoch)?,
        authority: authority.parse()?,
        sold,
        counts: SoldCounts {
            sold: sku_sold,
            tier_sold,
        },
        spec,
    })
}

pub(crate) async fn read_holdings(
    conn: &mut sqlx::AnyConnection,
    sale: &SaleId,
    users: &[&UserId],
) -> Result<HashMap<UserId, Held>, StoreError> {
    let mut found = HashMap::new();
    for chunk in users.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT user_id, quantity, sku_quantities FROM holdings
              WHERE sale_id = $1 AND user_id IN ({})",
            placeholders(2, chunk.len())
        );
        let mut query = sqlx::query(&sql).bind(sale.as_str());
        for user in chunk {
            query = query.bind(user.as_str());
        }
        for row in query.fetch_all(&mut *conn).await? {
            let user: String = row.try_get("user_id")?;
            let quantity: i64 = row.try_get("quantity")?;
            let skus: Option<String> = row.try_get("sku_quantities")?;
            found.insert(
                UserId::stored(user).map_err(|e| corrupt("holding", e))?,
                Held::from_columns(quantity, skus)?,
            );
        }
    }
    Ok(found)
}

/// Sets buyers' holdings (nothing held deletes the row).
pub(crate) async fn write_holdings(
    tx: &mut Transaction<'_, Any>,
    sale: &SaleId,
    holdings: &HashMap<UserId, Held>,
) -> Result<(), StoreError> {
    let (empty, held): (Vec<_>, Vec<_>) = holdings.iter().partition(|(_, h)| h.total == 0);
    // Per-SKU holdings only for a sale with a per-SKU limit.
    let per_sku = held.iter().any(|(_, h)| !h.skus.is_empty());
    let width = if per_sku { 3 } else { 2 };
    for chunk in held.chunks(100) {
        let tuples: Vec<String> = (0..chunk.len())
            .map(|i| format!("($1, {})", placeholders(i * width + 2, width)))
            .collect();
        let sql = if per_sku {
            format!(
                "INSERT INTO holdings (sale_id, user_id, quantity, sku_quantities) VALUES {}
                 ON CONFLICT (sale_id, user_id) DO UPDATE
                    SET quantity = excluded.quantity, sku_quantities = excluded.sku_quantities",
                tuples.join(", ")
            )
        } else {
            format!(
                "INSERT INTO holdings (sale_id, user_id, quantity) VALUES {}
                 ON CONFLICT (sale_id, user_id) DO UPDATE SET quantity = excluded.quantity",
                tuples.join(", ")
            )
        };
        let mut query = sqlx::query(&sql).bind(sale.as_str());
        for (user, held) in chunk {
            query = query.bind(user.as_str()).bind(i64::from(held.total));
            if per_sku {
                query = query.bind(held.sku_column());
            }
        }
        query.execute(&mut **tx).await?;
    }
    // Emptied holdings go in chunks too: an expiry of 1,000 holds of one
    // sale is a few statements, not 1,000.
    for chunk in empty.chunks(IN_CHUNK) {
        let sql = format!(
            "DELETE FROM holdings WHERE sale_id = $1 AND user_id IN ({})",
            placeholders(2, chunk.len())
        );
        let mut query = sqlx::query(&sql).bind(sale.as_str());
        for (user, _) in chunk {
            query = query.bind(user.as_str());
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes a sale's sold counts as `state` has them.
pub(crate) async fn write_sold(
    tx: &mut Transaction<'_, Any>,
    state: &SaleState,
) -> Result<(), StoreError> {
    let (sku_sold, tier_sold) = (state.sku_sold_column(), state.tier_sold_column());
    // A sale of one SKU without tiers (most) has only its sold count.
    if sku_sold.is_none() && tier_sold.is_none() {
        sqlx::query("UPDATE sales SET sold = $1 WHERE id = $2")
            .bind(i64::from(state.sold))
            .bind(state.spec.id().as_str())
            .execute(&mut **tx)
            .await?;
        return Ok(());
    }
    sqlx::query("UPDATE sales SET sold = $1, sku_sold = $2, tier_sold = $3 WHERE id = $4")
        .bind(i64::from(state.sold))
        .bind(sku_sold)
        .bind(tier_sold)
        .bind(state.spec.id().as_str())
        .execute(&mut **tx)
        .await?;
    Ok(())
}
