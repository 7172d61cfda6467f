//! The scenarios every engine must pass. Each takes a fresh [`Harness`].

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use stockade_core::{
    CreateOutcome, Engine, EngineError, Epoch, IdempotencyKey, Order, OrderId, OrderStatus,
    Purchase, PurchaseOutcome, ReleaseOutcome, SaleId, SaleSpec, SaleStatus, UserId,
};

pub use crate::batch_release::releases_in_one_call_are_each_decided_as_alone;
use crate::harness::Harness;

fn spec(id: &str, stock: u32, limit: u32) -> SaleSpec {
    SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap()
}

fn sale(id: &str) -> SaleId {
    SaleId::new(id).unwrap()
}

fn user(id: &str) -> UserId {
    UserId::new(id).unwrap()
}

async fn buy(engine: &dyn Engine, sale: &str, user: &str, quantity: u32) -> PurchaseOutcome {
    engine
        .purchase(&Purchase::new(sale, user, quantity).unwrap())
        .await
        .unwrap()
}

async fn buy_with_key(engine: &dyn Engine, sale: &str, user: &str, key: &str) -> PurchaseOutcome {
    let purchase = Purchase::new(sale, user, 1)
        .unwrap()
        .with_idempotency_key(key)
        .unwrap();
    engine.purchase(&purchase).await.unwrap()
}

/// What a crowd of concurrent purchases got.
#[derive(Debug, Default)]
struct CrowdResult {
    orders: Vec<OrderId>,
    sold_out: usize,
    others: Vec<PurchaseOutcome>,
}

/// Sends `purchases` all at once, each from its own task, and sorts the
/// answers.
async fn stampede(engine: &Arc<dyn Engine>, purchases: Vec<Purchase>) -> CrowdResult {
    let start = Arc::new(tokio::sync::Barrier::new(purchases.len()));
    let tasks: Vec<_> = purchases
        .into_iter()
        .map(|purchase| {
            let engine = Arc::clone(engine);
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                engine.purchase(&purchase).await.unwrap()
            })
        })
        .collect();
    let mut result = CrowdResult::default();
    for task in tasks {
        match task.await.unwrap() {
            PurchaseOutcome::Purchased { order_id, .. } => result.orders.push(order_id),
            PurchaseOutcome::SoldOut => result.sold_out += 1,
            other => result.others.push(other),
        }
    }
    result
}

fn distinct_buyers(sale: &str, count: usize) -> Vec<Purchase> {
    (0..count)
        .map(|i| Purchase::new(sale, format!("buyer-{i}"), 1).unwrap())
        .collect()
}

async fn remaining(engine: &dyn Engine, sale_id: &str) -> u32 {
    engine
        .snapshot(&sale(sale_id))
        .await
        .unwrap()
        .unwrap()
        .remaining
}

async fn crowd(h: &Harness, buyers: usize, stock: u32) {
    let id = format!("crowd-{buyers}-{stock}");
    h.engine.create_sale(&spec(&id, stock, 1)).await.unwrap();
    let result = stampede(&h.engine, distinct_buyers(&id, buyers)).await;
    let expected = buyers.min(stock as usize);
    assert_eq!(result.orders.len(), expected, "purchased");
    assert_eq!(result.sold_out, buyers - expected, "sold out");
    assert!(result.others.is_empty(), "unexpected: {:?}", result.others);
    let unique: HashSet<_> = result.orders.iter().collect();
    assert_eq!(unique.len(), expected, "order ids are unique");
    let snapshot = h.engine.snapshot(&sale(&id)).await.unwrap().unwrap();
    assert_eq!(snapshot.remaining, stock - expected as u32);
    assert_eq!(snapshot.sold, expected as u32);
}

pub async fn seed_100_buyers_for_100_items(h: &Harness) {
    crowd(h, 100, 100).await;
    let snapshot = h
        .engine
        .snapshot(&sale("crowd-100-100"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.status, SaleStatus::SoldOut);
}

pub async fn seed_150_buyers_for_100_items(h: &Harness) {
    crowd(h, 150, 100).await;
}

pub async fn crowd_of_10000_buyers_for_1000_items(h: &Harness) {
    crowd(h, 10_000, 1_000).await;
}

pub async fn a_buyer_asking_many_times_gets_one(h: &Harness) {
    h.engine.create_sale(&spec("dup", 10, 1)).await.unwrap();
    let same_buyer = (0..20)
        .map(|_| Purchase::new("dup", "greedy", 1).unwrap())
        .collect();
    let result = stampede(&h.engine, same_buyer).await;
    assert_eq!(result.orders.len(), 1);
    assert_eq!(result.others.len(), 19);
    assert!(
        result
            .others
            .iter()
            .all(|o| *o == PurchaseOutcome::LimitExceeded { already: 1 })
    );
    assert_eq!(remaining(h.engine.as_ref(), "dup").await, 9);
    assert_eq!(
        h.engine
            .purchased_by(&sale("dup"), &user("greedy"))
            .await
            .unwrap(),
        1
    );
}

pub async fn per_user_limit_above_one(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("limit3", 100, 3)).await.unwrap();
    assert!(matches!(
        buy(e, "limit3", "u", 2).await,
        PurchaseOutcome::Purchased { remaining: 98, .. }
    ));
    assert!(matches!(
        buy(e, "limit3", "u", 1).await,
        PurchaseOutcome::Purchased { remaining: 97, .. }
    ));
    assert_eq!(
        buy(e, "limit3", "u", 1).await,
        PurchaseOutcome::LimitExceeded { already: 3 }
    );
    assert_eq!(
        buy(e, "limit3", "v", 4).await,
        PurchaseOutcome::LimitExceeded { already: 0 }
    );
    assert_eq!(
        e.purchased_by(&sale("limit3"), &user("u")).await.unwrap(),
        3
    );
    assert_eq!(
        e.purchased_by(&sale("limit3"), &user("v")).await.unwrap(),
        0
    );
    // Concurrent requests of one buyer cannot get past the limit together.
    let burst = (0..30)
        .map(|_| Purchase::new("limit3", "w", 1).unwrap())
        .collect();
    let result = stampede(&h.engine, burst).await;
    assert_eq!(result.orders.len(), 3);
    assert_eq!(remaining(e, "limit3").await, 94);
}

