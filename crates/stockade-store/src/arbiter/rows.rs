//! The rows the arbiter reads and writes: sales with their epoch, authority
//! and sold count, buyers' holdings, sold counts, and the sales' row locks.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};
use stockade_core::{SaleId, UserId};

use super::SaleState;
use crate::{OrderStore, SALE_COLUMNS, StoreError, StoreKind, corrupt, epoch_of, sale_from_row};

impl OrderStore {
    /// The sale with its epoch, authority and sold count.
    pub async fn sale_state(&self, sale: &SaleId) -> Result<Option<SaleState>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Ok(read_sales(&mut conn, &[sale]).await?.remove(sale))
    }

    /// Every sale with its epoch, authority and sold count; with
    /// `ended_before`, only those whose window had not ended by then (sales
    /// without an end are open): the ones the reconciler looks after.
    pub async fn sale_states(
        &self,
        ended_before: Option<DateTime<Utc>>,
    ) -> Result<Vec<SaleState>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SALE_COLUMNS}, epoch, authority, sold, undrained_epoch FROM sales
              WHERE $1 IS NULL OR ends_at_ms IS NULL OR ends_at_ms > $1 ORDER BY id"
        ))
        .bind(ended_before.map(|t| t.timestamp_millis()))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(sale_state_from_row)
        .collect()
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
            "SELECT {SALE_COLUMNS}, epoch, authority, sold, undrained_epoch FROM sales WHERE id IN ({})",
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
    let undrained: Option<i64> = row.try_get("undrained_epoch")?;
    Ok(SaleState {
        undrained: undrained.map(epoch_of).transpose()?,
        spec: sale_from_row(row)?,
        epoch: epoch_of(epoch)?,
        authority: authority.parse()?,
        sold: u32::try_from(sold).map_err(|e| corrupt("sold count", e))?,
    })
}

pub(crate) async fn read_holdings(
    conn: &mut sqlx::AnyConnection,
    sale: &SaleId,
    users: &[&UserId],
) -> Result<HashMap<UserId, u32>, StoreError> {
    let mut found = HashMap::new();
    for chunk in users.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT user_id, quantity FROM holdings WHERE sale_id = $1 AND user_id IN ({})",
            placeholders(2, chunk.len())
        );
        let mut query = sqlx::query(&sql).bind(sale.as_str());
        for user in chunk {
            query = query.bind(user.as_str());
        }
        for row in query.fetch_all(&mut *conn).await? {
            let user: String = row.try_get("user_id")?;
            let quantity: i64 = row.try_get("quantity")?;
            found.insert(
                UserId::new(user).map_err(|e| corrupt("holding", e))?,
                u32::try_from(quantity).map_err(|e| corrupt("holding", e))?,
            );
        }
    }
    Ok(found)
}

/// Sets buyers' holdings to the given totals (0 deletes the row).
pub(crate) async fn write_holdings(
    tx: &mut Transaction<'_, Any>,
    sale: &SaleId,
    holdings: &HashMap<UserId, u32>,
) -> Result<(), StoreError> {
    let (empty, held): (Vec<_>, Vec<_>) = holdings.iter().partition(|(_, q)| **q == 0);
    for chunk in held.chunks(100) {
        let tuples: Vec<String> = (0..chunk.len())
            .map(|i| format!("($1, {})", placeholders(i * 2 + 2, 2)))
            .collect();
        let sql = format!(
            "INSERT INTO holdings (sale_id, user_id, quantity) VALUES {}
             ON CONFLICT (sale_id, user_id) DO UPDATE SET quantity = excluded.quantity",
            tuples.join(", ")
        );
        let mut query = sqlx::query(&sql).bind(sale.as_str());
        for (user, quantity) in chunk {
            query = query.bind(user.as_str()).bind(i64::from(**quantity));
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

pub(crate) async fn write_sold(
    tx: &mut Transaction<'_, Any>,
    sale: &SaleId,
    sold: u32,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE sales SET sold = $1 WHERE id = $2")
        .bind(i64::from(sold))
        .bind(sale.as_str())
        .execute(&mut **tx)
        .await?;
    Ok(())
}
