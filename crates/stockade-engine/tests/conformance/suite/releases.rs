//! Releasing an order, and releasing it twice.

use std::sync::Arc;

use stockade_core::{Epoch, OrderId, PurchaseOutcome, ReleaseOutcome};

use super::helpers::{buy, remaining, sale, spec, user};
use crate::harness::Harness;

pub async fn release_and_double_release(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("release", 3, 2)).await.unwrap();
    let PurchaseOutcome::Purchased { order_id, .. } = buy(e, "release", "u", 2).await else {
        panic!("purchase must succeed");
    };
    assert_eq!(
        buy(e, "release", "u", 1).await,
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: None
        }
    );
    assert_eq!(
        e.release(&sale("release"), order_id, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::Released {
            quantity: 2,
            remaining: 3
        }
    );
    assert_eq!(
        e.purchased_by(&sale("release"), &user("u")).await.unwrap(),
        0
    );
    assert_eq!(
        e.release(&sale("release"), order_id, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::AlreadyReleased
    );
    assert_eq!(remaining(e, "release").await, 3);
    // The allowance came back with the stock.
    assert!(matches!(
        buy(e, "release", "u", 2).await,
        PurchaseOutcome::Purchased { remaining: 1, .. }
    ));
    assert_eq!(
        e.release(&sale("release"), OrderId::generate(), Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::UnknownOrder
    );
    assert_eq!(
        e.release(&sale("no-such-sale"), order_id, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::UnknownSale
    );

    // Many concurrent releases of one order return its items once.
    let PurchaseOutcome::Purchased { order_id, .. } = buy(e, "release", "v", 1).await else {
        panic!("purchase must succeed");
    };
    assert_eq!(remaining(e, "release").await, 0);
    let releases: Vec<_> = (0..20)
        .map(|_| {
            let engine = Arc::clone(&h.engine);
            tokio::spawn(async move {
                engine
                    .release(&sale("release"), order_id, Epoch::FIRST)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut released = 0;
    for task in releases {
        match task.await.unwrap() {
            ReleaseOutcome::Released { quantity: 1, .. } => released += 1,
            ReleaseOutcome::AlreadyReleased => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(released, 1);
    assert_eq!(remaining(e, "release").await, 1);
}
