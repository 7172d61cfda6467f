//! Turning the store's orders into the state an engine must hold, checked
//! once here so every engine rebuilds the same way.

use std::collections::{HashMap, HashSet};

use crate::{EngineError, IdempotencyKey, Order, OrderId, SaleSpec, SoldCounts, UserId, rule};

/// The state an engine holds for one sale, derived from committed orders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildPlan {
    /// Stock left in all: total minus the quantities of live orders.
    pub remaining: u32,
    /// Stock left of each SKU, in the spec's order.
    pub sku_remaining: Vec<u32>,
    /// Items sold, by SKU and by tier and SKU.
    pub sold: SoldCounts,
    /// Items each buyer holds through live orders (buyers with none omitted).
    pub holdings: HashMap<UserId, u32>,
    /// For a sale with a per-SKU limit: items each buyer holds of each SKU
    /// (by its position in the spec; none held omitted). Empty otherwise.
    pub sku_holdings: HashMap<(UserId, usize), u32>,
    /// Every idempotency key ever used, live order or not, with its buyer
    /// (keys are scoped to a buyer).
    pub keys: Vec<(UserId, IdempotencyKey, OrderId)>,
    /// Every order, with whether it still holds its items.
    pub orders: Vec<PlannedOrder>,
}

/// One order as an engine records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedOrder {
    /// The order id.
    pub id: OrderId,
    /// The buyer.
    pub user_id: UserId,
    /// Items bought, across every SKU.
    pub quantity: u32,
    /// Its items: the position of each SKU in the spec, and the quantity.
    pub items: Vec<(usize, u32)>,
    /// The buyer's tier (its position in the spec), if one of the sale's.
    pub tier: Option<usize>,
    /// Whether it still holds its items (false: cancelled or expired).
    pub live: bool,
}

