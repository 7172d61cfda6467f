//! The numeric answers of the server-side steps: the Redis scripts
//! (`lua/purchase.lua`, `lua/release.lua`, `lua/release_many.lua`) share
//! one numbering, decoded here once.

use stockade_core::{EngineError, Epoch, OrderId, PurchaseOutcome, ReleaseOutcome};

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

/// Purchase codes: 1 purchased (`value` = remaining), 2 sold out,
/// 3 insufficient stock (`value` = remaining), 4 limit exceeded (`value` =
/// already held), 5 duplicate (`original` = the first order), 6 not
/// started, 7 ended, 8 unknown sale, 9 wrong epoch (`value` = the epoch
/// the engine holds).
pub(crate) fn purchase(
    code: i64,
    value: i64,
    original: Option<OrderId>,
    new_order: OrderId,
    source: &str,
) -> Result<PurchaseOutcome, EngineError> {
    Ok(match code {
        1 => PurchaseOutcome::Purchased {
            order_id: new_order,
            remaining: count(value, "remaining", source)?,
        },
        2 => PurchaseOutcome::SoldOut,
        3 => PurchaseOutcome::InsufficientStock {
            remaining: count(value, "remaining", source)?,
        },
        4 => PurchaseOutcome::LimitExceeded {
            already: count(value, "already held", source)?,
        },
        5 => PurchaseOutcome::Duplicate {
            order_id: original.ok_or_else(|| {
                EngineError::backend(format!("{source} reported a duplicate without its order"))
            })?,
        },
        6 => PurchaseOutcome::NotStarted,
        7 => PurchaseOutcome::Ended,
        8 => PurchaseOutcome::UnknownSale,
        9 => PurchaseOutcome::WrongEpoch {
            engine: epoch(value, source)?,
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
