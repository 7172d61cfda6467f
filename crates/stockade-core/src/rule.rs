//! The purchase rule, written once: the sale's window, then the buyer's
//! limit, then the stock. Every decider applies it in this order, so a
//! purchase gets the same answer whoever decides it: the memory engine and
//! the order store (its own decisions and its verdicts on commits) call
//! these functions; the Redis engine's `purchase.lua` is their mirror, and
//! the engine conformance suite (and its property test) checks that all of
//! them agree.
//!
//! The checks are split where deciders must split them: the memory engine
//! takes stock with a compare-and-swap, so it applies [`take`] inside the
//! swap, after [`window`] and [`limit`] passed.

use chrono::{DateTime, Utc};

use crate::PurchaseOutcome;
use crate::sale::{SaleSpec, Window};

/// The first check: whether the sale is open at `now`.
pub fn window(spec: &SaleSpec, now: DateTime<Utc>) -> Result<(), PurchaseOutcome> {
    match spec.window_at(now) {
        Window::NotStarted => Err(PurchaseOutcome::NotStarted),
        Window::Ended => Err(PurchaseOutcome::Ended),
        Window::Open => Ok(()),
    }
}

/// The second check: whether a buyer holding `held` items may take
/// `quantity` more under the sale's per-user limit.
pub fn limit(spec: &SaleSpec, held: u32, quantity: u32) -> Result<(), PurchaseOutcome> {
    if u64::from(held) + u64::from(quantity) > u64::from(spec.per_user_limit()) {
        return Err(PurchaseOutcome::LimitExceeded { already: held });
    }
    Ok(())
}

/// The third check: `quantity` items out of `remaining`, and what is left
/// after.
pub fn take(remaining: u32, quantity: u32) -> Result<u32, PurchaseOutcome> {
    match remaining.checked_sub(quantity) {
        Some(left) => Ok(left),
        None if remaining == 0 => Err(PurchaseOutcome::SoldOut),
        None => Err(PurchaseOutcome::InsufficientStock { remaining }),
    }
}

/// The limit and the stock, for a decider that has both in hand (the
/// store judging an engine's order, whose window was judged when it was
/// accepted): what is left after, or the refusal.
pub fn limit_and_stock(
    spec: &SaleSpec,
    held: u32,
    remaining: u32,
    quantity: u32,
) -> Result<u32, PurchaseOutcome> {
    limit(spec, held, quantity)?;
    take(remaining, quantity)
}

/// The whole rule, in order: what is left after, or the refusal.
pub fn decide(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    held: u32,
    remaining: u32,
    quantity: u32,
) -> Result<u32, PurchaseOutcome> {
    window(spec, now)?;
    limit_and_stock(spec, held, remaining, quantity)
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn at(second: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + second, 0).unwrap()
    }

    fn spec() -> SaleSpec {
        SaleSpec::builder("s", 10)
            .unwrap()
            .per_user_limit(3)
            .unwrap()
            .starts_at(at(0))
            .ends_at(at(0) + Duration::seconds(60))
            .build()
            .unwrap()
    }

    #[test]
    fn the_window_is_judged_before_the_limit_and_the_limit_before_the_stock() {
        let spec = spec();
        // Everything wrong at once: the window answers.
        assert_eq!(
            decide(&spec, at(-1), 3, 0, 5),
            Err(PurchaseOutcome::NotStarted)
        );
        assert_eq!(decide(&spec, at(60), 3, 0, 5), Err(PurchaseOutcome::Ended));
        // Open, over the limit and no stock: the limit answers.
        assert_eq!(
            decide(&spec, at(1), 2, 0, 2),
            Err(PurchaseOutcome::LimitExceeded { already: 2 })
        );
        // Within the limit: the stock answers.
        assert_eq!(decide(&spec, at(1), 0, 0, 1), Err(PurchaseOutcome::SoldOut));
        assert_eq!(
            decide(&spec, at(1), 0, 1, 2),
            Err(PurchaseOutcome::InsufficientStock { remaining: 1 })
        );
        assert_eq!(decide(&spec, at(1), 1, 10, 2), Ok(8));
    }

    #[test]
    fn the_limit_is_exact_and_never_overflows() {
        let spec = spec();
        assert_eq!(limit(&spec, 0, 3), Ok(()));
        assert_eq!(
            limit(&spec, 1, 3),
            Err(PurchaseOutcome::LimitExceeded { already: 1 })
        );
        assert_eq!(
            limit(&spec, u32::MAX, u32::MAX),
            Err(PurchaseOutcome::LimitExceeded { already: u32::MAX })
        );
    }

    #[test]
    fn the_last_items_go_exactly() {
        assert_eq!(take(3, 3), Ok(0));
        assert_eq!(take(0, 1), Err(PurchaseOutcome::SoldOut));
        assert_eq!(
            take(2, 3),
            Err(PurchaseOutcome::InsufficientStock { remaining: 2 })
        );
    }
}
