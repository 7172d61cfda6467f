//! The purchase rule, written once: the items against the sale's SKUs,
//! the sale's window (a tier's may open earlier), then the buyer's limits
//! (a tier's own per-user limit), then the stock (a tier's reserve). Every
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
use crate::{PurchaseOutcome, SkuId, TierName};

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

/// The buyer's tier: its position among the sale's tiers, or None for a
/// buyer without one or of a tier the sale does not name.
pub fn tier(spec: &SaleSpec, name: Option<&TierName>) -> Option<usize> {
    spec.tier_index(name?)
}

/// The tier an order of a buyer of `tier` records.
pub fn order_tier(spec: &SaleSpec, tier: Option<usize>) -> Option<TierName> {
    tier.map(|t| spec.tiers()[t].name.clone())
}

/// The second check: whether the sale is open at `now` to a buyer of
/// `tier` (a tier may start earlier).
pub fn window(
    spec: &SaleSpec,
    tier: Option<usize>,
    now: DateTime<Utc>,
) -> Result<(), PurchaseOutcome> {
    match spec.window_for(tier, now) {
        Window::NotStarted => Err(PurchaseOutcome::NotStarted),
        Window::Ended => Err(PurchaseOutcome::Ended),
        Window::Open => Ok(()),
    }
}

/// The per-user limit of a buyer of `tier`: the tier's, else the sale's.
pub fn user_limit(spec: &SaleSpec, tier: Option<usize>) -> u32 {
    tier.and_then(|t| spec.tiers()[t].per_user_limit)
        .unwrap_or(spec.per_user_limit())
}

