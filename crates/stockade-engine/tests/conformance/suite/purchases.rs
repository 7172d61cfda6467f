//! Purchases: the seeds' crowds, repeat buyers, limits, quantities, the
//! sale window and unknown sales.

use std::collections::HashSet;

use chrono::TimeDelta;
use stockade_core::{Purchase, PurchaseOutcome, SaleSpec, SaleStatus};

use super::helpers::{buy, distinct_buyers, remaining, sale, spec, stampede, user};
use crate::harness::Harness;

async fn crowd(h: &Harness, buyers: usize, stock: u32) {
    let id = format!("crowd-{buyers}-{stock}");
    h.engine.create_sale(&spec(&id, stock, 1)).await.unwrap();
    let result = stampede(&h.engine, distinct_buyers(&id, buyers)).await;
    let expected = buyers.min(stock as usize);
    assert_eq!(result.orders.len(), expected, "purchased");
    assert_eq!(result.sold_out, buyers - expected, "sold out");
    assert!(result.others.is_empty(), "unexpected: {:?}", result.others);
    // Memory and Redis answer any crowd at once; a store engine's
    // purchases wait their turn for its connections, a bounded time, and
    // some buyers of a crowd this size may be told to retry.
    if h.store.is_none() {
        assert_eq!(result.retried, 0, "told to retry");
    } else if result.retried > 0 {
        eprintln!("{}: {} answers to retry", h.engine.name(), result.retried);
    }
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
    assert!(result.others.iter().all(|o| *o
        == PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        }));
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
        PurchaseOutcome::LimitExceeded {
            already: 3,
            sku: None
        }
    );
    assert_eq!(
        buy(e, "limit3", "v", 4).await,
        PurchaseOutcome::LimitExceeded {
            already: 0,
            sku: None
        }
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
        PurchaseOutcome::InsufficientStock {
            sku: stockade_core::SkuId::default_sku(),
            remaining: 2
        }
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

pub async fn unknown_sale(h: &Harness) {
    let e = h.engine.as_ref();
    assert_eq!(buy(e, "nope", "u", 1).await, PurchaseOutcome::UnknownSale);
    assert!(e.snapshot(&sale("nope")).await.unwrap().is_none());
    assert_eq!(e.purchased_by(&sale("nope"), &user("u")).await.unwrap(), 0);
}
