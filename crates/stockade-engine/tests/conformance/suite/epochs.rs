//! Epochs fencing purchases and releases (every engine), and closing and
//! rebuilding (the engines with an outbox).

use stockade_core::{EngineError, Epoch, OrderStatus, Purchase, PurchaseOutcome, ReleaseOutcome};

use super::helpers::{order, remaining, sale, spec, user};
use crate::harness::Harness;

fn at(sale: &str, epoch: u64) -> Purchase {
    Purchase::new(sale, "u", 1)
        .unwrap()
        .at_epoch(Epoch::new(epoch))
}

/// A purchase or a release under another epoch than the sale's changes
/// nothing; under the sale's own epoch it goes through.
pub async fn epochs_fence_purchases_and_releases(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("fenced", 10, 5)).await.unwrap();
    let id = sale("fenced");
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::FIRST));
    assert_eq!(
        e.purchase(&at("fenced", 2)).await.unwrap(),
        PurchaseOutcome::WrongEpoch {
            engine: Epoch::FIRST
        }
    );
    assert_eq!(remaining(e, "fenced").await, 10);
    let PurchaseOutcome::Purchased { order_id, .. } = e.purchase(&at("fenced", 1)).await.unwrap()
    else {
        panic!("a purchase under the sale's epoch must succeed");
    };
    assert_eq!(
        e.release(&id, order_id, Epoch::new(2)).await.unwrap(),
        ReleaseOutcome::WrongEpoch {
            engine: Epoch::FIRST
        }
    );
    assert_eq!(remaining(e, "fenced").await, 9);
    assert_eq!(e.purchased_by(&id, &user("u")).await.unwrap(), 1);
    assert_eq!(
        e.release(&id, order_id, Epoch::FIRST).await.unwrap(),
        ReleaseOutcome::Released {
            quantity: 1,
            remaining: 10
        }
    );
    assert_eq!(e.epoch(&sale("no-such-sale")).await.unwrap(), None);
}

/// A closed sale sells nothing and keeps its outbox readable; a rebuild
/// opens it under its epoch, and an older rebuild is refused.
pub async fn close_and_rebuild_are_fenced_by_epochs(h: &Harness) {
    let e = h.engine.as_ref();
    let fenced = spec("fenced", 10, 5);
    e.create_sale(&fenced).await.unwrap();
    let id = sale("fenced");
    assert!(matches!(
        e.purchase(&at("fenced", 1)).await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));
    // Closed: nothing sells, the outbox stays readable.
    assert_eq!(e.close(&id).await.unwrap(), Some(Epoch::FIRST));
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::CLOSED));
    assert_eq!(
        e.purchase(&at("fenced", 1)).await.unwrap(),
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
        e.purchase(&at("fenced", 4)).await.unwrap(),
        PurchaseOutcome::Purchased { remaining: 8, .. }
    ));
    assert_eq!(
        e.close(&sale("no-such-sale")).await.unwrap(),
        None,
        "closing an unknown sale"
    );
}
