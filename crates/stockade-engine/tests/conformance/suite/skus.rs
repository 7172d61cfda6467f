//! Sales of several SKUs: each SKU's own stock, bundles taken all or
//! nothing (alone and under a crowd), the per-user and per-SKU limits, and
//! a rebuild that keeps all of it.

use std::sync::Arc;

use stockade_core::{
    Engine, EngineError, Epoch, Item, OrderId, OrderStatus, Purchase, PurchaseOutcome,
    ReleaseOutcome, SaleSpec, SaleStatus, SkuId, SkuSpec, WantedItem,
};

use super::helpers::{order, sale, user};
use crate::harness::Harness;

fn sku(id: &str) -> SkuId {
    SkuId::new(id).unwrap()
}

/// A sale of `skus` (id, stock) with the given limits.
fn spec(id: &str, skus: &[(&str, u32)], limit: u32, sku_limit: Option<u32>) -> SaleSpec {
    let skus = skus
        .iter()
        .map(|(id, stock)| SkuSpec {
            id: sku(id),
            stock: *stock,
        })
        .collect();
    let mut builder = SaleSpec::with_skus(id, skus)
        .unwrap()
        .per_user_limit(limit)
        .unwrap();
    if let Some(cap) = sku_limit {
        builder = builder.per_sku_limit(cap).unwrap();
    }
    builder.build().unwrap()
}

fn bundle(sale_id: &str, buyer: &str, items: &[(&str, u32)]) -> Purchase {
    let wanted = items
        .iter()
        .map(|(id, quantity)| WantedItem {
            sku: Some(sku(id)),
            quantity: *quantity,
        })
        .collect();
    Purchase::of_items(sale(sale_id), user(buyer), wanted).unwrap()
}

async fn buy(e: &dyn Engine, sale_id: &str, buyer: &str, items: &[(&str, u32)]) -> PurchaseOutcome {
    e.purchase(&bundle(sale_id, buyer, items)).await.unwrap()
}

/// Each SKU's remaining stock, in the spec's order.
async fn left(e: &dyn Engine, sale_id: &str) -> Vec<u32> {
    let snapshot = e.snapshot(&sale(sale_id)).await.unwrap().unwrap();
    snapshot.skus.iter().map(|sku| sku.remaining).collect()
}

fn bought(outcome: PurchaseOutcome) -> OrderId {
    match outcome {
        PurchaseOutcome::Purchased { order_id, .. } => order_id,
        other => panic!("expected a purchase, got {other:?}"),
    }
}

pub async fn skus_have_their_own_stock_and_the_sale_sells_out_with_the_last(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("sizes", &[("us-9", 2), ("us-10", 3)], 10, None))
        .await
        .unwrap();
    assert!(matches!(
        buy(e, "sizes", "a", &[("us-9", 2)]).await,
        PurchaseOutcome::Purchased { remaining: 3, .. }
    ));
    assert!(matches!(
        buy(e, "sizes", "probe", &[("us-10", 1)]).await,
        PurchaseOutcome::Purchased { remaining: 2, .. }
    ));
    // us-9 is gone, the sale is not.
    assert_eq!(
        buy(e, "sizes", "b", &[("us-9", 1)]).await,
        PurchaseOutcome::InsufficientStock {
            sku: sku("us-9"),
            remaining: 0
        }
    );
    let snapshot = e.snapshot(&sale("sizes")).await.unwrap().unwrap();
    assert_eq!(snapshot.status, SaleStatus::Open);
    assert_eq!(snapshot.remaining, 2);
    assert_eq!(snapshot.skus[0].status, SaleStatus::SoldOut);
    assert_eq!((snapshot.skus[0].sold, snapshot.skus[0].remaining), (2, 0));
    assert_eq!((snapshot.skus[1].sold, snapshot.skus[1].remaining), (1, 2));
    // A sale of several SKUs needs them named, and only its own.
    let unnamed = Purchase::new("sizes", "c", 1).unwrap();
    assert_eq!(
        e.purchase(&unnamed).await.unwrap(),
        PurchaseOutcome::SkuRequired
    );
    assert_eq!(
        buy(e, "sizes", "c", &[("us-11", 1)]).await,
        PurchaseOutcome::UnknownSku { sku: sku("us-11") }
    );
    bought(buy(e, "sizes", "c", &[("us-10", 2)]).await);
    assert_eq!(
        buy(e, "sizes", "d", &[("us-10", 1)]).await,
        PurchaseOutcome::SoldOut
    );
    let snapshot = e.snapshot(&sale("sizes")).await.unwrap().unwrap();
    assert_eq!(snapshot.status, SaleStatus::SoldOut);
    assert_eq!(snapshot.sold, 5);
}

