//! Encoding a sale spec as the string fields the scripts store, and back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::streams::StreamId;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Item, Order, OrderStatus, SaleId, SaleSpec, SkuId, SkuSpec,
    UserId,
};

/// The spec as stored: total, limit, starts, ends, hold (ms; '' when
/// unset), skus (`id=stock,...`), per-SKU limit ('' when unset).
pub(super) fn spec_fields(spec: &SaleSpec) -> [String; 7] {
    [
        spec.total_stock().to_string(),
        spec.per_user_limit().to_string(),
        spec.starts_at()
            .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
        spec.ends_at()
            .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
        spec.hold()
            .map_or_else(String::new, |d| d.as_millis().to_string()),
        SkuSpec::encode_list(spec.skus()),
        spec.per_sku_limit()
            .map_or_else(String::new, |limit| limit.to_string()),
    ]
}

/// The field of the sale hash that keeps a SKU's stock left, for a sale of
/// several SKUs (a one-SKU sale keeps it in `remaining`).
pub(super) fn sku_stock_field(sku: &SkuId) -> String {
    format!("r:{sku}")
}

/// For a sale of several SKUs, each SKU's stock field and its stock left
/// (in the spec's order); nothing for a one-SKU sale.
pub(super) fn sku_stock_fields(spec: &SaleSpec, left: &[u32]) -> Vec<(String, u32)> {
    if spec.skus().len() == 1 {
        return Vec::new();
    }
    spec.skus()
        .iter()
        .zip(left)
        .map(|(sku, left)| (sku_stock_field(&sku.id), *left))
        .collect()
}

/// Rebuilds a spec from stored fields (as [`spec_fields`] lists them; the
/// last two absent for a sale created before SKUs), failing loudly on
/// anything a script did not write.
pub(super) fn spec_from_fields(id: &SaleId, fields: &[String]) -> Result<SaleSpec, EngineError> {
    let corrupt = |what: &str| {
        EngineError::backend(format!(
            "sale {id} in Redis has a malformed {what} field: {fields:?}"
        ))
    };
    let (total, limit, starts, ends, hold, skus, sku_limit) = match fields {
        [total, limit, starts, ends, hold] => (total, limit, starts, ends, hold, None, ""),
        [total, limit, starts, ends, hold, skus, sku_limit] => (
            total,
            limit,
            starts,
            ends,
            hold,
            Some(skus),
            sku_limit.as_str(),
        ),
        _ => return Err(corrupt("field list")),
    };
    let number = |text: &str, what: &str| text.parse::<i64>().map_err(|_| corrupt(what));
    let instant = |text: &str, what: &str| -> Result<Option<DateTime<Utc>>, EngineError> {
        if text.is_empty() {
            return Ok(None);
        }
        DateTime::from_timestamp_millis(number(text, what)?)
            .map(Some)
            .ok_or_else(|| corrupt(what))
    };
    let total = u32::try_from(number(total, "total")?).map_err(|_| corrupt("total"))?;
    let limit = u32::try_from(number(limit, "limit")?).map_err(|_| corrupt("limit"))?;
    let mut builder = match skus {
        None => SaleSpec::builder(id.as_str(), total),
        Some(skus) => {
            SkuSpec::decode_list(skus).and_then(|skus| SaleSpec::with_skus(id.as_str(), skus))
        }
    }
    .and_then(|b| b.per_user_limit(limit))
    .map_err(|_| corrupt("total, skus or limit"))?;
    if !sku_limit.is_empty() {
        let cap =
            u32::try_from(number(sku_limit, "sku_limit")?).map_err(|_| corrupt("sku_limit"))?;
        builder = builder
            .per_sku_limit(cap)
            .map_err(|_| corrupt("sku_limit"))?;
    }
    if let Some(start) = instant(starts, "starts")? {
        builder = builder.starts_at(start);
    }
    if let Some(end) = instant(ends, "ends")? {
        builder = builder.ends_at(end);
    }
    if !hold.is_empty() {
        let millis = u64::try_from(number(hold, "hold")?).map_err(|_| corrupt("hold"))?;
        builder = builder
            .hold(Duration::from_millis(millis))
            .map_err(|_| corrupt("hold"))?;
    }
    let spec = builder.build().map_err(|_| corrupt("window"))?;
    if spec.total_stock() != total {
        return Err(corrupt("total"));
    }
    Ok(spec)
}

