//! Epochs fencing purchases, releases and rebuilds.

use stockade_core::{EngineError, Epoch, OrderStatus, Purchase, PurchaseOutcome, ReleaseOutcome};

use super::helpers::{order, sale, spec};
use crate::harness::Harness;

pub async fn epochs_fence_purchases_releases_and_rebuilds(h: &Harness) {
    let e = h.engine.as_ref();
    let fenced = spec("fenced", 10, 5);
    e.create_sale(&fenced).await.unwrap();
    let id = sale("fenced");
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::FIRST));
    let at = |epoch: u64| {
        Purchase::new("fenced", "u", 1)
            .unwrap()
            .at_epoch(Epoch::new(epoch))
    };
    // A purchase under another epoch changes nothing.
    assert_eq!(
        e.purchase(&at(2)).await.unwrap(),
        PurchaseOutcome::WrongEpoch {
            engine: Epoch::FIRST
        }
    );
    let PurchaseOutcome::Purchased { order_id, .. } = e.purchase(&at(1)).await.unwrap() else {
        panic!("a purchase under the sale's epoch must succeed");
    };
    assert_eq!(
        e.release(&id, order_id, Epoch::new(2)).await.unwrap(),
        ReleaseOutcome::WrongEpoch {
            engine: Epoch::FIRST
        }
    );
    // Closed: nothing sells, the outbox stays readable.
    assert_eq!(e.close(&id).await.unwrap(), Some(Epoch::FIRST));
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::CLOSED));
    assert_eq!(
        e.purchase(&at(1)).await.unwrap(),
        PurchaseOutcome::WrongEpoch {
            engine: Epoch::CLOSED
        }
    );
    let outbox = e.outbox(&id).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].epoch, Epoch::FIRST);
    // A rebuild opens it under its epoch; an older rebuild is refused.
    let committed = order("fenced", "u", 1, OrderStatus::Confirmed, None);
    let snapshot = e
        .rebuild(&fenced, Epoch::new(3), std::slice::from_ref(&committed))
        .await
        .unwrap();
    assert_eq!(snapshot.remaining, 9);
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::new(3)));
    assert!(e.outbox(&id).await.unwrap().is_empty());
    assert!(matches!(
        e.rebuild(&fenced, Epoch::new(2), &[]).await,
        Err(EngineError::Superseded { newer, .. }) if newer == Epoch::new(3)
    ));
    // Even after another close, the newest epoch is remembered.
    e.close(&id).await.unwrap();
    assert!(matches!(
        e.rebuild(&fenced, Epoch::new(2), &[]).await,
        Err(EngineError::Superseded { .. })
    ));
    e.rebuild(&fenced, Epoch::new(4), &[committed])
        .await
        .unwrap();
    assert!(matches!(
        e.purchase(&at(4)).await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 8, .. }
    ));
    assert_eq!(
        e.close(&sale("no-such-sale")).await.unwrap(),
        None,
        "closing an unknown sale"
    );
    assert_eq!(e.epoch(&sale("no-such-sale")).await.unwrap(), None);
}
