//! Cancelling orders, and the releases the engine still owes.
//!
//! A cancel is decided in the store (the truth) in one transaction that
//! marks the order cancelled, gives its items back to the sale's sold count
//! and the buyer's holding, and records a pending release under the sale's
//! epoch. The engine applies the release afterwards, off the request path
//! (the service's release applier); until it has (engine unreachable, process killed),
//! the record stays and is retried, so no cancelled order keeps its stock
//! in the engine.

use chrono::{DateTime, Utc};
use sqlx::{Any, Row, Transaction};
use stockade_core::rule;
use stockade_core::{Epoch, Order, OrderId, SaleId, UserId};

use super::arbiter::{
    IN_CHUNK, placeholders, read_holdings, read_sales, write_holdings, write_sold,
};
use super::authority::Authority;
use super::{OrderStore, StoreError, corrupt, epoch_of};

/// The answer to cancelling an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancel {
    /// Cancelled now.
    Cancelled {
        /// The order, now cancelled.
        order: Order,
        /// The engine must take the items back under this epoch (None when
        /// the store itself decides the sale: nothing is owed).
        release: Option<Epoch>,
    },
    /// It was cancelled (or expired) before: nothing changed.
    AlreadyCancelled(Order),
    /// No such order.
    Unknown,
}

/// A release the engine still owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRelease {
    /// The sale.
    pub sale_id: SaleId,
    /// The cancelled order.
    pub order_id: OrderId,
    /// The sale's epoch when it was cancelled.
    pub epoch: Epoch,
}

impl OrderStore {
    /// Cancels a live order. Cancelling twice changes nothing.
    /// `engine_decides_primary` says whether the primary authority is an
    /// engine apart from the store (memory, Redis), which then owes a
    /// release; with `--engine postgres` it is not.
    pub async fn cancel(
        &self,
        id: OrderId,
        now: DateTime<Utc>,
        engine_decides_primary: bool,
    ) -> Result<Cancel, StoreError> {
        self.calls
            .run(async {
                let Some(order) = self.order(id).await? else {
                    return Ok(Cancel::Unknown);
                };
                let sale = &order.sale_id;
                let mut tx = self.pool.begin().await?;
                self.lock_sales(&mut tx, &[sale]).await?;
                let updated = sqlx::query(
                    "UPDATE orders SET status = 'cancelled', updated_at_ms = $1
              WHERE id = $2 AND status IN ('confirmed', 'held')",
                )
                .bind(now.timestamp_millis())
                .bind(id.to_string())
                .execute(&mut *tx)
                .await?;
                if updated.rows_affected() == 0 {
                    tx.rollback().await?;
                    let order = self.order(id).await?.ok_or_else(|| {
                        StoreError::Failed(format!("order {id} vanished while being cancelled"))
                    })?;
                    return Ok(Cancel::AlreadyCancelled(order));
                }
                let release =
                    give_back(&mut tx, sale, &[&order], now, engine_decides_primary).await?;
                tx.commit().await?;
                crate::order_transitions(sale.as_str(), "cancelled", 1);
                let order = Order {
                    status: stockade_core::OrderStatus::Cancelled,
                    ..order
                };
                Ok(Cancel::Cancelled { order, release })
            })
            .await
    }

    /// Up to `limit` releases the engine owes for `sale`, oldest first (one
    /// indexed read: each sale is served on its own, so a sale with many
    /// stuck releases never hides another's).
    pub async fn pending_releases_of(
        &self,
        sale: &SaleId,
        limit: u32,
    ) -> Result<Vec<PendingRelease>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(
                    "SELECT order_id, sale_id, epoch FROM pending_releases
              WHERE sale_id = $1 ORDER BY created_at_ms LIMIT $2",
                )
                .bind(sale.as_str())
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(release_from_row)
                .collect()
            })
            .await
    }

    /// The sales the engine owes releases for.
    pub async fn sales_owed_releases(&self) -> Result<Vec<SaleId>, StoreError> {
        self.calls
            .run(async {
                sqlx::query("SELECT DISTINCT sale_id FROM pending_releases")
                    .fetch_all(&self.pool)
                    .await?
                    .iter()
                    .map(|row| {
                        let sale: String = row.try_get("sale_id")?;
                        SaleId::new(sale).map_err(|e| corrupt("release", e))
                    })
                    .collect()
            })
            .await
    }

    /// The engine has applied the releases of `orders` (or they became
    /// moot): they are no longer owed.
    pub async fn releases_settled(&self, orders: &[OrderId]) -> Result<(), StoreError> {
        self.calls
            .run(async {
                if orders.is_empty() {
                    return Ok(());
                }
                // One transaction (one sync to disk) for the lot: an expiry or a
                // cancel burst settles a thousand releases at a time.
                let mut tx = self.pool.begin().await?;
                for chunk in orders.chunks(IN_CHUNK) {
                    let sql = format!(
                        "DELETE FROM pending_releases WHERE order_id IN ({})",
                        placeholders(1, chunk.len())
                    );
                    let mut query = sqlx::query(&sql);
                    for order in chunk {
                        query = query.bind(order.to_string());
                    }
                    query.execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            })
            .await
    }
}

