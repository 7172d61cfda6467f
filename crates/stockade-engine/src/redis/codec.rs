//! Encoding a sale spec as the string fields the scripts store, and back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::streams::StreamId;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Order, OrderId, OrderStatus, SaleId, SaleSpec, UserId,
};

/// The spec as stored: total, limit, starts, ends, hold (ms; '' when unset).
pub(super) fn spec_fields(spec: &SaleSpec) -> [String; 5] {
    [
        spec.total_stock().to_string(),
        spec.per_user_limit().to_string(),
        spec.starts_at()
            .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
        spec.ends_at()
            .map_or_else(String::new, |t| t.timestamp_millis().to_string()),
        spec.hold()
            .map_or_else(String::new, |d| d.as_millis().to_string()),
    ]
}

/// Rebuilds a spec from stored fields, failing loudly on anything a script
/// did not write.
pub(super) fn spec_from_fields(id: &SaleId, fields: &[String]) -> Result<SaleSpec, EngineError> {
    let corrupt = |what: &str| {
        EngineError::backend(format!(
            "sale {id} in Redis has a malformed {what} field: {fields:?}"
        ))
    };
    let [total, limit, starts, ends, hold] = fields else {
        return Err(corrupt("field list"));
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
    let mut builder = SaleSpec::builder(id.as_str(), total)
        .and_then(|b| b.per_user_limit(limit))
        .map_err(|_| corrupt("total or limit"))?;
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
    builder.build().map_err(|_| corrupt("window"))
}

/// The field of the keys hash that holds a buyer's idempotency key (keys
/// are scoped to their buyer; user ids contain no control characters).
pub(super) fn key_field(user: &UserId, key: &IdempotencyKey) -> String {
    format!("{user}\n{key}")
}

/// Reads an order back from its outbox stream entry (see purchase.lua).
pub(super) fn order_from_entry(sale: &SaleId, entry: &StreamId) -> Result<Order, EngineError> {
    let corrupt = |what: &str| {
        EngineError::backend(format!(
            "outbox entry {} of sale {sale} has a malformed {what}",
            entry.id
        ))
    };
    let text = |field: &str| -> Result<String, EngineError> {
        entry.get::<String>(field).ok_or_else(|| corrupt(field))
    };
    let id: OrderId = text("order_id")?.parse().map_err(|_| corrupt("order_id"))?;
    let user_id = UserId::new(text("user_id")?).map_err(|_| corrupt("user_id"))?;
    let quantity: u32 = text("quantity")?.parse().map_err(|_| corrupt("quantity"))?;
    let key = text("idempotency_key")?;
    let idempotency_key = if key.is_empty() {
        None
    } else {
        Some(IdempotencyKey::new(key).map_err(|_| corrupt("idempotency_key"))?)
    };
    let created_ms: i64 = text("created_at_ms")?
        .parse()
        .map_err(|_| corrupt("created_at_ms"))?;
    let created_at =
        DateTime::from_timestamp_millis(created_ms).ok_or_else(|| corrupt("created_at_ms"))?;
    let epoch: u64 = text("epoch")?.parse().map_err(|_| corrupt("epoch"))?;
    Ok(Order {
        id,
        sale_id: sale.clone(),
        user_id,
        quantity,
        idempotency_key,
        // Payment holds are not implemented yet.
        status: OrderStatus::Confirmed,
        created_at,
        epoch: Epoch::new(epoch),
    })
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
