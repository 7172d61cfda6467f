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
mod tests;
