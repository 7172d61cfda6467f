//! Idempotency keys: replays, sequential and concurrent, and keys scoped to
//! their buyer.

use chrono::TimeDelta;
use stockade_core::{Purchase, PurchaseOutcome};

use super::helpers::{buy, buy_with_key, remaining, sale, spec, stampede, user};
use crate::harness::Harness;

pub async fn idempotent_replay_yields_the_same_order(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("idem", 10, 5)).await.unwrap();
    let PurchaseOutcome::Purchased { order_id, .. } = buy_with_key(e, "idem", "u", "k-1").await
    else {
        panic!("first purchase must succeed");
    };
    assert_eq!(
        buy_with_key(e, "idem", "u", "k-1").await,
        PurchaseOutcome::Duplicate { order_id }
    );
    assert_eq!(remaining(e, "idem").await, 9);
    assert_eq!(e.purchased_by(&sale("idem"), &user("u")).await.unwrap(), 1);
    // A replay wins over the window: it names the order, it does not buy.
    h.clock.advance(TimeDelta::days(365));
    assert_eq!(
        buy_with_key(e, "idem", "u", "k-1").await,
        PurchaseOutcome::Duplicate { order_id }
    );
    // A refused purchase does not consume its key.
    e.create_sale(&spec("idem-refused", 1, 1)).await.unwrap();
    buy(e, "idem-refused", "first", 1).await;
    assert_eq!(
        buy_with_key(e, "idem-refused", "u", "k-2").await,
        PurchaseOutcome::SoldOut
    );
    assert_eq!(
        buy_with_key(e, "idem-refused", "u", "k-2").await,
        PurchaseOutcome::SoldOut
    );
}

pub async fn concurrent_replays_yield_one_order(h: &Harness) {
    h.engine
        .create_sale(&spec("idem-burst", 100, 100))
        .await
        .unwrap();
    let replays = (0..25)
        .map(|_| {
            Purchase::new("idem-burst", "u", 1)
                .unwrap()
                .with_idempotency_key("same-key")
                .unwrap()
        })
        .collect();
    let result = stampede(&h.engine, replays).await;
    assert_eq!(result.orders.len(), 1, "{result:?}");
    let order_id = result.orders[0];
    assert_eq!(result.others.len(), 24);
    assert!(
        result
            .others
            .iter()
            .all(|o| *o == PurchaseOutcome::Duplicate { order_id })
    );
    assert_eq!(remaining(h.engine.as_ref(), "idem-burst").await, 99);
}

pub async fn keys_are_scoped_to_their_buyer(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("scoped-keys", 10, 5)).await.unwrap();
    let PurchaseOutcome::Purchased { order_id: a, .. } =
        buy_with_key(e, "scoped-keys", "alice", "k").await
    else {
        panic!("alice's purchase must succeed");
    };
    // Bob's key is his own, even when it is the same text.
    let PurchaseOutcome::Purchased { order_id: b, .. } =
        buy_with_key(e, "scoped-keys", "bob", "k").await
    else {
        panic!("bob's purchase with the same key text must succeed");
    };
    assert_ne!(a, b);
    assert_eq!(
        buy_with_key(e, "scoped-keys", "alice", "k").await,
        PurchaseOutcome::Duplicate { order_id: a }
    );
    assert_eq!(
        buy_with_key(e, "scoped-keys", "bob", "k").await,
        PurchaseOutcome::Duplicate { order_id: b }
    );
    assert_eq!(remaining(e, "scoped-keys").await, 8);
}
