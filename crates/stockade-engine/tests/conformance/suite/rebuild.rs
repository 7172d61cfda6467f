//! Rebuilding an engine from the committed orders, and refusing
//! inconsistent ones.

use stockade_core::{EngineError, Epoch, OrderStatus, PurchaseOutcome, ReleaseOutcome};

use super::helpers::{buy, buy_with_key, order, remaining, sale, spec, user};
use crate::harness::Harness;

pub async fn rebuild_from_committed_orders(h: &Harness) {
    let e = h.engine.as_ref();
    let sale_spec = spec("rebuilt", 10, 3);
    e.create_sale(&sale_spec).await.unwrap();
    // State the store never saw: it must vanish on rebuild.
    for i in 0..5 {
        buy(e, "rebuilt", &format!("uncommitted-{i}"), 1).await;
    }
    let live = order(
        "rebuilt",
        "alice",
        2,
        OrderStatus::Confirmed,
        Some("alice-key"),
    );
    let held = order("rebuilt", "bob", 1, OrderStatus::Held, None);
    let cancelled = order(
        "rebuilt",
        "carol",
        3,
        OrderStatus::Cancelled,
        Some("carol-key"),
    );
    let committed = vec![live.clone(), held.clone(), cancelled.clone()];

    let snapshot = e
        .rebuild(&sale_spec, Epoch::FIRST, &committed)
        .await
        .unwrap();
    assert_eq!(snapshot.remaining, 7);
    assert_eq!(snapshot.sold, 3);
    assert_eq!(remaining(e, "rebuilt").await, 7);
    assert_eq!(
        e.purchased_by(&sale("rebuilt"), &user("alice"))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        e.purchased_by(&sale("rebuilt"), &user("carol"))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        e.purchased_by(&sale("rebuilt"), &user("uncommitted-0"))
            .await
            .unwrap(),
        0
    );
    // Keys survive, including those of cancelled orders.
    assert_eq!(
        buy_with_key(e, "rebuilt", "alice", "alice-key").await,
        PurchaseOutcome::Duplicate { order_id: live.id }
    );
    assert_eq!(
        buy_with_key(e, "rebuilt", "carol", "carol-key").await,
        PurchaseOutcome::Duplicate {
            order_id: cancelled.id
        }
    );
    // Limits come from the rebuilt holdings.
    assert_eq!(
        buy(e, "rebuilt", "alice", 2).await,
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: None
        }
    );
    // Live orders can be released once; cancelled ones not again.
    assert_eq!(
        e.release(&sale("rebuilt"), held.id, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::Released {
            quantity: 1,
            remaining: 8
        }
    );
    assert_eq!(
        e.release(&sale("rebuilt"), cancelled.id, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::AlreadyReleased
    );

    // An engine that lost the sale entirely gets it back from the store.
    let lost_spec = spec("lost", 4, 1);
    let lost_order = order("lost", "dave", 1, OrderStatus::Confirmed, None);
    let snapshot = e
        .rebuild(&lost_spec, Epoch::FIRST, &[lost_order])
        .await
        .unwrap();
    assert_eq!(snapshot.remaining, 3);
    assert_eq!(
        buy(e, "lost", "dave", 1).await,
        PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        }
    );
    assert!(matches!(
        buy(e, "lost", "erin", 1).await,
        PurchaseOutcome::Purchased { remaining: 2, .. }
    ));
}

pub async fn rebuild_refuses_inconsistent_orders(h: &Harness) {
    let e = h.engine.as_ref();
    let sale_spec = spec("strict", 2, 1);
    e.create_sale(&sale_spec).await.unwrap();
    buy(e, "strict", "kept", 1).await;
    let oversold = vec![
        order("strict", "a", 1, OrderStatus::Confirmed, None),
        order("strict", "b", 1, OrderStatus::Confirmed, None),
        order("strict", "c", 1, OrderStatus::Confirmed, None),
    ];
    let err = e
        .rebuild(&sale_spec, Epoch::FIRST, &oversold)
        .await
        .unwrap_err();
    assert!(
        matches!(err, EngineError::InconsistentRebuild { .. }),
        "{err}"
    );
    assert!(!err.is_retryable());
    let foreign = vec![order("other", "a", 1, OrderStatus::Confirmed, None)];
    assert!(e.rebuild(&sale_spec, Epoch::FIRST, &foreign).await.is_err());
    // Nothing changed.
    assert_eq!(remaining(e, "strict").await, 1);
    assert_eq!(
        e.purchased_by(&sale("strict"), &user("kept"))
            .await
            .unwrap(),
        1
    );
}
