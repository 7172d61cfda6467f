//! Reading sales and orders from their rows: the spec (SKUs and tiers
//! included, and sales and orders written before them), the order with
//! its items and tier.

use std::str::FromStr;
use std::time::Duration;

use sqlx::Row;
use sqlx::any::AnyRow;
use stockade_core::{
    IdempotencyKey, Item, Order, OrderId, OrderStatus, SaleId, SaleSpec, SkuId, SkuSpec, TierName,
    UserId, ValidationError,
};

use super::{StoreError, corrupt, epoch_of, millis};

/// A sale's spec from its row (the sale columns).
pub(crate) fn sale_from_row(row: &AnyRow) -> Result<SaleSpec, StoreError> {
    let id: String = row.try_get("id")?;
    let total: i64 = row.try_get("total_stock")?;
    let limit: i64 = row.try_get("per_user_limit")?;
    let starts: Option<i64> = row.try_get("starts_at_ms")?;
    let ends: Option<i64> = row.try_get("ends_at_ms")?;
    let hold: Option<i64> = row.try_get("hold_ms")?;
    let skus: Option<String> = row.try_get("skus")?;
    let sku_limit: Option<i64> = row.try_get("per_sku_limit")?;
    let tiers: Option<String> = row.try_get("tiers")?;
    let release: Option<i64> = row.try_get("release_reserved_at_ms")?;
    let shards: i64 = row.try_get("shards")?;
    let invalid = |e: ValidationError| corrupt("sale", e);
    let total = u32::try_from(total).map_err(|e| corrupt("stock", e))?;
    let mut builder = match skus {
        // A sale created before SKUs.
        None => SaleSpec::builder(id, total),
        Some(skus) => SaleSpec::with_skus(id, SkuSpec::decode_list(&skus).map_err(invalid)?),
    }
    .map_err(invalid)?
    .per_user_limit(u32::try_from(limit).map_err(|e| corrupt("limit", e))?)
    .map_err(invalid)?;
    if let Some(cap) = sku_limit {
        builder = builder
            .per_sku_limit(u32::try_from(cap).map_err(|e| corrupt("per-SKU limit", e))?)
            .map_err(invalid)?;
    }
    if let Some(ms) = starts {
        builder = builder.starts_at(millis(ms)?);
    }
    if let Some(tiers) = tiers {
        builder = builder.tiers(serde_json::from_str(&tiers).map_err(|e| corrupt("tiers", e))?);
    }
    if let Some(ms) = release {
        builder = builder.release_reserved_at(millis(ms)?);
    }
    if let Some(ms) = ends {
        builder = builder.ends_at(millis(ms)?);
    }
    if shards != 1 {
        builder = builder
            .shards(u16::try_from(shards).map_err(|e| corrupt("shards", e))?)
            .map_err(invalid)?;
    }
    if let Some(ms) = hold {
        builder = builder
            .hold(Duration::from_millis(
                u64::try_from(ms).map_err(|e| corrupt("hold", e))?,
            ))
            .map_err(invalid)?;
    }
    let spec = builder.build().map_err(invalid)?;
    if spec.total_stock() != total {
        return Err(corrupt(
            "stock",
            format!("sale {} totals {total}", spec.id()),
        ));
    }
    Ok(spec)
}

/// An order from its row (the order columns).
pub(crate) fn order_from_row(row: &AnyRow) -> Result<Order, StoreError> {
    let status: String = row.try_get("status")?;
    let status = OrderStatus::from_str(&status).map_err(|e| corrupt("order", e))?;
    order_from_row_as(row, status)
}

/// An order row, with the status given.
pub(crate) fn order_from_row_as(row: &AnyRow, status: OrderStatus) -> Result<Order, StoreError> {
    let id: String = row.try_get("id")?;
    let sale: String = row.try_get("sale_id")?;
    let user: String = row.try_get("user_id")?;
    let quantity: i64 = row.try_get("quantity")?;
    let quantity = u32::try_from(quantity).map_err(|e| corrupt("quantity", e))?;
    let items: Option<String> = row.try_get("items")?;
    let tier: Option<String> = row.try_get("tier")?;
    let key: Option<String> = row.try_get("idempotency_key")?;
    let created: i64 = row.try_get("created_at_ms")?;
    let expires: Option<i64> = row.try_get("expires_at_ms")?;
    let epoch: i64 = row.try_get("epoch")?;
    let invalid = |e: ValidationError| corrupt("order", e);
    Ok(Order {
        id: OrderId::from_str(&id).map_err(invalid)?,
        sale_id: SaleId::new(sale).map_err(invalid)?,
        user_id: UserId::stored(user).map_err(invalid)?,
        quantity,
        items: match items {
            Some(items) => Item::decode_list(&items).map_err(invalid)?,
            // An order from before SKUs.
            None => vec![Item {
                sku: SkuId::default_sku(),
                quantity,
            }],
        },
        tier: tier.map(TierName::new).transpose().map_err(invalid)?,
        idempotency_key: key.map(IdempotencyKey::new).transpose().map_err(invalid)?,
        status,
        created_at: millis(created)?,
        expires_at: expires.map(millis).transpose()?,
        epoch: epoch_of(epoch)?,
    })
}