impl RebuildPlan {
    /// Checks that `orders` fit `spec` (same sale, SKUs of the sale, no
    /// oversell of any SKU, no buyer over a limit, unique ids and keys) and
    /// derives the engine state.
    pub fn new(spec: &SaleSpec, orders: &[Order]) -> Result<Self, EngineError> {
        let inconsistent = |reason: String| EngineError::InconsistentRebuild {
            sale_id: spec.id().clone(),
            reason,
        };
        let mut sold: u64 = 0;
        let mut sku_sold: Vec<u64> = vec![0; spec.skus().len()];
        let mut counts = SoldCounts::new(spec);
        let mut holdings: HashMap<UserId, u32> = HashMap::new();
        let mut limits: HashMap<UserId, u32> = HashMap::new();
        let mut sku_holdings: HashMap<(UserId, usize), u32> = HashMap::new();
        let mut keys = Vec::new();
        let mut seen_keys = HashSet::new();
        let mut seen_ids = HashSet::new();
        let mut planned = Vec::with_capacity(orders.len());
        for order in orders {
            if order.sale_id != *spec.id() {
                return Err(inconsistent(format!(
                    "order {} belongs to sale {}",
                    order.id, order.sale_id
                )));
            }
            if !seen_ids.insert(order.id) {
                return Err(inconsistent(format!("order {} appears twice", order.id)));
            }
            if let Some(key) = &order.idempotency_key {
                if !seen_keys.insert((order.user_id.clone(), key.clone())) {
                    return Err(inconsistent(format!(
                        "idempotency key {key:?} of buyer {} is used by two orders",
                        order.user_id
                    )));
                }
                keys.push((order.user_id.clone(), key.clone(), order.id));
            }
            let items = rule::resolve_order(spec, &order.items).ok_or_else(|| {
                inconsistent(format!(
                    "order {} names a SKU the sale does not have",
                    order.id
                ))
            })?;
            if items.iter().map(|&(_, q)| q).sum::<u32>() != order.quantity {
                return Err(inconsistent(format!(
                    "order {} has a quantity of {} but items that add up to another",
                    order.id, order.quantity
                )));
            }
            let tier = rule::tier(spec, order.tier.as_ref());
            let live = order.status.holds_stock();
            if live {
                sold += u64::from(order.quantity);
                for &(i, quantity) in &items {
                    sku_sold[i] += u64::from(quantity);
                    if let Some(cap) = spec.per_sku_limit() {
                        let held = sku_holdings.entry((order.user_id.clone(), i)).or_insert(0);
                        *held = held.saturating_add(quantity);
                        if *held > cap {
                            return Err(inconsistent(format!(
                                "buyer {} holds {held} of SKU {}, above the per-SKU limit of {cap}",
                                order.user_id,
                                spec.skus()[i].id
                            )));
                        }
                    }
                }
                let held = holdings.entry(order.user_id.clone()).or_insert(0);
                *held = held.saturating_add(order.quantity);
                // A buyer's limit is their tier's: the most generous of
                // the tiers their live orders were bought under.
                let limit = limits
                    .entry(order.user_id.clone())
                    .or_insert(spec.per_user_limit());
                *limit = (*limit).max(rule::user_limit(spec, tier));
                if *held > *limit {
                    return Err(inconsistent(format!(
                        "buyer {} holds {} items, above the limit of {}",
                        order.user_id, held, limit
                    )));
                }
            }
            planned.push(PlannedOrder {
                id: order.id,
                user_id: order.user_id.clone(),
                quantity: order.quantity,
                items,
                tier,
                live,
            });
        }
        for (sku, sold) in spec.skus().iter().zip(&sku_sold) {
            if *sold > u64::from(sku.stock) {
                return Err(inconsistent(format!(
                    "live orders hold {sold} items of SKU {}, more than its stock of {}",
                    sku.id, sku.stock
                )));
            }
        }
        if sold > u64::from(spec.total_stock()) {
            return Err(inconsistent(format!(
                "live orders hold {sold} items, more than the stock of {}",
                spec.total_stock()
            )));
        }
        for order in planned.iter().filter(|order| order.live) {
            counts.take(order.tier, &order.items);
        }
        Ok(Self {
            remaining: spec.total_stock() - sold as u32,
            sold: counts,
            sku_remaining: spec
                .skus()
                .iter()
                .zip(&sku_sold)
                .map(|(sku, sold)| sku.stock - *sold as u32)
                .collect(),
            holdings,
            sku_holdings,
            keys,
            orders: planned,
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::{OrderStatus, SaleId};

    fn order(user: &str, quantity: u32, status: OrderStatus, key: Option<&str>) -> Order {
        Order {
            id: OrderId::generate(),
            sale_id: SaleId::new("s").unwrap(),
            user_id: UserId::new(user).unwrap(),
            quantity,
            items: vec![crate::Item {
                sku: crate::SkuId::default_sku(),
                quantity,
            }],
            tier: None,
            idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
            status,
            created_at: Utc::now(),
            expires_at: None,
            epoch: crate::Epoch::FIRST,
        }
    }

    #[test]
    fn live_orders_count_and_released_ones_keep_their_keys() {
        let spec = SaleSpec::builder("s", 10)
            .unwrap()
            .per_user_limit(3)
            .unwrap()
            .build()
            .unwrap();
        let orders = vec![
            order("a", 2, OrderStatus::Confirmed, Some("k1")),
            order("a", 1, OrderStatus::Held, None),
            order("b", 3, OrderStatus::Cancelled, Some("k2")),
        ];
        let plan = RebuildPlan::new(&spec, &orders).unwrap();
        assert_eq!(plan.remaining, 7);
        assert_eq!(plan.holdings.len(), 1);
        assert_eq!(plan.holdings[&UserId::new("a").unwrap()], 3);
        assert_eq!(plan.keys.len(), 2);
        assert_eq!(plan.orders.iter().filter(|o| o.live).count(), 2);
    }

    #[test]
    fn oversold_or_over_limit_histories_are_refused() {
        let spec = SaleSpec::builder("s", 2).unwrap().build().unwrap();
        let over_limit = vec![
            order("a", 1, OrderStatus::Confirmed, None),
            order("a", 1, OrderStatus::Confirmed, None),
        ];
        assert!(matches!(
            RebuildPlan::new(&spec, &over_limit),
            Err(EngineError::InconsistentRebuild { .. })
        ));
        let oversold = vec![
            order("a", 1, OrderStatus::Confirmed, None),
            order("b", 1, OrderStatus::Confirmed, None),
            order("c", 1, OrderStatus::Confirmed, None),
        ];
        assert!(RebuildPlan::new(&spec, &oversold).is_err());
        let same_key = vec![
            order("a", 1, OrderStatus::Cancelled, Some("k")),
            order("a", 1, OrderStatus::Confirmed, Some("k")),
        ];
        assert!(RebuildPlan::new(&spec, &same_key).is_err());
        // Keys are scoped to a buyer: two buyers may use the same one.
        let two_buyers = vec![
            order("a", 1, OrderStatus::Confirmed, Some("k")),
            order("b", 1, OrderStatus::Confirmed, Some("k")),
        ];
        assert!(RebuildPlan::new(&spec, &two_buyers).is_ok());
    }
}
