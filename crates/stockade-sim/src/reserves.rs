//! The tiers' reserves are kept while they hold: until the release, what
//! buyers outside a tier's reserve took of the first SKU never ate into
//! it. Judged from the store alone, independently of the rule the engines
//! and the arbiter share (`stockade_core::rule::available`), so that a
//! fault in that rule shows here even though every decider agrees.
//!
//! The orders that still hold stock at the end were live together from
//! the last of them to be created on; each was judged at its creation
//! (`created_at`, on the deciding instance's clock). So if all of them
//! were created before the release, the last one committed was accepted
//! while all the others were live, with the reserves holding: their items
//! must fit the reserves then. An order created after the release may
//! have taken reserved items rightly, so it is left out; leaving orders
//! out only lowers what is counted, and the check stays sound.

use stockade_core::Order;

use crate::oracle::Violation;
use crate::scenario::Sale;

/// A violation if the orders that hold stock at the end and were created
/// while the reserves held took more of the first SKU outside the
/// reserves than the stock less every reserve.
pub fn kept(sale: &Sale, orders: &[Order]) -> Option<Violation> {
    let reserved: u32 = sale.tiers.iter().map(|t| t.reserved).sum();
    let sku = sale.skus.first()?;
    if reserved == 0 {
        return None;
    }
    let release = sale.release_reserved_ms.map(crate::clock::at);
    let held_while_reserved = |order: &&Order| {
        order.status.holds_stock() && release.is_none_or(|at| order.created_at < at)
    };
    // Items of the SKU by tier (None: no tier), of those orders.
    let mut by_tier = vec![0u32; sale.tiers.len()];
    let mut untiered = 0u32;
    for order in orders.iter().filter(held_while_reserved) {
        let quantity: u32 = order
            .items
            .iter()
            .filter(|item| item.sku.as_str() == sku.id)
            .map(|item| item.quantity)
            .sum();
        let tier = order
            .tier
            .as_ref()
            .and_then(|name| sale.tier_index(name.as_str()));
        match tier {
            Some(t) => by_tier[t] += quantity,
            None => untiered += quantity,
        }
    }
    // What came out of the common stock: everything outside a tier, and
    // what each tier took beyond its own reserve.
    let common: u32 = untiered
        + sale
            .tiers
            .iter()
            .zip(&by_tier)
            .map(|(tier, taken)| taken.saturating_sub(tier.reserved))
            .sum::<u32>();
    let free = sku.stock.saturating_sub(reserved);
    (common > free).then(|| {
        format!(
            "SKU {}: orders live together while the reserves held took {common} items outside the reserves ({untiered} by buyers of no tier, by tier {by_tier:?}), but the stock less the reserves ({reserved}) is {free}",
            sku.id
        )
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scenario::{Sku, Tier};
    use chrono::TimeDelta;
    use stockade_core::{Epoch, Item, OrderId, OrderStatus, SaleId, SkuId, TierName, UserId};

    /// 10 of one SKU, 4 kept for members until `release_ms`, if any.
    pub(crate) fn sale(release_ms: Option<u64>) -> Sale {
        Sale {
            id: "drop".into(),
            skus: vec![Sku {
                id: "s0".into(),
                stock: 10,
            }],
            per_user_limit: 5,
            per_sku_limit: None,
            hold_seconds: None,
            starts_ms: 0,
            ends_ms: None,
            tiers: vec![Tier {
                name: "members".into(),
                reserved: 4,
                per_user_limit: 5,
                early_ms: 0,
            }],
            release_reserved_ms: release_ms,
            draw_close_ms: None,
        }
    }

    fn order(tier: Option<&str>, quantity: u32, at_ms: i64, status: OrderStatus) -> Order {
        Order {
            id: OrderId::generate(),
            sale_id: SaleId::new("drop").unwrap(),
            user_id: UserId::new("u").unwrap(),
            quantity,
            items: vec![Item {
                sku: SkuId::new("s0").unwrap(),
                quantity,
            }],
            tier: tier.map(|t| TierName::new(t).unwrap()),
            idempotency_key: None,
            status,
            created_at: crate::clock::epoch() + TimeDelta::milliseconds(at_ms),
            expires_at: None,
            epoch: Epoch::FIRST,
        }
    }

    #[test]
    fn the_common_stock_is_the_stock_less_the_reserves() {
        let confirmed = OrderStatus::Confirmed;
        // Six outside the reserve and four members: all the stock, right.
        let right = [
            order(None, 6, 100, confirmed),
            order(Some("members"), 4, 200, confirmed),
        ];
        assert_eq!(kept(&sale(None), &right), None);
        // A member beyond the reserve takes from the common stock.
        let members_beyond = [
            order(None, 5, 100, confirmed),
            order(Some("members"), 5, 200, confirmed),
        ];
        assert_eq!(kept(&sale(None), &members_beyond), None);
        // Seven outside the reserve: one reserved item taken.
        let wrong = [order(None, 7, 100, confirmed)];
        assert!(kept(&sale(None), &wrong).is_some());
        let wrong = [
            order(None, 6, 100, confirmed),
            order(Some("members"), 5, 200, confirmed),
        ];
        assert!(kept(&sale(None), &wrong).is_some());
    }

    #[test]
    fn released_or_ended_orders_are_not_counted() {
        let seven = [
            order(None, 5, 100, OrderStatus::Confirmed),
            order(None, 2, 2_000, OrderStatus::Confirmed),
        ];
        // Created after the release: may take what was reserved.
        assert_eq!(kept(&sale(Some(1_000)), &seven), None);
        assert!(kept(&sale(Some(3_000)), &seven).is_some());
        // An expired hold gave its items back.
        let expired = [
            order(None, 6, 100, OrderStatus::Confirmed),
            order(None, 1, 200, OrderStatus::Expired),
        ];
        assert_eq!(kept(&sale(None), &expired), None);
    }
}