pub async fn a_bundle_takes_every_item_or_none(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec(
        "console",
        &[("console", 3), ("controller", 2)],
        10,
        None,
    ))
    .await
    .unwrap();
    let pair = [("console", 1), ("controller", 1)];
    let first = bought(buy(e, "console", "a", &pair).await);
    bought(buy(e, "console", "b", &pair).await);
    assert_eq!(left(e, "console").await, [1, 0]);
    // The third pair is short of a controller: the console stays.
    assert_eq!(
        buy(e, "console", "c", &pair).await,
        PurchaseOutcome::InsufficientStock {
            sku: sku("controller"),
            remaining: 0
        }
    );
    assert_eq!(left(e, "console").await, [1, 0]);
    assert_eq!(
        e.purchased_by(&sale("console"), &user("c")).await.unwrap(),
        0
    );
    // Releasing a bundle returns every item of it.
    assert_eq!(
        e.release(&sale("console"), first, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::Released {
            quantity: 2,
            remaining: 3
        }
    );
    assert_eq!(left(e, "console").await, [2, 1]);
    bought(buy(e, "console", "c", &pair).await);
    assert_eq!(left(e, "console").await, [1, 0]);
}

pub async fn a_crowd_of_bundles_never_oversells_any_sku(h: &Harness) {
    let e: &Arc<dyn Engine> = &h.engine;
    let stock = [("a", 40), ("b", 25), ("c", 60)];
    e.create_sale(&spec("crowd-skus", &stock, 10, None))
        .await
        .unwrap();
    let shapes: [&[(&str, u32)]; 4] = [
        &[("a", 1), ("b", 1)],
        &[("b", 1), ("c", 2)],
        &[("a", 2)],
        &[("c", 1), ("a", 1), ("b", 1)],
    ];
    let start = Arc::new(tokio::sync::Barrier::new(400));
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let engine = Arc::clone(e);
            let start = Arc::clone(&start);
            let items = shapes[i % shapes.len()];
            let purchase = bundle("crowd-skus", &format!("buyer-{i}"), items);
            tokio::spawn(async move {
                start.wait().await;
                loop {
                    match engine.purchase(&purchase).await {
                        Ok(outcome) => return (purchase, outcome),
                        Err(error) if error.is_retryable() => {
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await
                        }
                        Err(error) => panic!("{error}"),
                    }
                }
            })
        })
        .collect();
    let mut sold = [0u32; 3];
    for task in tasks {
        let (purchase, outcome) = task.await.unwrap();
        match outcome {
            PurchaseOutcome::Purchased { .. } => {
                for item in purchase.items() {
                    let at = stock
                        .iter()
                        .position(|(id, _)| Some(sku(id)) == item.sku)
                        .unwrap();
                    sold[at] += item.quantity;
                }
            }
            PurchaseOutcome::InsufficientStock { .. } | PurchaseOutcome::SoldOut => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let remaining = left(e.as_ref(), "crowd-skus").await;
    for (i, (id, total)) in stock.iter().enumerate() {
        assert!(
            sold[i] <= *total,
            "SKU {id} oversold: {} of {total}",
            sold[i]
        );
        assert_eq!(remaining[i], total - sold[i], "SKU {id}");
    }
    // 400 buyers want far more than there is: every SKU some bundle needs
    // first runs out.
    assert!(remaining.contains(&0), "{remaining:?}");
}

pub async fn the_per_user_limit_spans_skus_and_the_per_sku_limit_caps_each(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("limits", &[("a", 10), ("b", 10)], 3, Some(2)))
        .await
        .unwrap();
    let two_a = bought(buy(e, "limits", "u", &[("a", 2)]).await);
    assert_eq!(
        buy(e, "limits", "u", &[("a", 1)]).await,
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: Some(sku("a"))
        }
    );
    bought(buy(e, "limits", "u", &[("b", 1)]).await);
    assert_eq!(
        buy(e, "limits", "u", &[("b", 1)]).await,
        PurchaseOutcome::LimitExceeded {
            already: 3,
            sku: None
        }
    );
    assert_eq!(
        e.purchased_by(&sale("limits"), &user("u")).await.unwrap(),
        3
    );
    // A release gives the allowance of each SKU back.
    e.release(&sale("limits"), two_a, Epoch::FIRST)
        .await
        .unwrap();
    bought(buy(e, "limits", "u", &[("a", 1), ("b", 1)]).await);
    assert_eq!(
        buy(e, "limits", "u", &[("b", 1)]).await,
        PurchaseOutcome::LimitExceeded {
            already: 3,
            sku: None
        }
    );
    // Another buyer is not touched by the first one's holdings.
    bought(buy(e, "limits", "v", &[("a", 2)]).await);
}

