//! Statements that read or write a whole commit batch at once.
//!
//! A batch of 512 orders used to cost a statement per 64 orders, per 100
//! holdings and per sale, and two reads per sale: each one a round trip to
//! PostgreSQL (or to SQLite's worker thread). Here every table is read once
//! and written once per batch, whatever its size and however many sales it
//! touches: the batch travels as one JSON parameter ([`rows`]).
//!
//! # Layout
//!
//! - this module: the statements of a commit;
//! - [`rows`]: the row types, and how a batch is encoded and unpacked.

mod rows;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::{Any, Row, Transaction};
use stockade_core::{IdempotencyKey, Item, Order, OrderId, SaleId, TierName, UserId};

use self::rows::{BulkRow, bulk_row, json_array, json_rows};
use super::arbiter::{Held, STATE_COLUMNS, SaleState, placeholders, sale_state_from_row};
use super::{SALE_COLUMNS, StoreError, StoreKind, VOID, corrupt};

bulk_row! {
    /// A buyer of a sale, as the reads of a batch name them.
    struct Buyer<'a> {
        sale_id: &'a str => Text,
        user_id: &'a str => Text,
    }
}

bulk_row! {
    /// A buyer's idempotency key.
    struct BuyerKey<'a> {
        sale_id: &'a str => Text,
        user_id: &'a str => Text,
        idempotency_key: &'a str => Text,
    }
}

bulk_row! {
    /// An order row as inserted.
    struct OrderValues<'a> {
        id: String => Text,
        sale_id: &'a str => Text,
        user_id: &'a str => Text,
        quantity: u32 => BigInt,
        /// NULL for the whole quantity of the `default` SKU.
        items: Option<String> => Text,
        tier: Option<&'a str> => Text,
        idempotency_key: Option<&'a str> => Text,
        status: &'a str => Text,
        created_at_ms: i64 => BigInt,
        expires_at_ms: Option<i64> => BigInt,
        epoch: i64 => BigInt,
    }
}

bulk_row! {
    /// A buyer's holding.
    struct Holding<'a> {
        sale_id: &'a str => Text,
        user_id: &'a str => Text,
        quantity: u32 => BigInt,
        sku_quantities: Option<String> => Text,
    }
}

bulk_row! {
    /// A sale's sold counts.
    struct Sold<'a> {
        id: &'a str => Text,
        sold: u32 => BigInt,
        sku_sold: Option<String> => Text,
        tier_sold: Option<String> => Text,
    }
}

bulk_row! {
    /// An order id.
    struct Id {
        id: String => Text,
    }
}

/// Runs the write `sql` over `rows`, bound as its one JSON parameter.
async fn write<R: BulkRow>(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    sql: &str,
    rows: impl Iterator<Item = R>,
) -> Result<(), StoreError> {
    let values = json_array(kind, rows)?;
    sqlx::query(sql).bind(values).execute(&mut **tx).await?;
    Ok(())
}