fn release_from_row(row: &sqlx::any::AnyRow) -> Result<PendingRelease, StoreError> {
    let order: String = row.try_get("order_id")?;
    let sale: String = row.try_get("sale_id")?;
    let epoch: i64 = row.try_get("epoch")?;
    Ok(PendingRelease {
        sale_id: SaleId::new(sale).map_err(|e| corrupt("release", e))?,
        order_id: order.parse().map_err(|e| corrupt("release", e))?,
        epoch: epoch_of(epoch)?,
    })
}

/// Gives the items of `orders` (all of `sale`, each just moved out of a
/// live status by the caller's transaction, which holds the sale's row
/// lock) back to the sale's sold count and their buyers' holdings, and
/// records the release the engine owes for each, under the sale's epoch.
/// Returns that epoch, or None when the store itself decides the sale
/// (fallback authority, or no engine apart from the store): nothing is
/// owed then. The one way a cancel or an expiry returns stock.
pub(super) async fn give_back(
    tx: &mut Transaction<'_, Any>,
    sale: &SaleId,
    orders: &[&Order],
    now: DateTime<Utc>,
    engine_decides_primary: bool,
) -> Result<Option<Epoch>, StoreError> {
    if orders.is_empty() {
        return Ok(None);
    }
    let mut state = read_sales(tx, &[sale])
        .await?
        .remove(sale)
        .ok_or_else(|| StoreError::Failed(format!("sale {sale} vanished while giving back")))?;
    let users: Vec<&UserId> = orders.iter().map(|order| &order.user_id).collect();
    let mut holdings = read_holdings(tx, sale, &users).await?;
    for order in orders {
        let items = rule::resolve_order(&state.spec, &order.items).ok_or_else(|| {
            corrupt(
                "order",
                format!("{} names a SKU sale {sale} does not have", order.id),
            )
        })?;
        holdings
            .entry(order.user_id.clone())
            .or_default()
            .take_back(&state.spec, &items)
            .ok_or_else(|| {
                corrupt(
                    "holding",
                    format!("{} holds less than order {}", order.user_id, order.id),
                )
            })?;
        let tier = rule::tier(&state.spec, order.tier.as_ref());
        state.give_back(tier, &items).ok_or_else(|| {
            corrupt(
                "sold count",
                format!("sale {sale} sold less than order {}", order.id),
            )
        })?;
    }
    write_sold(tx, &state).await?;
    write_holdings(tx, sale, &holdings).await?;
    let release =
        (state.authority == Authority::Primary && engine_decides_primary).then_some(state.epoch);
    if let Some(epoch) = release {
        // Many rows per statement: an expiry of a thousand holds stays one
        // short transaction (the expiry bound).
        for chunk in orders.chunks(IN_CHUNK / 2) {
            let rows = (0..chunk.len())
                .map(|i| format!("(${}, $1, $2, $3)", i + 4))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO pending_releases (order_id, sale_id, epoch, created_at_ms) VALUES {rows}"
            );
            let mut query = sqlx::query(&sql)
                .bind(sale.as_str())
                .bind(epoch.as_i64())
                .bind(now.timestamp_millis());
            for order in chunk {
                query = query.bind(order.id.to_string());
            }
            query.execute(&mut **tx).await?;
        }
    }
    Ok(release)
}
