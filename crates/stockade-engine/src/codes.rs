//! The numeric answers of the server-side steps: the Redis scripts
//! (`lua/purchase.lua`, `lua/release_many.lua`) share one numbering,
//! decoded here once.

use stockade_core::{EngineError, Epoch, OrderId, PurchaseOutcome, ReleaseOutcome, SkuId};

/// A count the backend returned, which must fit a `u32`.
pub(crate) fn count(value: i64, what: &str, source: &str) -> Result<u32, EngineError> {
    u32::try_from(value)
        .map_err(|_| EngineError::backend(format!("{source} returned {value} for {what}")))
}

/// An epoch the backend returned (never negative).
pub(crate) fn epoch(value: i64, source: &str) -> Result<Epoch, EngineError> {
    Epoch::from_i64(value)
        .ok_or_else(|| EngineError::backend(format!("{source} returned the epoch {value}")))
}

/// The value that comes with a purchase code: a number, or text (an order
/// id, a SKU, or `sku=count`).
pub(crate) enum Value {
    /// A count or an epoch.
    Number(i64),
    /// An order id, a SKU or `sku=count`.
    Text(String),
}

/// Purchase codes: 1 purchased (`value` = remaining), 2 sold out,
/// 3 insufficient stock (`sku=remaining`), 4 limit exceeded (`value` =
/// already held), 5 duplicate (the first order's id), 6 not started,
/// 7 ended, 8 unknown sale, 9 wrong epoch (`value` = the epoch the engine
/// holds), 10 unknown SKU (the SKU), 11 SKU required, 12 per-SKU limit
/// exceeded (`sku=already held`).
pub(crate) fn purchase(
    code: i64,
    value: Value,
    new_order: OrderId,
    source: &str,
) -> Result<PurchaseOutcome, EngineError> {
    let malformed = || EngineError::backend(format!("{source} gave code {code} a malformed value"));
    let number = |value: &Value| match value {
        Value::Number(n) => Ok(*n),
        Value::Text(_) => Err(malformed()),
    };
    let text = |value: &Value| match value {
        Value::Text(text) => Ok(text.clone()),
        Value::Number(n) => Ok(n.to_string()),
    };
    // `sku=count`, as scripts name a SKU with a figure.
    let sku_and = |value: &Value, what: &str| -> Result<(SkuId, u32), EngineError> {
        let text = text(value)?;
        let (sku, figure) = text.rsplit_once('=').ok_or_else(malformed)?;
        let figure = figure.parse::<i64>().map_err(|_| malformed())?;
        Ok((
            SkuId::new(sku).map_err(|_| malformed())?,
            count(figure, what, source)?,
        ))
    };
    Ok(match code {
        1 => PurchaseOutcome::Purchased {
            order_id: new_order,
            remaining: count(number(&value)?, "remaining", source)?,
        },
        2 => PurchaseOutcome::SoldOut,
        3 => {
            let (sku, remaining) = sku_and(&value, "remaining")?;
            PurchaseOutcome::InsufficientStock { sku, remaining }
        }
        4 => PurchaseOutcome::LimitExceeded {
            already: count(number(&value)?, "already held", source)?,
            sku: None,
        },
        5 => PurchaseOutcome::Duplicate {
            order_id: text(&value)?.parse().map_err(|_| malformed())?,
        },
        10 => PurchaseOutcome::UnknownSku {
            sku: SkuId::new(text(&value)?).map_err(|_| malformed())?,
        },
        11 => PurchaseOutcome::SkuRequired,
        12 => {
            let (sku, already) = sku_and(&value, "already held")?;
            PurchaseOutcome::LimitExceeded {
                already,
                sku: Some(sku),
            }
        }
        6 => PurchaseOutcome::NotStarted,
        7 => PurchaseOutcome::Ended,
        8 => PurchaseOutcome::UnknownSale,
        9 => PurchaseOutcome::WrongEpoch {
            engine: epoch(number(&value)?, source)?,
        },
        other => {
            return Err(EngineError::backend(format!(
                "unexpected code {other} from {source}"
            )));
        }
    })
}

/// Release codes: 1 released, 2 already released, 3 unknown order,
/// 4 unknown sale, 5 wrong epoch (`remaining` = the epoch the engine holds).
pub(crate) fn release(
    code: i64,
    quantity: i64,
    remaining: i64,
    source: &str,
) -> Result<ReleaseOutcome, EngineError> {
    Ok(match code {
        1 => ReleaseOutcome::Released {
            quantity: count(quantity, "quantity", source)?,
            remaining: count(remaining, "remaining", source)?,
        },
        2 => ReleaseOutcome::AlreadyReleased,
        3 => ReleaseOutcome::UnknownOrder,
        4 => ReleaseOutcome::UnknownSale,
        5 => ReleaseOutcome::WrongEpoch {
            engine: epoch(remaining, source)?,
        },
        other => {
            return Err(EngineError::backend(format!(
                "unexpected code {other} from {source}"
            )));
        }
    })
}