/// Has PostgreSQL plan this transaction's statements against the tables'
/// present size. A sale starts on nearly empty tables and grows them by
/// hundreds of thousands of rows before autovacuum's first ANALYZE; the
/// generic plan a session keeps for a join over a JSON parameter, made on
/// the empty tables, is a sequential scan, so every later commit would read
/// the whole `orders` and `holdings` tables (tests/store/plans.rs). Only
/// here: the store's single-row lookups keep their cached index plans.
pub(super) async fn plan_for_the_tables_as_they_are(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
) -> Result<(), StoreError> {
    if kind == StoreKind::Postgres {
        sqlx::query("SET LOCAL plan_cache_mode = force_custom_plan")
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Locks the rows of `sales` until the transaction ends, in id order, and
/// reads them, in one statement. On SQLite the statement is a write, so the
/// transaction holds the database's write lock from its first statement (a
/// read first would make the upgrade fail under concurrency).
pub(super) async fn lock_and_read_sales(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    sales: &[&SaleId],
) -> Result<HashMap<SaleId, SaleState>, StoreError> {
    let list = placeholders(1, sales.len());
    let columns = format!("{SALE_COLUMNS}, {STATE_COLUMNS}");
    let sql = match kind {
        StoreKind::Postgres => {
            format!("SELECT {columns} FROM sales WHERE id IN ({list}) ORDER BY id FOR UPDATE")
        }
        StoreKind::Sqlite => {
            format!("UPDATE sales SET epoch = epoch WHERE id IN ({list}) RETURNING {columns}")
        }
    };
    let mut query = sqlx::query(&sql);
    for sale in sales {
        query = query.bind(sale.as_str());
    }
    let mut found = HashMap::new();
    for row in query.fetch_all(&mut **tx).await? {
        let state = sale_state_from_row(&row)?;
        found.insert(state.spec.id().clone(), state);
    }
    Ok(found)
}

/// Which of `orders` the store has decided already (true: void).
pub(super) async fn read_existing(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    orders: &[Order],
) -> Result<HashMap<OrderId, bool>, StoreError> {
    let sql = format!(
        "SELECT o.id, o.status FROM orders o JOIN {} ON o.id = r.id",
        json_rows::<Id>(kind)
    );
    let ids = json_array(
        kind,
        orders.iter().map(|order| Id {
            id: order.id.to_string(),
        }),
    )?;
    let mut found = HashMap::new();
    for row in sqlx::query(&sql).bind(ids).fetch_all(&mut **tx).await? {
        let id: String = row.try_get("id")?;
        let status: String = row.try_get("status")?;
        found.insert(
            id.parse().map_err(|e| corrupt("order id", e))?,
            status == VOID,
        );
    }
    Ok(found)
}

/// The holdings of the buyers of `orders`, per sale.
pub(super) async fn read_holdings(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    orders: &[Order],
) -> Result<HashMap<SaleId, HashMap<UserId, Held>>, StoreError> {
    let sql = format!(
        "SELECT h.sale_id, h.user_id, h.quantity, h.sku_quantities FROM holdings h
           JOIN {} ON h.sale_id = r.sale_id AND h.user_id = r.user_id",
        json_rows::<Buyer>(kind)
    );
    let buyers = json_array(
        kind,
        orders.iter().map(|o| Buyer {
            sale_id: o.sale_id.as_str(),
            user_id: o.user_id.as_str(),
        }),
    )?;
    let mut found: HashMap<SaleId, HashMap<UserId, Held>> = HashMap::new();
    for row in sqlx::query(&sql).bind(buyers).fetch_all(&mut **tx).await? {
        let sale: String = row.try_get("sale_id")?;
        let user: String = row.try_get("user_id")?;
        let quantity: i64 = row.try_get("quantity")?;
        let skus: Option<String> = row.try_get("sku_quantities")?;
        found
            .entry(SaleId::new(sale).map_err(|e| corrupt("holding", e))?)
            .or_default()
            .insert(
                UserId::stored(user).map_err(|e| corrupt("holding", e))?,
                Held::from_columns(quantity, skus)?,
            );
    }
    Ok(found)
}

/// The orders (committed or void) that the buyers' idempotency keys in
/// `orders` name already, per sale, by (buyer, key).
pub(super) async fn read_key_owners(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    orders: &[Order],
) -> Result<HashMap<SaleId, HashMap<(UserId, IdempotencyKey), OrderId>>, StoreError> {
    let mut found: HashMap<SaleId, HashMap<(UserId, IdempotencyKey), OrderId>> = HashMap::new();
    if orders.iter().all(|o| o.idempotency_key.is_none()) {
        return Ok(found);
    }
    let keys = json_array(
        kind,
        orders.iter().filter_map(|o| {
            Some(BuyerKey {
                sale_id: o.sale_id.as_str(),
                user_id: o.user_id.as_str(),
                idempotency_key: o.idempotency_key.as_ref()?.as_str(),
            })
        }),
    )?;
    let sql = format!(
        "SELECT o.id, o.sale_id, o.user_id, o.idempotency_key FROM orders o
           JOIN {} ON o.sale_id = r.sale_id AND o.user_id = r.user_id
                  AND o.idempotency_key = r.idempotency_key",
        json_rows::<BuyerKey>(kind)
    );
    for row in sqlx::query(&sql).bind(keys).fetch_all(&mut **tx).await? {
        let id: String = row.try_get("id")?;
        let sale: String = row.try_get("sale_id")?;
        let user: String = row.try_get("user_id")?;
        let key: String = row.try_get("idempotency_key")?;
        found
            .entry(SaleId::new(sale).map_err(|e| corrupt("order", e))?)
            .or_default()
            .insert(
                (
                    UserId::stored(user).map_err(|e| corrupt("order", e))?,
                    IdempotencyKey::new(key).map_err(|e| corrupt("order", e))?,
                ),
                id.parse().map_err(|e| corrupt("order id", e))?,
            );
    }
    Ok(found)
}

/// An order to insert, with the status the arbiter gave it.
pub(super) struct NewRow<'a> {
    pub(super) order: &'a Order,
    pub(super) status: &'static str,
    /// A held order's deadline.
    pub(super) expires_at: Option<DateTime<Utc>>,
    /// False for an order voided because its key names another order.
    pub(super) keeps_key: bool,
}

/// An order's `items` column: NULL for the whole quantity of the
/// `default` SKU (a sale created with `stock` alone, as orders from before
/// SKUs read), the item list otherwise.
fn stored_items(order: &Order) -> Option<String> {
    match &order.items[..] {
        [only] if only.sku.as_str() == stockade_core::sku::DEFAULT_SKU => None,
        items => Some(Item::encode_list(items)),
    }
}

/// Inserts every row in one statement.
pub(super) async fn insert_orders(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    rows: &[NewRow<'_>],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    // Items and tiers are read only when some order of the batch has them:
    // most batches are of sales created with `stock` alone.
    let plain = rows
        .iter()
        .all(|row| row.order.tier.is_none() && stored_items(row.order).is_none());
    let (extra, selected) = if plain {
        ("", "")
    } else {
        ("items, tier, ", "r.items, r.tier, ")
    };
    let sql = format!(
        "INSERT INTO orders (id, sale_id, user_id, quantity, {extra}idempotency_key,
                             status, created_at_ms, updated_at_ms, expires_at_ms, epoch)
         SELECT r.id, r.sale_id, r.user_id, r.quantity, {selected}r.idempotency_key,
                r.status, r.created_at_ms, r.created_at_ms, r.expires_at_ms, r.epoch
           FROM {}",
        json_rows::<OrderValues>(kind)
    );
    write(
        kind,
        tx,
        &sql,
        rows.iter().map(|row| {
            let order = row.order;
            OrderValues {
                id: order.id.to_string(),
                sale_id: order.sale_id.as_str(),
                user_id: order.user_id.as_str(),
                quantity: order.quantity,
                items: if plain { None } else { stored_items(order) },
                tier: order.tier.as_ref().map(TierName::as_str),
                idempotency_key: order
                    .idempotency_key
                    .as_ref()
                    .filter(|_| row.keeps_key)
                    .map(IdempotencyKey::as_str),
                status: row.status,
                created_at_ms: order.created_at.timestamp_millis(),
                expires_at_ms: row.expires_at.map(|t| t.timestamp_millis()),
                epoch: order.epoch.as_i64(),
            }
        }),
    )
    .await
}

/// Sets buyers' holdings (each above zero: a commit only adds), for every
/// sale, in one statement.
pub(super) async fn upsert_holdings(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    holdings: &[(&SaleId, &UserId, &Held)],
) -> Result<(), StoreError> {
    if holdings.is_empty() {
        return Ok(());
    }
    // `WHERE true` tells SQLite's parser that `ON CONFLICT` is the upsert,
    // not a join constraint.
    // Per-SKU holdings only for sales with a per-SKU limit.
    let sql = if holdings.iter().any(|(_, _, held)| !held.skus.is_empty()) {
        format!(
            "INSERT INTO holdings (sale_id, user_id, quantity, sku_quantities)
             SELECT r.sale_id, r.user_id, r.quantity, r.sku_quantities FROM {} WHERE true
             ON CONFLICT (sale_id, user_id) DO UPDATE
                SET quantity = excluded.quantity, sku_quantities = excluded.sku_quantities",
            json_rows::<Holding>(kind)
        )
    } else {
        format!(
            "INSERT INTO holdings (sale_id, user_id, quantity)
             SELECT r.sale_id, r.user_id, r.quantity FROM {} WHERE true
             ON CONFLICT (sale_id, user_id) DO UPDATE SET quantity = excluded.quantity",
            json_rows::<Holding>(kind)
        )
    };
    write(
        kind,
        tx,
        &sql,
        holdings.iter().map(|(sale, user, held)| Holding {
            sale_id: sale.as_str(),
            user_id: user.as_str(),
            quantity: held.total,
            sku_quantities: held.sku_column(),
        }),
    )
    .await
}

/// Sets the sold counts of the sales as their states have them, in one
/// statement.
pub(super) async fn write_sold_counts(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    sold: &[&SaleState],
) -> Result<(), StoreError> {
    if sold.is_empty() {
        return Ok(());
    }
    // Sales of one SKU without tiers (most) have only their sold count.
    let counts = sold
        .iter()
        .any(|s| s.sku_sold_column().is_some() || s.tier_sold_column().is_some());
    let sql = if counts {
        format!(
            "UPDATE sales SET sold = r.sold, sku_sold = r.sku_sold, tier_sold = r.tier_sold
               FROM {} WHERE sales.id = r.id",
            json_rows::<Sold>(kind)
        )
    } else {
        format!(
            "UPDATE sales SET sold = r.sold FROM {} WHERE sales.id = r.id",
            json_rows::<Sold>(kind)
        )
    };
    write(
        kind,
        tx,
        &sql,
        sold.iter().map(|state| Sold {
            id: state.spec.id().as_str(),
            sold: state.sold,
            sku_sold: state.sku_sold_column(),
            tier_sold: state.tier_sold_column(),
        }),
    )
    .await
}
