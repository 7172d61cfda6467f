//! A sale's SKUs: every order's items against its quantity and the sale's
//! SKUs, and invariants 1 and 5 per SKU (the sale's totals are judged in
//! `check`). On a sale of one SKU the per-SKU numbers are the totals, so
//! only the items themselves are judged.

use std::collections::BTreeMap;

use crate::evidence::{SkuStock, StoreOrder};
use crate::history::{Answer, show_items};

/// Orders whose items do not account for them: items that do not add up
/// to the order's quantity, or that name a SKU the sale does not have
/// (their items could be counted against no stock, or the wrong one).
pub(super) fn unaccounted_items(store: &[StoreOrder], skus: &[SkuStock]) -> Vec<String> {
    store
        .iter()
        .filter_map(|order| {
            let sum: u64 = order.items.iter().map(|i| u64::from(i.quantity)).sum();
            let unknown: Vec<&str> = order
                .items
                .iter()
                .map(|i| i.sku.as_str())
                .filter(|sku| !skus.iter().any(|s| s.id == *sku))
                .collect();
            let why = if sum != order.quantity {
                format!("whose items [{}] add up to {sum}", show_items(&order.items))
            } else if !unknown.is_empty() {
                format!(
                    "whose items [{}] name SKUs the sale does not have: {}",
                    show_items(&order.items),
                    unknown.join(", ")
                )
            } else {
                return None;
            };
            Some(format!(
                "order {} of buyer {} ×{} ({}) {why}",
                order.order_id, order.user_id, order.quantity, order.status
            ))
        })
        .collect()
}

/// Items of each SKU that live orders hold, for every SKU of the sale.
pub(super) fn live_per_sku<'a>(
    store: &[StoreOrder],
    skus: &'a [SkuStock],
) -> BTreeMap<&'a str, u64> {
    let mut live: BTreeMap<&str, u64> = skus.iter().map(|s| (s.id.as_str(), 0)).collect();
    for order in store.iter().filter(|o| o.is_live()) {
        for item in &order.items {
            if let Some(held) = live.get_mut(item.sku.as_str()) {
                *held += u64::from(item.quantity);
            }
        }
    }
    live
}

/// Invariant 1 per SKU: the SKUs whose live items exceed their stock.
pub(super) fn oversold_skus(live: &BTreeMap<&str, u64>, skus: &[SkuStock]) -> Vec<String> {
    skus.iter()
        .filter_map(|sku| {
            let held = live.get(sku.id.as_str()).copied().unwrap_or(0);
            (held > sku.stock).then(|| {
                format!(
                    "SKU {}: live orders hold {held} items of a stock of {}: oversold by {}",
                    sku.id,
                    sku.stock,
                    held - sku.stock
                )
            })
        })
        .collect()
}

/// Invariant 5 per SKU, after selling out: the SKUs whose live items are
/// not their stock.
pub(super) fn unsold_skus(live: &BTreeMap<&str, u64>, skus: &[SkuStock]) -> Vec<String> {
    skus.iter()
        .filter_map(|sku| {
            let held = live.get(sku.id.as_str()).copied().unwrap_or(0);
            (held != sku.stock).then(|| {
                format!(
                    "SKU {}: {held} items, not its stock of {}",
                    sku.id, sku.stock
                )
            })
        })
        .collect()
}

/// Invariant 5 per SKU, in one instance's `GET /v1/sales/{id}` (a 200)
/// after selling out: every SKU listed with its stock, remaining 0 and
/// sold equal to its stock.
pub(super) fn wrong_sku_views(view: &Answer, skus: &[SkuStock]) -> Vec<String> {
    let listed = view.body()["skus"].as_array().cloned().unwrap_or_default();
    skus.iter()
        .filter_map(|sku| {
            let Some(shown) = listed.iter().find(|s| s["id"] == sku.id.as_str()) else {
                return Some(format!("SKU {} is missing", sku.id));
            };
            let (stock, remaining, sold) = (
                shown["stock"].as_u64(),
                shown["remaining"].as_u64(),
                shown["sold"].as_u64(),
            );
            (stock != Some(sku.stock) || remaining != Some(0) || sold != Some(sku.stock)).then(
                || {
                    format!(
                        "SKU {}: stock {}, remaining {}, sold {} (expected {}, 0 and {})",
                        sku.id,
                        super::show(stock),
                        super::show(remaining),
                        super::show(sold),
                        sku.stock,
                        sku.stock
                    )
                },
            )
        })
        .collect()
}
