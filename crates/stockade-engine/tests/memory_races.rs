//! The memory engine under one buyer's concurrent requests: their limits
//! hold however the requests interleave. Real threads on a multi-thread
//! runtime, many rounds, because the windows are a few instructions wide.

use std::sync::Arc;

use stockade_core::{
    Engine, Purchase, PurchaseOutcome, SaleId, SaleSpec, SkuId, SkuSpec, SystemClock, UserId,
    WantedItem,
};
use stockade_engine::MemoryEngine;

/// Rounds, each a fresh buyer.
const ROUNDS: usize = 10_000;
/// Requests of that buyer at once.
const AT_ONCE: usize = 6;

/// A per-SKU limit of 1 under a per-buyer limit of 10: only the per-SKU
/// holding can refuse the buyer's second item of SKU `a`. The engine once
/// counted that holding after letting go of the buyer's lock, so a second
/// request could read it before the first had counted its item (found by
/// the conformance suite's random bundles).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_buyer_at_once_never_passes_a_per_sku_limit() {
    let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new(Arc::new(SystemClock)));
    let skus = ["a", "b"]
        .into_iter()
        .map(|id| SkuSpec {
            id: SkuId::new(id).unwrap(),
            stock: 1_000_000,
        })
        .collect();
    let spec = SaleSpec::with_skus("sku-race", skus)
        .unwrap()
        .per_user_limit(10)
        .unwrap()
        .per_sku_limit(1)
        .unwrap()
        .build()
        .unwrap();
    engine.create_sale(&spec).await.unwrap();
    let sale = SaleId::new("sku-race").unwrap();

    let mut oversold = Vec::new();
    for round in 0..ROUNDS {
        let buyer = UserId::new(format!("buyer-{round}")).unwrap();
        let requests = (0..AT_ONCE).map(|_| {
            let (engine, sale, buyer) = (Arc::clone(&engine), sale.clone(), buyer.clone());
            tokio::spawn(async move {
                let wanted = vec![WantedItem {
                    sku: Some(SkuId::new("a").unwrap()),
                    quantity: 1,
                }];
                let purchase = Purchase::of_items(sale, buyer, wanted).unwrap();
                engine.purchase(&purchase).await.unwrap()
            })
        });
        let bought = futures::future::join_all(requests)
            .await
            .into_iter()
            .filter(|outcome| matches!(outcome, Ok(PurchaseOutcome::Purchased { .. })))
            .count();
        if bought != 1 {
            oversold.push((round, bought));
        }
    }
    assert!(
        oversold.is_empty(),
        "rounds where one buyer got other than one item of SKU a (round, items): {oversold:?}"
    );
}