/// The field of the keys hash that holds a buyer's idempotency key (keys
/// are scoped to their buyer; user ids contain no control characters).
pub(super) fn key_field(user: &UserId, key: &IdempotencyKey) -> String {
    format!("{user}\n{key}")
}

/// Reads the orders of one outbox stream entry, oldest first.
///
/// An entry is written by purchase.lua for a whole batch: `epoch`, `at`
/// (ms), and one field per accepted order, order id → `user id \n quantity
/// \n idempotency key \n items` (items absent in entries written before
/// SKUs: the whole quantity of the `default` SKU). Entries of the one-order-per-entry layout written
/// before batching (`order_id`, `user_id`, `quantity`, `idempotency_key`,
/// `created_at_ms`, `epoch`) are still read, so an upgrade never strands an
/// order in the outbox.
pub(super) fn orders_from_entry(
    sale: &SaleId,
    entry: &StreamId,
) -> Result<Vec<Order>, EngineError> {
    let corrupt = |what: &str| {
        EngineError::backend(format!(
            "outbox entry {} of sale {sale} has a malformed {what}",
            entry.id
        ))
    };
    let text = |field: &str| -> Result<String, EngineError> {
        entry.get::<String>(field).ok_or_else(|| corrupt(field))
    };
    let epoch = Epoch::new(text("epoch")?.parse().map_err(|_| corrupt("epoch"))?);
    let order =
        |id: &str, user: &str, quantity: &str, key: &str, items: Option<&str>, created_ms: &str| {
            let created_ms: i64 = created_ms.parse().map_err(|_| corrupt("creation time"))?;
            let quantity: u32 = quantity.parse().map_err(|_| corrupt("quantity"))?;
            let items = match items {
                Some(items) => Item::decode_list(items).map_err(|_| corrupt("item list"))?,
                None => vec![Item {
                    sku: SkuId::default_sku(),
                    quantity,
                }],
            };
            Ok(Order {
                id: id.parse().map_err(|_| corrupt("order id"))?,
                sale_id: sale.clone(),
                user_id: UserId::new(user).map_err(|_| corrupt("user id"))?,
                quantity,
                items,
                idempotency_key: if key.is_empty() {
                    None
                } else {
                    Some(IdempotencyKey::new(key).map_err(|_| corrupt("idempotency key"))?)
                },
                // The store gives it the sale's payment hold when it commits it.
                status: OrderStatus::Confirmed,
                created_at: DateTime::from_timestamp_millis(created_ms)
                    .ok_or_else(|| corrupt("creation time"))?,
                expires_at: None,
                epoch,
            })
        };
    if entry.map.contains_key("order_id") {
        return Ok(vec![order(
            &text("order_id")?,
            &text("user_id")?,
            &text("quantity")?,
            &text("idempotency_key")?,
            None,
            &text("created_at_ms")?,
        )?]);
    }
    let at = text("at")?;
    let mut orders = entry
        .map
        .keys()
        .filter(|field| !matches!(field.as_str(), "epoch" | "at"))
        .map(|id| {
            let value = text(id)?;
            let mut parts = value.splitn(4, '\n');
            let (Some(user), Some(quantity), Some(key)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(corrupt("order record"));
            };
            order(id, user, quantity, key, parts.next(), &at)
        })
        .collect::<Result<Vec<Order>, EngineError>>()?;
    // Order ids are time-ordered (UUIDv7, made as each request arrived).
    orders.sort_by_key(|order| order.id);
    Ok(orders)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_through_fields() {
        let start = DateTime::from_timestamp_millis(1_700_000_000_123).unwrap();
        let spec = SaleSpec::builder("s", 10)
            .unwrap()
            .per_user_limit(3)
            .unwrap()
            .starts_at(start)
            .ends_at(start + chrono::TimeDelta::hours(1))
            .hold(Duration::from_secs(90))
            .unwrap()
            .build()
            .unwrap();
        let fields = spec_fields(&spec);
        assert_eq!(spec_from_fields(spec.id(), &fields).unwrap(), spec);
        let plain = SaleSpec::builder("s", 1).unwrap().build().unwrap();
        assert_eq!(
            spec_from_fields(plain.id(), &spec_fields(&plain)).unwrap(),
            plain
        );
    }

    #[test]
    fn corrupt_fields_are_errors() {
        let id = SaleId::new("s").unwrap();
        let fields: Vec<String> = ["x", "1", "", "", ""].map(String::from).into();
        assert!(spec_from_fields(&id, &fields).is_err());
    }
}
