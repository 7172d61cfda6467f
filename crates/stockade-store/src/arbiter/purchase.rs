//! Purchases decided in the store itself (`--engine postgres`, or a sale
//! moved to the fallback): an unlocked first look, then one transaction
//! that locks the sale row, checks everything again and commits the order.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::Row;
use stockade_core::rule;
use stockade_core::{IdempotencyKey, Order, OrderId, Purchase, PurchaseOutcome, SaleId, UserId};

use super::SaleState;
use super::rows::{Held, read_holdings, read_sales, write_holdings, write_sold};
use crate::bulk::{self, NewRow};
use crate::{OrderStore, StoreError, corrupt};

impl OrderStore {
    /// Decides a purchase in the store itself (the store is the engine for
    /// sales whose authority is [`Authority::Fallback`], and for every sale
    /// with `--engine postgres`): the purchase must carry the sale's epoch.
    /// A purchase that will be refused is answered from an unlocked read
    /// (no lock, no write); one that looks possible locks the sale row,
    /// checks everything again and commits the order, confirmed, before
    /// this returns.
    ///
    /// [`Authority::Fallback`]: crate::authority::Authority::Fallback
    pub async fn purchase(
        &self,
        purchase: &Purchase,
        order_id: OrderId,
        now: DateTime<Utc>,
    ) -> Result<PurchaseOutcome, StoreError> {
        self.call(async {
            let sale = purchase.sale_id();
            // The first look, without a lock.
            let mut conn = self.pool.acquire().await?;
            if let Err(outcome) = look(&mut conn, purchase, now).await? {
                return Ok(outcome);
            }
            drop(conn);
            let mut tx = self.pool.begin().await?;
            self.lock_sales(&mut tx, &[sale]).await?;
            let (mut state, mut held, items) = match look(&mut tx, purchase, now).await? {
                Ok(fits) => fits,
                Err(outcome) => return Ok(outcome),
            };
            let tier = rule::tier(&state.spec, purchase.tier());
            let order = Order::accepted(
                purchase,
                rule::order_items(&state.spec, &items),
                rule::order_tier(&state.spec, tier),
                order_id,
                now,
            )
            .under_hold(state.spec.hold());
            state.take(tier, &items);
            held.add(&state.spec, &items);
            bulk::insert_orders(
                self.kind,
                &mut tx,
                &[NewRow {
                    order: &order,
                    status: order.status.as_str(),
                    expires_at: order.expires_at,
                    keeps_key: true,
                }],
            )
            .await?;
            let holding = HashMap::from([(order.user_id.clone(), held)]);
            write_holdings(&mut tx, sale, &holding).await?;
            write_sold(&mut tx, &state).await?;
            tx.commit().await?;
            crate::order_transitions(sale.as_str(), order.status.as_str(), 1);
            Ok(PurchaseOutcome::Purchased {
                order_id,
                remaining: state.remaining(),
            })
        })
        .await
    }
}

/// Every check of a store purchase, on whatever `conn` sees: the sale, the
/// buyer's holding and the resolved items when the purchase fits, else
/// the refusal.
async fn look(
    conn: &mut sqlx::AnyConnection,
    purchase: &Purchase,
    now: DateTime<Utc>,
) -> Result<Result<(SaleState, Held, rule::Resolved), PurchaseOutcome>, StoreError> {
    let sale = purchase.sale_id();
    let Some(state) = read_sales(conn, &[sale]).await?.remove(sale) else {
        return Ok(Err(PurchaseOutcome::UnknownSale));
    };
    if state.epoch != purchase.epoch() {
        return Ok(Err(PurchaseOutcome::WrongEpoch {
            engine: state.epoch,
        }));
    }
    if let Some(key) = purchase.idempotency_key()
        && let Some(original) = read_key_owner(conn, sale, purchase.user_id(), key).await?
    {
        return Ok(Err(PurchaseOutcome::Duplicate { order_id: original }));
    }
    let items = match rule::resolve(&state.spec, purchase.items()) {
        Ok(items) => items,
        Err(refused) => return Ok(Err(refused)),
    };
    let tier = rule::tier(&state.spec, purchase.tier());
    if let Err(refused) = rule::window(&state.spec, tier, now) {
        return Ok(Err(refused));
    }
    let held = read_holdings(conn, sale, &[purchase.user_id()])
        .await?
        .remove(purchase.user_id())
        .unwrap_or_default();
    let spec = &state.spec;
    let held_of_sku = |i: usize| held.of(&spec.skus()[i].id);
    let judged = rule::limits_and_stock(
        spec,
        now,
        tier,
        held.total,
        held_of_sku,
        &state.counts,
        &items,
    );
    match judged {
        Err(outcome) => Ok(Err(outcome)),
        Ok(()) => Ok(Ok((state, held, items))),
    }
}

impl OrderStore {
    /// The order (committed or void) that `user`'s idempotency `key` names
    /// in `sale`, in one index probe. An engine apart from the store can
    /// lack a key the store has (a failover to a replica without the
    /// write), so a keyed purchase that engine refuses asks here first.
    pub async fn key_owner(
        &self,
        sale: &SaleId,
        user: &UserId,
        key: &IdempotencyKey,
    ) -> Result<Option<OrderId>, StoreError> {
        self.call(async {
            let mut conn = self.pool.acquire().await?;
            read_key_owner(&mut conn, sale, user, key).await
        })
        .await
    }
}

/// The order (committed or void) that the buyer's `key` names in `sale`.
/// By (sale, buyer, key), the unique index's columns, so the lookup is one
/// index probe however many orders the sale has.
async fn read_key_owner(
    conn: &mut sqlx::AnyConnection,
    sale: &SaleId,
    user: &UserId,
    key: &IdempotencyKey,
) -> Result<Option<OrderId>, StoreError> {
    let row = sqlx::query(
        "SELECT id FROM orders WHERE sale_id = $1 AND user_id = $2 AND idempotency_key = $3",
    )
    .bind(sale.as_str())
    .bind(user.as_str())
    .bind(key.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|row| {
        let id: String = row.try_get("id")?;
        id.parse().map_err(|e| corrupt("order id", e))
    })
    .transpose()
}
