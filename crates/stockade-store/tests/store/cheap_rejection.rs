//! docs/design.md invariant 6, cheap rejection, on the store engine
//! ([`StoreEngine`]) on PostgreSQL: a buyer turned away is answered from an
//! unlocked read and costs no write. Measured by the WAL position, which
//! any row lock, transaction id or commit record would move.

use std::sync::Arc;

use chrono::TimeDelta;
use sqlx::Row;
use sqlx::postgres::PgPool;
use stockade_core::{
    Clock, Engine, Epoch, OrderId, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock,
};
use stockade_store::{OrderStore, StoreEngine};
use stockade_test_support::PostgresServer;

async fn wal_position(pool: &PgPool) -> i64 {
    sqlx::query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS lsn")
        .fetch_one(pool)
        .await
        .unwrap()
        .get("lsn")
}

fn purchase(sale: &str, user: &str, quantity: u32) -> Purchase {
    Purchase::new(sale, user, quantity).unwrap()
}

fn sale(id: &str, stock: u32, limit: u32) -> SaleSpec {
    SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap()
}

/// A purchase with an idempotency key.
fn keyed() -> Purchase {
    purchase("open", "keeper", 1)
        .with_idempotency_key("k")
        .unwrap()
}

/// Every refusal a buyer can get, with what it must be; `replayed` is the
/// order of [`keyed`].
fn refusals(replayed: OrderId) -> Vec<(Purchase, PurchaseOutcome)> {
    vec![
        (purchase("gone", "late", 1), PurchaseOutcome::SoldOut),
        (
            purchase("gone", "first", 1),
            PurchaseOutcome::LimitExceeded {
                already: 1,
                sku: None,
            },
        ),
        (
            purchase("open", "greedy", 4),
            PurchaseOutcome::InsufficientStock {
                sku: stockade_core::SkuId::default_sku(),
                remaining: 3,
            },
        ),
        (purchase("later", "early", 1), PurchaseOutcome::NotStarted),
        (purchase("over", "late", 1), PurchaseOutcome::Ended),
        (
            purchase("open", "stale", 1).at_epoch(Epoch::new(2)),
            PurchaseOutcome::WrongEpoch {
                engine: Epoch::FIRST,
            },
        ),
        (purchase("nowhere", "lost", 1), PurchaseOutcome::UnknownSale),
        (keyed(), PurchaseOutcome::Duplicate { order_id: replayed }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_buyers_write_nothing() {
    let server = PostgresServer::start().unwrap();
    let url = server.fresh_database().await.unwrap();
    let store = OrderStore::open(&url).await.unwrap();
    let engine = StoreEngine::new(store.clone(), Arc::new(SystemClock));
    // The WAL position is read beside the store, on a pool of its own.
    let watcher = PgPool::connect(&url).await.unwrap();
    let now = SystemClock.now();
    engine.create_sale(&sale("gone", 1, 1)).await.unwrap();
    engine.create_sale(&sale("open", 4, 5)).await.unwrap();
    let window = |id, from: i64, to: i64| {
        SaleSpec::builder(id, 10)
            .unwrap()
            .starts_at(now + TimeDelta::hours(from))
            .ends_at(now + TimeDelta::hours(to))
            .build()
            .unwrap()
    };
    engine.create_sale(&window("later", 1, 2)).await.unwrap();
    engine.create_sale(&window("over", -2, -1)).await.unwrap();
    let PurchaseOutcome::Purchased {
        order_id: first, ..
    } = engine
        .purchase(&purchase("gone", "first", 1))
        .await
        .unwrap()
    else {
        panic!("the only item sells");
    };
    let PurchaseOutcome::Purchased { order_id: kept, .. } =
        engine.purchase(&keyed()).await.unwrap()
    else {
        panic!("the keyed purchase sells");
    };
    let refusals = refusals(kept);
    // Once, unmeasured: reads may set hint bits on the rows just written.
    for (asked, expected) in &refusals {
        assert_eq!(engine.purchase(asked).await.unwrap(), *expected);
    }
    let open = SaleId::new("open").unwrap();
    assert_eq!(
        store.orders_of_sale(&open, None, 10).await.unwrap().len(),
        1
    );

    let before = wal_position(&watcher).await;
    for _ in 0..50 {
        for (asked, expected) in &refusals {
            assert_eq!(engine.purchase(asked).await.unwrap(), *expected);
        }
    }
    let written = wal_position(&watcher).await - before;
    // 400 row locks with their commits would write well over 20 KB.
    assert!(
        written < 2_000,
        "{} refusals wrote {written} bytes of WAL",
        50 * refusals.len()
    );
    // Nothing was recorded either.
    for (id, sold) in [("gone", 1), ("open", 1), ("later", 0), ("over", 0)] {
        let id = SaleId::new(id).unwrap();
        assert_eq!(store.sale_state(&id).await.unwrap().unwrap().sold, sold);
        let orders = store.orders_of_sale(&id, None, 10).await.unwrap();
        assert_eq!(orders.len(), sold as usize, "{id}");
    }

    // A purchase that can succeed still takes the lock and writes.
    engine
        .release(&SaleId::new("gone").unwrap(), first, Epoch::FIRST)
        .await
        .unwrap();
    let before = wal_position(&watcher).await;
    let bought = engine.purchase(&purchase("gone", "late", 1)).await.unwrap();
    assert!(
        matches!(bought, PurchaseOutcome::Purchased { remaining: 0, .. }),
        "{bought:?}"
    );
    assert!(wal_position(&watcher).await > before);
}
