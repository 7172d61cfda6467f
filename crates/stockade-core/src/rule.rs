//! The purchase rule, written once: the items against the sale's SKUs,
//! the sale's window, then the buyer's limits, then the stock. Every
//! decider applies it in this order, so a purchase gets the same answer
//! whoever decides it: the memory engine and the order store (its own
//! decisions and its verdicts on commits) call these functions; the Redis
//! engine's `purchase.lua` is their mirror, and the engine conformance
//! suite (and its property test) checks that all of them agree.
//!
//! The checks are split where deciders must split them: the memory engine
//! takes the stock of a one-SKU sale with a compare-and-swap, so it applies
//! [`take`] inside the swap, after [`window`] and [`limit`] passed.
//!
//! Items are all or nothing: every item's SKU must have its quantity left,
//! or nothing is taken and the first short item (in the order asked) is
//! named.

use chrono::{DateTime, Utc};

use crate::sale::{SaleSpec, Window};
use crate::sku::{Item, WantedItem};
use crate::{PurchaseOutcome, SkuId};

/// A purchase's items resolved against the sale: the position of each
/// item's SKU among the spec's SKUs, and its quantity, in the order asked.
pub type Resolved = Vec<(usize, u32)>;

/// The first check: each item names a SKU of the sale (or the sale has one
/// SKU and the item names none).
pub fn resolve(spec: &SaleSpec, items: &[WantedItem]) -> Result<Resolved, PurchaseOutcome> {
    items
        .iter()
        .map(|item| match &item.sku {
            None if spec.skus().len() == 1 => Ok((0, item.quantity)),
            None => Err(PurchaseOutcome::SkuRequired),
            Some(sku) => spec
                .sku_index(sku)
                .map(|i| (i, item.quantity))
                .ok_or_else(|| PurchaseOutcome::UnknownSku { sku: sku.clone() }),
        })
        .collect()
}

/// An order's items resolved against its sale, or None if one names a SKU
/// the sale does not have.
pub fn resolve_order(spec: &SaleSpec, items: &[Item]) -> Option<Resolved> {
    items
        .iter()
        .map(|item| Some((spec.sku_index(&item.sku)?, item.quantity)))
        .collect()
}

/// The resolved items as an order records them.
pub fn order_items(spec: &SaleSpec, resolved: &[(usize, u32)]) -> Vec<Item> {
    resolved
        .iter()
        .map(|&(i, quantity)| Item {
            sku: spec.skus()[i].id.clone(),
            quantity,
        })
        .collect()
}

/// The second check: whether the sale is open at `now`.
pub fn window(spec: &SaleSpec, now: DateTime<Utc>) -> Result<(), PurchaseOutcome> {
    match spec.window_at(now) {
        Window::NotStarted => Err(PurchaseOutcome::NotStarted),
        Window::Ended => Err(PurchaseOutcome::Ended),
        Window::Open => Ok(()),
    }
}

/// The third check: whether a buyer holding `held` items may take
/// `quantity` more under the sale's per-user limit.
pub fn limit(spec: &SaleSpec, held: u32, quantity: u32) -> Result<(), PurchaseOutcome> {
    if u64::from(held) + u64::from(quantity) > u64::from(spec.per_user_limit()) {
        return Err(PurchaseOutcome::LimitExceeded {
            already: held,
            sku: None,
        });
    }
    Ok(())
}

/// The fourth check, for a sale with a per-SKU limit: whether the buyer,
/// holding `held(sku position)` of each SKU, may take every item.
pub fn sku_limits(
    spec: &SaleSpec,
    items: &[(usize, u32)],
    held: impl Fn(usize) -> u32,
) -> Result<(), PurchaseOutcome> {
    let Some(cap) = spec.per_sku_limit() else {
        return Ok(());
    };
    for &(i, quantity) in items {
        let already = held(i);
        if u64::from(already) + u64::from(quantity) > u64::from(cap) {
            return Err(PurchaseOutcome::LimitExceeded {
                already,
                sku: Some(spec.skus()[i].id.clone()),
            });
        }
    }
    Ok(())
}

