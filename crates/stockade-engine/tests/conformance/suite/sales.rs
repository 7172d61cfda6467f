//! A sale's life in the engine: creating it, its outbox, retiring it.

use chrono::TimeDelta;
use stockade_core::{
    CreateOutcome, EngineError, Epoch, IdempotencyKey, OrderId, OrderStatus, Purchase,
    PurchaseOutcome, ReleaseOutcome, SaleSpec,
};

use super::helpers::{buy, remaining, sale, spec, user};
use crate::harness::Harness;

pub async fn create_sale_is_idempotent_and_detects_conflicts(h: &Harness) {
    let e = h.engine.as_ref();
    let now = h.clock_now();
    let original = SaleSpec::builder("create", 50)
        .unwrap()
        .per_user_limit(2)
        .unwrap()
        .starts_at(now)
        .ends_at(now + TimeDelta::hours(1))
        .hold(std::time::Duration::from_secs(600))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        e.create_sale(&original).await.unwrap(),
        CreateOutcome::Created
    );
    assert!(matches!(
        buy(e, "create", "u", 1).await,
        PurchaseOutcome::Purchased { .. }
    ));
    assert_eq!(
        e.create_sale(&original).await.unwrap(),
        CreateOutcome::AlreadyExists
    );
    // Re-creating did not refill the stock.
    assert_eq!(remaining(e, "create").await, 49);
    let different = spec("create", 60, 2);
    match e.create_sale(&different).await {
        Err(EngineError::SaleConflict { sale_id, existing }) => {
            assert_eq!(sale_id, sale("create"));
            assert_eq!(*existing, original);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let snapshot = e.snapshot(&sale("create")).await.unwrap().unwrap();
    assert_eq!(snapshot.spec, original);
}

pub async fn outbox_holds_accepted_orders_until_acknowledged(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("outbox", 10, 5)).await.unwrap();
    let purchase = Purchase::new("outbox", "alice", 2)
        .unwrap()
        .with_idempotency_key("alice-1")
        .unwrap();
    let PurchaseOutcome::Purchased {
        order_id: first, ..
    } = e.purchase(&purchase).await.unwrap()
    else {
        panic!("purchase must succeed");
    };
    let PurchaseOutcome::Purchased {
        order_id: second, ..
    } = buy(e, "outbox", "bob", 1).await
    else {
        panic!("purchase must succeed");
    };
    let PurchaseOutcome::Purchased {
        order_id: third, ..
    } = buy(e, "outbox", "carol", 1).await
    else {
        panic!("purchase must succeed");
    };
    // Refusals never reach the outbox.
    buy(e, "outbox", "bob", 5).await;

    let mut outbox = e.outbox(&sale("outbox")).await.unwrap();
    let mut ids: Vec<OrderId> = outbox.iter().map(|o| o.id).collect();
    let mut expected = vec![first, second, third];
    if h.sharded {
        // Oldest first by the millisecond only (see `sharded.rs`).
        assert!(
            outbox
                .windows(2)
                .all(|w| w[0].created_at <= w[1].created_at)
        );
        outbox.sort_by_key(|o| expected.iter().position(|id| *id == o.id));
        ids.sort_unstable();
        expected.sort_unstable();
    }
    assert_eq!(ids, expected);
    let alice = &outbox[0];
    assert_eq!(alice.user_id, user("alice"));
    assert_eq!(alice.quantity, 2);
    assert_eq!(
        alice.idempotency_key,
        Some(IdempotencyKey::new("alice-1").unwrap())
    );
    assert_eq!(alice.status, OrderStatus::Confirmed);
    assert!((alice.created_at - h.clock_now()).num_seconds().abs() < 5);

    // Acknowledged orders leave; so do released ones (never to be committed).
    e.acknowledge(&sale("outbox"), &[first, OrderId::generate()])
        .await
        .unwrap();
    e.release(&sale("outbox"), second, Epoch::FIRST)
        .await
        .unwrap();
    let ids: Vec<OrderId> = e
        .outbox(&sale("outbox"))
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(ids, vec![third]);
    // Acknowledging twice is harmless.
    e.acknowledge(&sale("outbox"), &[first, third])
        .await
        .unwrap();
    assert!(e.outbox(&sale("outbox")).await.unwrap().is_empty());
    // Acknowledged orders can still be released (cancelled) later.
    assert!(matches!(
        e.release(&sale("outbox"), first, Epoch::FIRST)
            .await
            .unwrap(),
        ReleaseOutcome::Released { quantity: 2, .. }
    ));

    // A rebuild empties the outbox.
    buy(e, "outbox", "dave", 1).await;
    assert_eq!(e.outbox(&sale("outbox")).await.unwrap().len(), 1);
    e.rebuild(&spec("outbox", 10, 5), Epoch::FIRST, &[])
        .await
        .unwrap();
    assert!(e.outbox(&sale("outbox")).await.unwrap().is_empty());
    assert!(e.outbox(&sale("never-created")).await.unwrap().is_empty());
}

/// `retire` with zero drops the sale's state (the engine answers as for a
/// sale it never had); other sales are untouched.
pub async fn a_retired_sale_is_forgotten(h: &Harness) {
    let engine = h.engine.as_ref();
    engine.create_sale(&spec("gone", 10, 2)).await.unwrap();
    engine.create_sale(&spec("kept", 10, 2)).await.unwrap();
    assert!(matches!(
        buy(engine, "gone", "alice", 1).await,
        PurchaseOutcome::Purchased { .. }
    ));
    engine
        .retire(&sale("gone"), std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(
        engine.snapshot(&sale("gone")).await.unwrap().is_some(),
        "a sale retired later is still there"
    );
    engine
        .retire(&sale("gone"), std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(engine.snapshot(&sale("gone")).await.unwrap().is_none());
    assert!(engine.outbox(&sale("gone")).await.unwrap().is_empty());
    assert_eq!(
        buy(engine, "gone", "bob", 1).await,
        PurchaseOutcome::UnknownSale
    );
    assert_eq!(
        engine
            .snapshot(&sale("kept"))
            .await
            .unwrap()
            .unwrap()
            .remaining,
        10
    );
}