pub async fn skus_are_part_of_the_sale_spec(h: &Harness) {
    let e = h.engine.as_ref();
    let sizes = spec("spec-skus", &[("s", 1), ("m", 2)], 1, Some(1));
    e.create_sale(&sizes).await.unwrap();
    assert_eq!(
        e.create_sale(&sizes).await.unwrap(),
        stockade_core::CreateOutcome::AlreadyExists
    );
    for other in [
        spec("spec-skus", &[("s", 1), ("m", 3)], 1, Some(1)),
        spec("spec-skus", &[("m", 2), ("s", 1)], 1, Some(1)),
        spec("spec-skus", &[("s", 1), ("m", 2)], 1, None),
    ] {
        match e.create_sale(&other).await {
            Err(EngineError::SaleConflict { existing, .. }) => assert_eq!(*existing, sizes),
            answer => panic!("{other:?}: expected a conflict, got {answer:?}"),
        }
    }
    let snapshot = e.snapshot(&sale("spec-skus")).await.unwrap().unwrap();
    assert_eq!(snapshot.spec, sizes);
    // A one-SKU sale takes its SKU by name or unnamed.
    e.create_sale(&spec("one-sku", &[("only", 5)], 5, None))
        .await
        .unwrap();
    bought(buy(e, "one-sku", "u", &[("only", 2)]).await);
    bought(
        e.purchase(&Purchase::new("one-sku", "u", 2).unwrap())
            .await
            .unwrap(),
    );
    assert_eq!(
        e.purchase(&Purchase::new("one-sku", "v", 2).unwrap())
            .await
            .unwrap(),
        PurchaseOutcome::InsufficientStock {
            sku: sku("only"),
            remaining: 1
        }
    );
}

pub async fn rebuild_keeps_skus_bundles_and_per_sku_holdings(h: &Harness) {
    let e = h.engine.as_ref();
    let shoes = spec("rebuilt-skus", &[("a", 3), ("b", 3)], 4, Some(2));
    e.create_sale(&shoes).await.unwrap();
    let with_items = |buyer: &str, items: &[(&str, u32)], status| {
        let mut o = order("rebuilt-skus", buyer, 0, status, None);
        o.items = items
            .iter()
            .map(|(id, quantity)| Item {
                sku: sku(id),
                quantity: *quantity,
            })
            .collect();
        o.quantity = o.items.iter().map(|item| item.quantity).sum();
        o
    };
    let pair = with_items("u", &[("a", 1), ("b", 1)], OrderStatus::Confirmed);
    let two_b = with_items("v", &[("b", 2)], OrderStatus::Held);
    let gone = with_items("u", &[("a", 1)], OrderStatus::Cancelled);
    let snapshot = e
        .rebuild(&shoes, Epoch::new(2), &[pair.clone(), two_b, gone])
        .await
        .unwrap();
    assert_eq!(
        snapshot
            .skus
            .iter()
            .map(|s| s.remaining)
            .collect::<Vec<_>>(),
        [2, 0]
    );
    assert_eq!(snapshot.remaining, 2);
    let at = |p: Purchase| p.at_epoch(Epoch::new(2));
    // v holds 2 of b: the per-SKU limit came back with the orders.
    assert!(matches!(
        e.purchase(&at(bundle("rebuilt-skus", "v", &[("a", 1)])))
            .await
            .unwrap(),
        PurchaseOutcome::Purchased { remaining: 1, .. }
    ));
    assert_eq!(
        e.purchase(&at(bundle("rebuilt-skus", "v", &[("b", 1)])))
            .await
            .unwrap(),
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: Some(sku("b"))
        }
    );
    assert_eq!(
        e.purchase(&at(bundle("rebuilt-skus", "u", &[("a", 2)])))
            .await
            .unwrap(),
        PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: Some(sku("a"))
        }
    );
    // The bundle releases both its items.
    assert_eq!(
        e.release(&sale("rebuilt-skus"), pair.id, Epoch::new(2))
            .await
            .unwrap(),
        ReleaseOutcome::Released {
            quantity: 2,
            remaining: 3
        }
    );
    assert_eq!(left(e, "rebuilt-skus").await, [2, 1]);
    // An order of a SKU the sale does not have is refused.
    let stray = with_items("w", &[("z", 1)], OrderStatus::Confirmed);
    assert!(matches!(
        e.rebuild(&shoes, Epoch::new(3), &[stray]).await,
        Err(EngineError::InconsistentRebuild { .. })
    ));
    // So is one holding more of a SKU than it has.
    let over = with_items("w", &[("b", 2)], OrderStatus::Confirmed);
    let over2 = with_items("x", &[("b", 2)], OrderStatus::Confirmed);
    assert!(matches!(
        e.rebuild(&shoes, Epoch::new(3), &[over, over2]).await,
        Err(EngineError::InconsistentRebuild { .. })
    ));
}