/// The refusal of an item of SKU `sku` that asked for more than its `left`,
/// while the sale has `sale_left` items in all: sold out when the whole
/// sale is, else the SKU and what it has left.
pub fn short(sku: &SkuId, left: u32, sale_left: u32) -> PurchaseOutcome {
    if sale_left == 0 {
        PurchaseOutcome::SoldOut
    } else {
        PurchaseOutcome::InsufficientStock {
            sku: sku.clone(),
            remaining: left,
        }
    }
}

/// The last check for one item of a one-SKU sale: `quantity` out of
/// `remaining`, and what is left after.
pub fn take(spec: &SaleSpec, remaining: u32, quantity: u32) -> Result<u32, PurchaseOutcome> {
    remaining
        .checked_sub(quantity)
        .ok_or_else(|| short(&spec.skus()[0].id, remaining, remaining))
}

/// The last check: whether every item's SKU has its quantity left
/// (`remaining`, per SKU in the spec's order). Changes nothing.
pub fn stock(
    spec: &SaleSpec,
    remaining: &[u32],
    items: &[(usize, u32)],
) -> Result<(), PurchaseOutcome> {
    for &(i, quantity) in items {
        if remaining[i] < quantity {
            let sale_left = remaining.iter().map(|&r| u64::from(r)).sum::<u64>();
            return Err(short(
                &spec.skus()[i].id,
                remaining[i],
                sale_left.min(u64::from(u32::MAX)) as u32,
            ));
        }
    }
    Ok(())
}

/// The limits and the stock, for a decider that has them all in hand (the
/// store judging an engine's order, whose window was judged when it was
/// accepted).
pub fn limits_and_stock(
    spec: &SaleSpec,
    held: u32,
    held_of_sku: impl Fn(usize) -> u32,
    remaining: &[u32],
    items: &[(usize, u32)],
) -> Result<(), PurchaseOutcome> {
    let quantity = items.iter().map(|&(_, q)| q).sum();
    limit(spec, held, quantity)?;
    sku_limits(spec, items, held_of_sku)?;
    stock(spec, remaining, items)
}

