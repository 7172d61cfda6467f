//! Payment holds: confirming a held order, and expiring the ones whose
//! hold ran out unpaid.
//!
//! An order of a sale with `hold_seconds` is committed as `held` with its
//! `expires_at` (see [`Order::under_hold`]). Both ways out of `held` are
//! decided here, in the store, each in one transaction that holds the
//! sale's row lock and moves the order only if it is still `held` (and,
//! for a confirm, still before its deadline): so a payment racing the
//! expiry has exactly one winner, on every engine and with any number of
//! instances. An expiry gives the items back the way a cancel does
//! (`super::releases::give_back`): to the sold count and the buyer's
//! holding in the same transaction, and to the engine through a pending
//! release that survives crashes.
//!
//! Due holds are found through the partial index `orders_holds_by_deadline`
//! (live holds by deadline), so the sweeper's look costs one index range
//! scan whatever the size of the store.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use sqlx::Row;
use stockade_core::{Epoch, Order, OrderId, OrderStatus, SaleId};

use super::arbiter::placeholders;
use super::releases::give_back;
use super::{ORDER_COLUMNS, OrderStore, StoreError, corrupt, order_from_row};

/// The answer to confirming an order (the payment arrived).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// It was held and is confirmed now.
    Confirmed(Order),
    /// It was confirmed already (before, or at once: a sale without a
    /// hold). Nothing changed.
    AlreadyConfirmed(Order),
    /// Its hold ran out first: it is expired and its items went back.
    HoldExpired {
        /// The expired order.
        order: Order,
        /// Set when this confirm found the hold due and expired it itself:
        /// the engine owes the release under this epoch.
        release: Option<Epoch>,
    },
    /// It was cancelled. Nothing changed.
    Cancelled(Order),
    /// No such committed order.
    Unknown,
}

/// Holds this call expired, of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The orders, now `expired`.
    pub orders: Vec<Order>,
    /// The epoch the engine owes their releases under (None: nothing owed,
    /// the store decides the sale itself).
    pub release: Option<Epoch>,
}

impl OrderStore {
    /// Confirms a held order before its deadline (`now` < `expires_at`).
    /// A held order found past its deadline is expired on the spot, so the
    /// answer and the order's state agree at once.
    pub async fn confirm(
        &self,
        id: OrderId,
        now: DateTime<Utc>,
        engine_decides_primary: bool,
    ) -> Result<Confirm, StoreError> {
        self.calls
            .run(async {
                let Some(order) = self.order(id).await? else {
                    return Ok(Confirm::Unknown);
                };
                if order.status == OrderStatus::Held {
                    let mut tx = self.pool.begin().await?;
                    self.lock_sales(&mut tx, &[&order.sale_id]).await?;
                    let updated = sqlx::query(
                        "UPDATE orders SET status = 'confirmed', updated_at_ms = $1
                  WHERE id = $2 AND status = 'held' AND expires_at_ms > $1",
                    )
                    .bind(now.timestamp_millis())
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    if updated.rows_affected() == 1 {
                        crate::order_transitions(order.sale_id.as_str(), "confirmed", 1);
                        return Ok(Confirm::Confirmed(Order {
                            status: OrderStatus::Confirmed,
                            ..order
                        }));
                    }
                    // Past its deadline (or moved on by someone else meanwhile).
                    let expired = self
                        .expire_holds(&order.sale_id, &[id], now, engine_decides_primary)
                        .await?;
                    if !expired.orders.is_empty() {
                        return Ok(Confirm::HoldExpired {
                            order: Order {
                                status: OrderStatus::Expired,
                                ..order
                            },
                            release: expired.release,
                        });
                    }
                }
                let order = self.order(id).await?.ok_or_else(|| {
                    StoreError::Failed(format!("order {id} vanished while confirmed"))
                })?;
                Ok(match order.status {
                    OrderStatus::Confirmed => Confirm::AlreadyConfirmed(order),
                    OrderStatus::Expired => Confirm::HoldExpired {
                        order,
                        release: None,
                    },
                    OrderStatus::Cancelled => Confirm::Cancelled(order),
                    OrderStatus::Held => {
                        return Err(StoreError::Failed(format!(
                            "order {id} is still held after its confirm was decided"
                        )));
                    }
                })
            })
            .await
    }

    /// Up to `limit` live holds whose deadline is at or before `now`,
    /// earliest deadline first, as (sale, order) pairs.
    pub async fn due_holds(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(SaleId, OrderId)>, StoreError> {
        self.calls
            .run(async {
                sqlx::query(
                    "SELECT sale_id, id FROM orders
              WHERE status = 'held' AND expires_at_ms <= $1
              ORDER BY expires_at_ms LIMIT $2",
                )
                .bind(now.timestamp_millis())
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| {
                    let sale: String = row.try_get("sale_id")?;
                    let id: String = row.try_get("id")?;
                    Ok((
                        SaleId::new(sale).map_err(|e| corrupt("hold", e))?,
                        OrderId::from_str(&id).map_err(|e| corrupt("hold", e))?,
                    ))
                })
                .collect()
            })
            .await
    }

    /// Expires those of `ids` (orders of `sale`) that are still held and
    /// due at `now`, giving their items back; the others are left alone,
    /// so several instances sweeping the same holds expire each once.
    pub async fn expire_holds(
        &self,
        sale: &SaleId,
        ids: &[OrderId],
        now: DateTime<Utc>,
        engine_decides_primary: bool,
    ) -> Result<Expired, StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                self.lock_sales(&mut tx, &[sale]).await?;
                let mut orders = Vec::new();
                for chunk in ids.chunks(500) {
                    let sql = format!(
                        "UPDATE orders SET status = 'expired', updated_at_ms = $1
                  WHERE sale_id = $2 AND status = 'held' AND expires_at_ms <= $1
                    AND id IN ({})
                  RETURNING {ORDER_COLUMNS}",
                        placeholders(3, chunk.len())
                    );
                    let mut query = sqlx::query(&sql)
                        .bind(now.timestamp_millis())
                        .bind(sale.as_str());
                    for id in chunk {
                        query = query.bind(id.to_string());
                    }
                    for row in query.fetch_all(&mut *tx).await? {
                        orders.push(order_from_row(&row)?);
                    }
                }
                let returned: Vec<&Order> = orders.iter().collect();
                let release =
                    give_back(&mut tx, sale, &returned, now, engine_decides_primary).await?;
                tx.commit().await?;
                for order in &orders {
                    if let Some(deadline) = order.expires_at {
                        let late = (now - deadline).to_std().unwrap_or_default();
                        metrics::histogram!("stockade_hold_expiry_lateness_seconds")
                            .record(late.as_secs_f64());
                    }
                }
                crate::order_transitions(sale.as_str(), "expired", orders.len());
                Ok(Expired { orders, release })
            })
            .await
    }
}
