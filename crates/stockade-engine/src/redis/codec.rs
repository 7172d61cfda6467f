//! Encoding a sale spec as the string fields the scripts store, and back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::streams::StreamId;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Item, Order, OrderStatus, SaleId, SaleSpec, SkuId, SkuSpec,
    SoldCounts, TierName, TierSpec, UserId,
};

/// The spec as stored: total, limit, starts, ends, hold (ms; '' when
/// unset), skus (`id=stock,...`), per-SKU limit ('' when unset), tiers
/// ([`tiers_field`]), release of the reserves (ms or ''), shards.
pub(super) fn spec_fields(spec: &SaleSpec) -> [String; 10] {
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
        tiers_field(spec.tiers()),
        spec.release_reserved_at()
            .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
        spec.shards().to_string(),
    ]
}

/// Tiers as purchase.lua reads them: per tier `name;limit;starts
/// ms;sku=reserved,...` (empty parts for what is unset), joined by `|`.
fn tiers_field(tiers: &[TierSpec]) -> String {
    tiers
        .iter()
        .map(|tier| {
            format!(
                "{};{};{};{}",
                tier.name,
                tier.per_user_limit
                    .map_or_else(String::new, |l| l.to_string()),
                tier.starts_at
                    .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
                Item::encode_list(&tier.reserved)
            )
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Reads what [`tiers_field`] wrote.
fn tiers_from_field(text: &str) -> Option<Vec<TierSpec>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split('|')
        .map(|tier| {
            let mut parts = tier.splitn(4, ';');
            let name = TierName::new(parts.next()?).ok()?;
            let (limit, starts, reserved) = (parts.next()?, parts.next()?, parts.next()?);
            Some(TierSpec {
                name,
                per_user_limit: if limit.is_empty() {
                    None
                } else {
                    Some(limit.parse().ok()?)
                },
                starts_at: if starts.is_empty() {
                    None
                } else {
                    Some(DateTime::from_timestamp_millis(starts.parse().ok()?)?)
                },
                reserved: if reserved.is_empty() {
                    Vec::new()
                } else {
                    Item::decode_list(reserved).ok()?
                },
            })
        })
        .collect()
}

/// The field of the sale hash that keeps a SKU's stock left, for a sale of
/// several SKUs (a one-SKU sale keeps it in `remaining`).
pub(super) fn sku_stock_field(sku: &SkuId) -> String {
    format!("r:{sku}")
}

/// The sale hash's fields of what is sold, beside `remaining`: for a sale
/// of several SKUs each SKU's stock left (`r:` SKU), for a sale with tiers
/// what each tier's buyers hold of each SKU (`ts:` tier position `:` SKU).
pub(super) fn sold_fields(spec: &SaleSpec, sold: &SoldCounts) -> Vec<(String, u32)> {
    let mut fields = Vec::new();
    if spec.skus().len() > 1 {
        for (sku, left) in spec.skus().iter().zip(sold.left(spec)) {
            fields.push((sku_stock_field(&sku.id), left));
        }
    }
    for (t, counts) in sold.tier_sold.iter().enumerate() {
        for (sku, held) in spec.skus().iter().zip(counts) {
            fields.push((format!("ts:{t}:{}", sku.id), *held));
        }
    }
    fields
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
    // Sales created before SKUs have five fields, before tiers seven,
    // before shards nine.
    let (total, limit, starts, ends, hold) = match fields {
        [total, limit, starts, ends, hold, ..] if [5, 7, 9, 10].contains(&fields.len()) => {
            (total, limit, starts, ends, hold)
        }
        _ => return Err(corrupt("field list")),
    };
    let extra = |n: usize| fields.get(n).map(String::as_str);
    let (skus, sku_limit) = (extra(5), extra(6).unwrap_or(""));
    let (tiers, release) = (extra(7).unwrap_or(""), extra(8).unwrap_or(""));
    let shards = extra(9).unwrap_or("1");
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
    builder = builder.tiers(tiers_from_field(tiers).ok_or_else(|| corrupt("tiers"))?);
    if let Some(at) = instant(release, "release_at")? {
        builder = builder.release_reserved_at(at);
    }
    if let Some(end) = instant(ends, "ends")? {
        builder = builder.ends_at(end);
    }
    if shards != "1" {
        let shards = u16::try_from(number(shards, "shards")?).map_err(|_| corrupt("shards"))?;
        builder = builder.shards(shards).map_err(|_| corrupt("shards"))?;
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
/// \n idempotency key \n items \n tier` (items absent in entries written
/// before SKUs: the whole quantity of the `default` SKU; the tier absent
/// before tiers: none). Entries of the one-order-per-entry layout written
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
        |id: &str, user: &str, quantity: &str, key: &str, rest: [Option<&str>; 2], at: &str| {
            let [items, tier] = rest;
            let created_ms = at;
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
                user_id: UserId::stored(user).map_err(|_| corrupt("user id"))?,
                quantity,
                items,
                tier: match tier {
                    None | Some("") => None,
                    Some(tier) => Some(TierName::new(tier).map_err(|_| corrupt("tier"))?),
                },
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
            [None, None],
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
            let mut parts = value.splitn(5, '\n');
            let (Some(user), Some(quantity), Some(key)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(corrupt("order record"));
            };
            order(id, user, quantity, key, [parts.next(), parts.next()], &at)
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