/// The third check: whether a buyer of `tier` holding `held` items may take
/// `quantity` more under their per-user limit.
pub fn limit(
    spec: &SaleSpec,
    tier: Option<usize>,
    held: u32,
    quantity: u32,
) -> Result<(), PurchaseOutcome> {
    if u64::from(held) + u64::from(quantity) > u64::from(user_limit(spec, tier)) {
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

/// What of SKU `sku` (its position) a buyer of `tier` may take at `now`,
/// when `sold` of it are held by live orders and `tier_sold(t)` of those
/// by buyers of tier `t`.
///
/// While the reserves hold, each tier's reserve is kept for its buyers: the
/// common stock is the SKU's stock less every reserve, and a tier's sales
/// count against its reserve first, so the common stock left is
/// `stock - reserves - sold + Σ min(tier_sold, reserve)`. A buyer of a tier
/// may take that and what is left of the tier's own reserve; others only
/// that. Once the reserves are released, everyone may take what is left.
pub fn available(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    tier: Option<usize>,
    sku: usize,
    sold: u32,
    tier_sold: impl Fn(usize) -> u32,
) -> u32 {
    let stock = spec.skus()[sku].stock;
    let left = stock.saturating_sub(sold);
    if !spec.reserves_hold_at(now) {
        return left;
    }
    let id = &spec.skus()[sku].id;
    let mut common = i64::from(stock) - i64::from(sold);
    let mut own = 0;
    for (t, tier_spec) in spec.tiers().iter().enumerate() {
        let reserve = tier_spec.reserved_of(id);
        let taken = tier_sold(t);
        common -= i64::from(reserve) - i64::from(taken.min(reserve));
        if tier == Some(t) {
            own = reserve.saturating_sub(taken);
        }
    }
    (common.max(0) as u32).saturating_add(own).min(left)
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

/// The last check for one item of a one-SKU sale without tiers:
/// `quantity` out of `remaining`, and what is left after.
pub fn take(spec: &SaleSpec, remaining: u32, quantity: u32) -> Result<u32, PurchaseOutcome> {
    remaining
        .checked_sub(quantity)
        .ok_or_else(|| short(&spec.skus()[0].id, remaining, remaining))
}

/// The stock of a sale as a decider holds it: items of each SKU held by
/// live orders, and of those, by buyers of each tier.
pub trait Sold {
    /// Items of SKU `sku` (its position) held by live orders.
    fn sold(&self, sku: usize) -> u32;
    /// Of those, held by buyers of tier `tier` (its position).
    fn tier_sold(&self, tier: usize, sku: usize) -> u32;
}

/// The last check: whether every item's SKU has its quantity left for a
/// buyer of `tier` at `now`. Changes nothing.
pub fn stock(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    tier: Option<usize>,
    sold: &impl Sold,
    items: &[(usize, u32)],
) -> Result<(), PurchaseOutcome> {
    for &(i, quantity) in items {
        let can = available(spec, now, tier, i, sold.sold(i), |t| sold.tier_sold(t, i));
        if can < quantity {
            let sale_left: u64 = spec
                .skus()
                .iter()
                .enumerate()
                .map(|(j, sku)| u64::from(sku.stock.saturating_sub(sold.sold(j))))
                .sum();
            return Err(short(
                &spec.skus()[i].id,
                can,
                sale_left.min(u64::from(u32::MAX)) as u32,
            ));
        }
    }
    Ok(())
}

/// The limits and the stock, for a decider that has them all in hand (the
/// store judging an engine's order, whose window was judged when it was
/// accepted; its reserves are judged at `now`, the order's creation).
pub fn limits_and_stock(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    tier: Option<usize>,
    held: u32,
    held_of_sku: impl Fn(usize) -> u32,
    sold: &impl Sold,
    items: &[(usize, u32)],
) -> Result<(), PurchaseOutcome> {
    let quantity = items.iter().map(|&(_, q)| q).sum();
    limit(spec, tier, held, quantity)?;
    sku_limits(spec, items, held_of_sku)?;
    stock(spec, now, tier, sold, items)
}

/// The whole rule, in order: the resolved items, or the refusal.
pub fn decide(
    spec: &SaleSpec,
    now: DateTime<Utc>,
    tier: Option<usize>,
    held: u32,
    held_of_sku: impl Fn(usize) -> u32,
    sold: &impl Sold,
    items: &[WantedItem],
) -> Result<Resolved, PurchaseOutcome> {
    let resolved = resolve(spec, items)?;
    window(spec, tier, now)?;
    limits_and_stock(spec, now, tier, held, held_of_sku, sold, &resolved)?;
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

    /// Sold counts that leave `remaining` of each SKU.
    fn left(spec: &SaleSpec, remaining: &[u32]) -> crate::SoldCounts {
        let mut counts = crate::SoldCounts::new(spec);
        for (i, sku) in spec.skus().iter().enumerate() {
            counts.sold[i] = sku.stock - remaining[i];
        }
        counts
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
            decide(&spec, at(-1), None, 3, none, &left(&spec, &[0]), &one(5)),
            Err(PurchaseOutcome::NotStarted)
        );
        assert_eq!(
            decide(&spec, at(60), None, 3, none, &left(&spec, &[0]), &one(5)),
            Err(PurchaseOutcome::Ended)
        );
        // Open, over the limit and no stock: the limit answers.
        assert_eq!(
            decide(&spec, at(1), None, 2, none, &left(&spec, &[0]), &one(2)),
            Err(PurchaseOutcome::LimitExceeded {
                already: 2,
                sku: None
            })
        );
        // Within the limit: the stock answers.
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[0]), &one(1)),
            Err(PurchaseOutcome::SoldOut)
        );
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[1]), &one(2)),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("default"),
                remaining: 1
            })
        );
        assert_eq!(
            decide(&spec, at(1), None, 1, none, &left(&spec, &[10]), &one(2)),
            Ok(vec![(0, 2)])
        );
    }

    #[test]
    fn items_name_skus_of_the_sale_before_anything_else_is_judged() {
        let spec = shoes();
        let none = |_| 0;
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[2, 3]), &one(1)),
            Err(PurchaseOutcome::SkuRequired)
        );
        assert_eq!(
            decide(
                &spec,
                at(1),
                None,
                9,
                none,
                &left(&spec, &[0, 0]),
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
            decide(&spec, at(1), None, 0, none, &left(&spec, &[2, 3]), &bundle),
            Ok(vec![(0, 1), (1, 2)])
        );
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[0, 3]), &bundle),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("us-9"),
                remaining: 0
            })
        );
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[1, 1]), &bundle),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("us-10"),
                remaining: 1
            })
        );
        // Sold out only when every SKU is.
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &left(&spec, &[0, 0]), &bundle),
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
                None,
                3,
                |_| 0,
                &left(&spec, &[2, 3]),
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
                None,
                2,
                held,
                &left(&spec, &[2, 3]),
                &named(&[("us-9", 1), ("us-10", 1)])
            ),
            Err(PurchaseOutcome::LimitExceeded {
                already: 2,
                sku: Some(sku("us-10"))
            })
        );
        assert_eq!(
            decide(
                &spec,
                at(1),
                None,
                2,
                held,
                &left(&spec, &[2, 3]),
                &named(&[("us-9", 2)])
            ),
            Ok(vec![(0, 2)])
        );
    }

    #[test]
    fn the_limit_is_exact_and_never_overflows() {
        let spec = spec();
        assert_eq!(limit(&spec, None, 0, 3), Ok(()));
        assert_eq!(
            limit(&spec, None, 1, 3),
            Err(PurchaseOutcome::LimitExceeded {
                already: 1,
                sku: None
            })
        );
        assert_eq!(
            limit(&spec, None, u32::MAX, u32::MAX),
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

    fn members_sale() -> SaleSpec {
        let skus = [("us-9", 10), ("us-10", 4)]
            .map(|(id, stock)| SkuSpec { id: sku(id), stock })
            .to_vec();
        let members = crate::TierSpec {
            name: TierName::new("members").unwrap(),
            reserved: vec![crate::Item {
                sku: sku("us-9"),
                quantity: 6,
            }],
            per_user_limit: Some(5),
            starts_at: Some(at(-10)),
        };
        SaleSpec::with_skus("drop", skus)
            .unwrap()
            .per_user_limit(2)
            .unwrap()
            .starts_at(at(0))
            .tiers(vec![members])
            .release_reserved_at(at(30))
            .build()
            .unwrap()
    }

    #[test]
    fn a_tier_starts_earlier_has_its_own_limit_and_takes_its_reserve_first() {
        let spec = members_sale();
        let member = tier(&spec, Some(&TierName::new("members").unwrap()));
        assert_eq!(member, Some(0));
        assert_eq!(tier(&spec, Some(&TierName::new("gold").unwrap())), None);
        let none = |_| 0;
        let mut sold = crate::SoldCounts::new(&spec);
        let nine = |n| named(&[("us-9", n)]);
        // Before the sale opens, only members buy.
        assert_eq!(
            decide(&spec, at(-5), None, 0, none, &sold, &nine(1)),
            Err(PurchaseOutcome::NotStarted)
        );
        assert!(decide(&spec, at(-5), member, 0, none, &sold, &nine(5)).is_ok());
        // Others see the common stock: 10 - 6 reserved.
        assert_eq!(available(&spec, at(1), None, 0, 0, |_| 0), 4);
        assert_eq!(available(&spec, at(1), member, 0, 0, |_| 0), 10);
        // The members' limit is 5, the others' 2.
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &sold, &nine(3)),
            Err(PurchaseOutcome::LimitExceeded {
                already: 0,
                sku: None
            })
        );
        // Members take 8: 6 from their reserve, 2 from the common stock.
        sold.take(member, &[(0, 8)]);
        assert_eq!(
            available(&spec, at(1), None, 0, 8, |t| sold.tier_sold[t][0]),
            2
        );
        assert_eq!(
            available(&spec, at(1), member, 0, 8, |t| sold.tier_sold[t][0]),
            2
        );
        sold.take(None, &[(0, 2)]);
        assert_eq!(
            decide(&spec, at(1), None, 0, none, &sold, &nine(1)),
            Err(PurchaseOutcome::InsufficientStock {
                sku: sku("us-9"),
                remaining: 0
            })
        );
        // A member's cancel gives back what the members took from the
        // common stock first (2 here), then their reserve (1).
        sold.give_back(member, &[(0, 3)]).unwrap();
        assert_eq!(
            available(&spec, at(1), None, 0, 7, |t| sold.tier_sold[t][0]),
            2
        );
        assert_eq!(
            available(&spec, at(1), member, 0, 7, |t| sold.tier_sold[t][0]),
            3
        );
        // Once released, the reserve is everyone's.
        assert_eq!(
            available(&spec, at(30), None, 0, 7, |t| sold.tier_sold[t][0]),
            3
        );
        assert!(decide(&spec, at(30), None, 0, none, &sold, &nine(2)).is_ok());
        // A SKU without reserves is common to all.
        assert_eq!(available(&spec, at(1), None, 1, 0, |_| 0), 4);
    }

    #[test]
    fn tier_specs_that_do_not_fit_the_sale_are_refused() {
        let skus = vec![SkuSpec {
            id: sku("a"),
            stock: 5,
        }];
        let tier = |name: &str, reserved: &[(&str, u32)], starts: Option<i64>| crate::TierSpec {
            name: TierName::new(name).unwrap(),
            reserved: reserved
                .iter()
                .map(|(id, q)| crate::Item {
                    sku: sku(id),
                    quantity: *q,
                })
                .collect(),
            per_user_limit: None,
            starts_at: starts.map(at),
        };
        let build = |tiers: Vec<crate::TierSpec>| {
            SaleSpec::with_skus("t", skus.clone())
                .unwrap()
                .starts_at(at(0))
                .ends_at(at(100))
                .tiers(tiers)
                .build()
        };
        assert!(build(vec![tier("m", &[("a", 5)], Some(-1))]).is_ok());
        for (tiers, says) in [
            (vec![tier("m", &[("a", 6)], None)], "more than its stock"),
            (
                vec![tier("m", &[("a", 3)], None), tier("v", &[("a", 3)], None)],
                "more than its stock",
            ),
            (vec![tier("m", &[("b", 1)], None)], "does not have"),
            (
                vec![tier("m", &[], None), tier("m", &[], None)],
                "listed twice",
            ),
            (vec![tier("m", &[], Some(1))], "only start earlier"),
            (vec![tier("m", &[("a", 0)], None)], "reserves 0"),
        ] {
            let error = build(tiers).unwrap_err();
            assert_eq!(error.field, "tiers");
            assert!(error.reason.contains(says), "{error}");
        }
        let released = SaleSpec::with_skus("t", skus.clone())
            .unwrap()
            .release_reserved_at(at(1))
            .build()
            .unwrap_err();
        assert_eq!(released.field, "release_reserved_at");
    }
}
