//! A crowd of big bundles at once: on Redis they arrive as one batch of
//! hundreds of 20-item purchases, which names more holdings and tier
//! counts than Lua 5.1 unpacks into one call (issue 35, item 7; the
//! batch built by hand is in `tests/big_batches.rs`).

use std::sync::Arc;

use chrono::TimeDelta;
use stockade_core::{
    Clock, Item, Purchase, PurchaseOutcome, SaleSpec, SkuId, SkuSpec, TierName, TierSpec,
    WantedItem,
};

use super::helpers::{sale, stampede, user};
use crate::harness::Harness;

const SKUS: usize = 20;
const STOCK: u32 = 200;
const BUYERS: usize = 256;

fn sku(i: usize) -> SkuId {
    SkuId::new(format!("s{i:02}")).unwrap()
}

/// Every buyer wants one of each of 20 SKUs of 200, a buyer may hold one
/// of each, and every other buyer is a `vip`, for whom 50 of each are
/// kept until tomorrow.
pub async fn a_crowd_of_big_bundles_sells_whole_bundles_only(h: &Harness) {
    let vip = TierSpec {
        name: TierName::new("vip").unwrap(),
        reserved: (0..SKUS)
            .map(|i| Item {
                sku: sku(i),
                quantity: 50,
            })
            .collect(),
        per_user_limit: None,
        starts_at: None,
    };
    let skus = (0..SKUS)
        .map(|i| SkuSpec {
            id: sku(i),
            stock: STOCK,
        })
        .collect();
    let spec = SaleSpec::with_skus("bundles", skus)
        .unwrap()
        .per_user_limit(SKUS as u32)
        .unwrap()
        .per_sku_limit(1)
        .unwrap()
        .tiers(vec![vip])
        .release_reserved_at(h.clock.now() + TimeDelta::days(1))
        .build()
        .unwrap();
    h.engine.create_sale(&spec).await.unwrap();
    let bundle: Vec<WantedItem> = (0..SKUS)
        .map(|i| WantedItem {
            sku: Some(sku(i)),
            quantity: 1,
        })
        .collect();
    let purchases: Vec<Purchase> = (0..BUYERS)
        .map(|i| {
            let purchase =
                Purchase::of_items(sale("bundles"), user(&format!("buyer-{i}")), bundle.clone())
                    .unwrap();
            if i % 2 == 0 {
                purchase.with_tier(TierName::new("vip").unwrap())
            } else {
                purchase
            }
        })
        .collect();
    let crowd = stampede(&Arc::clone(&h.engine), purchases).await;
    assert!(
        crowd
            .others
            .iter()
            .all(|o| matches!(o, PurchaseOutcome::InsufficientStock { .. })),
        "only purchased, sold out or short: {:?}",
        crowd.others
    );
    let snapshot = h.engine.snapshot(&sale("bundles")).await.unwrap().unwrap();
    for left in &snapshot.skus {
        assert_eq!(
            left.remaining + crowd.orders.len() as u32,
            STOCK,
            "SKU {}: {} left after {} whole bundles",
            left.id,
            left.remaining,
            crowd.orders.len()
        );
    }
    // Non-members may take 150 of each; members the rest.
    assert_eq!(crowd.orders.len(), STOCK as usize, "{crowd:?}");
}