/// The whole rule, in order: the resolved items, or the refusal.
pub fn decide(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    held: u32,
    held_of_sku: impl Fn(usize) -> u32,
    remaining: &[u32],
    items: &[WantedItem],
) -> Result<Resolved, PurchaseOutcome> {
    let resolved = resolve(spec, items)?;
    window(spec, now)?;
    limits_and_stock(spec, held, held_of_sku, remaining, &resolved)?;
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;
    use crate::SkuSpec;

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

    fn sku(id: &str) -> SkuId {
        SkuId::new(id).unwrap()
    }

    fn one(quantity: u32) -> Vec<WantedItem> {
        vec![WantedItem {
            sku: None,
            quantity,
        }]
    }

    fn named(items: &[(&str, u32)]) -> Vec<WantedItem> {
        items
            .iter()
            .map(|(id, quantity)| WantedItem {
                sku: Some(sku(id)),
                quantity: *quantity,
            })
            .collect()
    }

    fn shoes() -> SaleSpec {
        let skus = [("us-9", 2), ("us-10", 3)]
            .map(|(id, stock)| SkuSpec { id: sku(id), stock })
            .to_vec();
        SaleSpec::with_skus("shoes", skus)
            .unwrap()
            .per_user_limit(4)
            .unwrap()
            .per_sku_limit(2)
            .unwrap()
            .build()
            .unwrap()
    }

    #[test]
    fn the_window_is_judged_before_the_limit_and_the_limit_before_the_stock() {
        let spec = spec();
        let none = |_| 0;
        // Everything wrong at once: the window answers.
        assert_eq!(
            decide(&spec, at(-1), 3, none, &[0], &one(5)),
            Err(PurchaseOutcome::NotStarted)
        );
        assert_eq!(
            decide(&spec, at(60), 3, none, &[0], &one(5)),
            Err(PurchaseOutcome::Ended)
        );
        // Open, over the limit and no stock: the limit answers.
        assert_eq!(
            decide(&spec, at(1), 2, none, &[0], &one(2)),
            Err(PurchaseOutcome::LimitExceeded {
                already: 2,
                sku: None
            })
        );
        // Within the limit: the stock answers.
        assert_eq!(
            decide(&spec, at(1), 0, none, &[0], &one(1)),
            Err(PurchaseOutcome::SoldOut)
        );
        assert_eq!(
            decide(&spec, at(1), 0, none, &[1], &one(2)),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("default"),
                remaining: 1
            })
        );
        assert_eq!(
            decide(&spec, at(1), 1, none, &[10], &one(2)),
            Ok(vec![(0, 2)])
        );
    }

    #[test]
    fn items_name_skus_of_the_sale_before_anything_else_is_judged() {
        let spec = shoes();
        let none = |_| 0;
        assert_eq!(
            decide(&spec, at(1), 0, none, &[2, 3], &one(1)),
            Err(PurchaseOutcome::SkuRequired)
        );
        assert_eq!(
            decide(
                &spec,
                at(1),
                9,
                none,
                &[0, 0],
                &named(&[("us-9", 1), ("us-11", 1)])
            ),
            Err(PurchaseOutcome::UnknownSku { sku: sku("us-11") })
        );
        // A one-SKU sale takes an unnamed item or its own SKU by name.
        let single = self::spec();
        assert_eq!(resolve(&single, &one(2)), Ok(vec![(0, 2)]));
        assert_eq!(
            resolve(&single, &named(&[("default", 2)])),
            Ok(vec![(0, 2)])
        );
    }

    #[test]
    fn a_bundle_is_all_or_nothing_and_names_its_first_short_item() {
        let spec = shoes();
        let none = |_| 0;
        let bundle = named(&[("us-9", 1), ("us-10", 2)]);
        assert_eq!(
            decide(&spec, at(1), 0, none, &[2, 3], &bundle),
            Ok(vec![(0, 1), (1, 2)])
        );
        assert_eq!(
            decide(&spec, at(1), 0, none, &[0, 3], &bundle),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("us-9"),
                remaining: 0
            })
        );
        assert_eq!(
            decide(&spec, at(1), 0, none, &[1, 1], &bundle),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("us-10"),
                remaining: 1
            })
        );
        // Sold out only when every SKU is.
        assert_eq!(
            decide(&spec, at(1), 0, none, &[0, 0], &bundle),
            Err(PurchaseOutcome::SoldOut)
        );
    }

    #[test]
    fn the_per_user_limit_counts_every_sku_and_the_per_sku_limit_each() {
        let spec = shoes();
        assert_eq!(
            decide(
                &spec,
                at(1),
                3,
                |_| 0,
                &[2, 3],
                &named(&[("us-9", 1), ("us-10", 1)])
            ),
            Err(PurchaseOutcome::LimitExceeded {
                already: 3,
                sku: None
            })
        );
        let held = |i| if i == 1 { 2 } else { 0 };
        assert_eq!(
            decide(
                &spec,
                at(1),
                2,
                held,
                &[2, 3],
                &named(&[("us-9", 1), ("us-10", 1)])
            ),
            Err(PurchaseOutcome::LimitExceeded {
                already: 2,
                sku: Some(sku("us-10"))
            })
        );
        assert_eq!(
            decide(&spec, at(1), 2, held, &[2, 3], &named(&[("us-9", 2)])),
            Ok(vec![(0, 2)])
        );
    }

    #[test]
    fn the_limit_is_exact_and_never_overflows() {
        let spec = spec();
        assert_eq!(limit(&spec, 0, 3), Ok(()));
        assert_eq!(
            limit(&spec, 1, 3),
            Err(PurchaseOutcome::LimitExceeded {
                already: 1,
                sku: None
            })
        );
        assert_eq!(
            limit(&spec, u32::MAX, u32::MAX),
            Err(PurchaseOutcome::LimitExceeded {
                already: u32::MAX,
                sku: None
            })
        );
    }

    #[test]
    fn the_last_items_go_exactly() {
        let spec = spec();
        assert_eq!(take(&spec, 3, 3), Ok(0));
        assert_eq!(take(&spec, 0, 1), Err(PurchaseOutcome::SoldOut));
        assert_eq!(
            take(&spec, 2, 3),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("default"),
                remaining: 2
            })
        );
    }
}
