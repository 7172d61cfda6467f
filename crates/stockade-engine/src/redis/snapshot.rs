//! A sale's snapshot from its sale hash, read in one HGETALL: the spec
//! (sales created before SKUs or tiers included) and each SKU's stock.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use stockade_core::{EngineError, SaleId, SaleSnapshot};

use super::codec;

/// The snapshot of `sale` from its sale hash's `fields` at `now`; None for
/// a sale Redis does not have.
pub(super) fn from_hash(
    sale: &SaleId,
    fields: &HashMap<String, String>,
    now: DateTime<Utc>,
) -> Result<Option<SaleSnapshot>, EngineError> {
    if !fields.contains_key("total") {
        return Ok(None);
    }
    let corrupt = |what: &str| {
        EngineError::backend(format!("sale {sale} in Redis has no valid {what} field"))
    };
    let mut spec_fields = Vec::with_capacity(10);
    for name in [
        "total",
        "limit",
        "starts",
        "ends",
        "hold",
        "skus",
        "sku_limit",
        "tiers",
        "release_at",
        "shards",
    ] {
        match fields.get(name) {
            Some(value) => spec_fields.push(value.clone()),
            // A sale created before SKUs has none of the last five, one
            // created before tiers none of the last three, one created
            // before shards not the last.
            None if matches!(spec_fields.len(), 5 | 7 | 9) => break,
            None => return Err(corrupt(name)),
        }
    }
    let spec = codec::spec_from_fields(sale, &spec_fields)?;
    let count = |name: &str| -> Result<u32, EngineError> {
        fields
            .get(name)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| corrupt(name))
    };
    let left = if spec.skus().len() == 1 {
        vec![count("remaining")?]
    } else {
        spec.skus()
            .iter()
            .map(|sku| count(&codec::sku_stock_field(&sku.id)))
            .collect::<Result<Vec<u32>, _>>()?
    };
    Ok(Some(SaleSnapshot::at(spec, &left, now)))
}
