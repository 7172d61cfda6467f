//! What an engine says of its durability, and what the store engines
//! ([`stockade_core::Durability::Committed`]) promise with it.

use std::time::Duration;

use stockade_core::{
    Durability, Epoch, IdempotencyKey, OrderStatus, Purchase, PurchaseOutcome, ReleaseOutcome,
    SaleSpec,
};

use super::helpers::{buy, remaining, sale, spec, user};
use crate::harness::Harness;

/// Memory and Redis keep their own stock, whose orders wait in an outbox
/// for the store; the store engines commit before they answer.
pub async fn durability_is_reported_for_each_engine(h: &Harness) {
    let expected = match h.engine.name() {
        "memory" | "redis" => Durability::Outbox,
        "postgres" | "sqlite" => Durability::Committed,
        other => panic!("no durability is expected of an engine named {other}"),
    };
    assert_eq!(h.engine.durability(), expected, "{}", h.engine.name());
    assert_eq!(
        h.store.is_some(),
        expected == Durability::Committed,
        "only the store engines decide in a store"
    );
}

/// A store engine's accepted purchase is in the store when the engine
/// answers; its outbox is always empty; a release is the store's cancel;
/// and there is nothing to close or rebuild.
pub async fn an_accepted_purchase_is_committed_when_answered(h: &Harness) {
    let store = h
        .store
        .as_ref()
        .expect("a store engine's harness has its store");
    let e = h.engine.as_ref();
    assert_eq!(e.durability(), Durability::Committed);
    let id = sale("committed");
    let committed = spec("committed", 5, 2);
    e.create_sale(&committed).await.unwrap();
    let purchase = Purchase::new("committed", "alice", 2)
        .unwrap()
        .with_idempotency_key("alice-1")
        .unwrap();
    let PurchaseOutcome::Purchased {
        order_id,
        remaining: 3,
    } = e.purchase(&purchase).await.unwrap()
    else {
        panic!("the purchase must succeed");
    };

    // Committed before the answer: the store holds the order, confirmed.
    let order = store
        .order(order_id)
        .await
        .unwrap()
        .expect("the store holds the order the engine answered with");
    assert_eq!(order.sale_id, id);
    assert_eq!(order.user_id, user("alice"));
    assert_eq!(order.quantity, 2);
    assert_eq!(
        order.idempotency_key,
        Some(IdempotencyKey::new("alice-1").unwrap())
    );
    assert_eq!(order.status, OrderStatus::Confirmed);
    assert_eq!(order.expires_at, None);
    assert_eq!(order.epoch, Epoch::FIRST);
    assert_eq!(
        order.created_at.timestamp_millis(),
        h.clock_now().timestamp_millis(),
        "made at the engine's clock"
    );
    assert_eq!(store.sale_state(&id).await.unwrap().unwrap().sold, 2);
    // Nothing waits for the store: the outbox is empty, acknowledging is
    // harmless.
    assert!(e.outbox(&id).await.unwrap().is_empty());
    e.acknowledge(&id, &[order_id]).await.unwrap();
    // A refusal commits nothing.
    assert_eq!(
        buy(e, "committed", "alice", 1).await,
        PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: None
        }
    );
    assert_eq!(store.orders_of_sale(&id, None, 100).await.unwrap().len(), 1);

    // A release cancels the order in the store and gives the stock back,
    // once.
    assert_eq!(
        e.release(&id, order_id, Epoch::FIRST).await.unwrap(),
        ReleaseOutcome::Released {
            quantity: 2,
            remaining: 5
        }
    );
    assert_eq!(
        store.order(order_id).await.unwrap().unwrap().status,
        OrderStatus::Cancelled
    );
    assert_eq!(store.sale_state(&id).await.unwrap().unwrap().sold, 0);
    assert_eq!(remaining(e, "committed").await, 5);
    assert_eq!(e.purchased_by(&id, &user("alice")).await.unwrap(), 0);
    assert_eq!(
        e.release(&id, order_id, Epoch::FIRST).await.unwrap(),
        ReleaseOutcome::AlreadyReleased
    );
    assert_eq!(remaining(e, "committed").await, 5);
    // The key still names the cancelled order.
    assert_eq!(
        e.purchase(&purchase).await.unwrap(),
        PurchaseOutcome::Duplicate { order_id }
    );

    // Under a payment hold the order is committed held, until the hold's
    // end.
    let held_spec = SaleSpec::builder("held", 3)
        .unwrap()
        .hold(Duration::from_secs(600))
        .unwrap()
        .build()
        .unwrap();
    e.create_sale(&held_spec).await.unwrap();
    let PurchaseOutcome::Purchased { order_id: held, .. } = buy(e, "held", "bob", 1).await else {
        panic!("the purchase must succeed");
    };
    let order = store.order(held).await.unwrap().unwrap();
    assert_eq!(order.status, OrderStatus::Held);
    assert_eq!(
        order.expires_at,
        Some(order.created_at + chrono::TimeDelta::seconds(600))
    );
    assert!(e.outbox(&sale("held")).await.unwrap().is_empty());

    // Nothing to close or rebuild: both fail, saying so, and change
    // nothing.
    for error in [
        e.close(&id).await.unwrap_err(),
        e.rebuild(&committed, Epoch::new(2), &[]).await.unwrap_err(),
    ] {
        assert!(
            error.to_string().contains("nothing to close or rebuild"),
            "{error}"
        );
        assert!(!error.is_retryable(), "{error}");
    }
    assert_eq!(e.epoch(&id).await.unwrap(), Some(Epoch::FIRST));
    assert!(matches!(
        buy(e, "committed", "carol", 1).await,
        PurchaseOutcome::Purchased { remaining: 4, .. }
    ));
}