pub async fn quantity_above_one_with_partial_availability(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("partial", 5, 10)).await.unwrap();
    assert!(matches!(
        buy(e, "partial", "a", 3).await,
        PurchaseOutcome::Purchased { remaining: 2, .. }
    ));
    assert_eq!(
        buy(e, "partial", "b", 3).await,
        PurchaseOutcome::InsufficientStock { remaining: 2 }
    );
    // The refused request changed nothing.
    assert_eq!(remaining(e, "partial").await, 2);
    assert_eq!(
        e.purchased_by(&sale("partial"), &user("b")).await.unwrap(),
        0
    );
    assert!(matches!(
        buy(e, "partial", "b", 2).await,
        PurchaseOutcome::Purchased { remaining: 0, .. }
    ));
    assert_eq!(buy(e, "partial", "c", 1).await, PurchaseOutcome::SoldOut);
}

pub async fn sale_window_opens_and_closes(h: &Harness) {
    let e = h.engine.as_ref();
    let now = h.clock_now();
    let window = SaleSpec::builder("window", 10)
        .unwrap()
        .starts_at(now + TimeDelta::minutes(5))
        .ends_at(now + TimeDelta::minutes(10))
        .build()
        .unwrap();
    e.create_sale(&window).await.unwrap();
    assert_eq!(
        buy(e, "window", "early", 1).await,
        PurchaseOutcome::NotStarted
    );
    let snapshot = e.snapshot(&sale("window")).await.unwrap().unwrap();
    assert_eq!(snapshot.status, SaleStatus::Upcoming);
    assert_eq!(snapshot.remaining, 10);

    h.clock.advance(TimeDelta::minutes(5));
    assert!(matches!(
        buy(e, "window", "on-time", 1).await,
        PurchaseOutcome::Purchased { .. }
    ));
    assert_eq!(
        e.snapshot(&sale("window")).await.unwrap().unwrap().status,
        SaleStatus::Open
    );

    h.clock.advance(TimeDelta::minutes(5));
    assert_eq!(buy(e, "window", "late", 1).await, PurchaseOutcome::Ended);
    let snapshot = e.snapshot(&sale("window")).await.unwrap().unwrap();
    assert_eq!(snapshot.status, SaleStatus::Ended);
    assert_eq!(snapshot.remaining, 9);
}

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

pub async fn release_and_double_release(h: &Harness) {
    let e = h.engine.as_ref();
    e.create_sale(&spec("release", 3, 2)).await.unwrap();
    let PurchaseOutcome::Purchased { order_id, .. } = buy(e, "release", "u", 2).await else {
        panic!("purchase must succeed");
    };
    assert_eq!(
        buy(e, "release", "u", 1).await,
        PurchaseOutcome::LimitExceeded { already: 2 }
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

fn order(
    sale_id: &str,
    user_id: &str,
    quantity: u32,
    status: OrderStatus,
    key: Option<&str>,
) -> Order {
    Order {
        id: OrderId::generate(),
        sale_id: sale(sale_id),
        user_id: user(user_id),
        quantity,
        idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
        status,
        created_at: Utc::now(),
        expires_at: None,
        epoch: Epoch::FIRST,
    }
}

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
        PurchaseOutcome::LimitExceeded { already: 2 }
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
        PurchaseOutcome::LimitExceeded { already: 1 }
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

pub async fn unknown_sale(h: &Harness) {
    let e = h.engine.as_ref();
    assert_eq!(buy(e, "nope", "u", 1).await, PurchaseOutcome::UnknownSale);
    assert!(e.snapshot(&sale("nope")).await.unwrap().is_none());
    assert_eq!(e.purchased_by(&sale("nope"), &user("u")).await.unwrap(), 0);
}

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

impl Harness {
    fn clock_now(&self) -> chrono::DateTime<Utc> {
        use stockade_core::Clock;
        self.clock.now()
    }
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

    let outbox = e.outbox(&sale("outbox")).await.unwrap();
    let ids: Vec<OrderId> = outbox.iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![first, second, third]);
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
