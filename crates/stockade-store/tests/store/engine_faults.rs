//! The store engine ([`StoreEngine`]) when its PostgreSQL server goes away
//! and comes back: retryable errors while it is gone, nothing lost after.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{Engine, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock};
use stockade_store::{OrderStore, StoreEngine};
use stockade_test_support::PostgresServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_gives_retryable_errors_and_recovery_keeps_the_count() {
    let mut server = PostgresServer::start().unwrap();
    let url = server.fresh_database().await.unwrap();
    let store = OrderStore::open(&url).await.unwrap();
    let engine = StoreEngine::new(store.clone(), Arc::new(SystemClock));
    let sale = SaleId::new("pg-down").unwrap();
    engine
        .create_sale(&SaleSpec::builder("pg-down", 5).unwrap().build().unwrap())
        .await
        .unwrap();
    let buy = |user: &str| Purchase::new("pg-down", user, 1).unwrap();
    let PurchaseOutcome::Purchased {
        order_id: first, ..
    } = engine.purchase(&buy("a")).await.unwrap()
    else {
        panic!("the first purchase must succeed");
    };

    server.stop();
    // The store's pool answers within its acquire timeout (3 s), not later.
    let asked = Instant::now();
    let err = engine.purchase(&buy("b")).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    let err = engine.snapshot(&sale).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    server.start_again().unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match engine.purchase(&buy("b")).await {
            Ok(outcome) => {
                assert!(
                    matches!(outcome, PurchaseOutcome::Purchased { remaining: 3, .. }),
                    "{outcome:?}"
                );
                break;
            }
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not recovered: {e}"),
        }
    }
    let snapshot = engine.snapshot(&sale).await.unwrap().unwrap();
    assert_eq!(snapshot.remaining, 3);
    // The order committed before the outage is still there, and the
    // failed attempt left none behind.
    let orders = store.orders_of_sale(&sale, None, 10).await.unwrap();
    assert_eq!(orders.len(), 2, "{orders:?}");
    assert_eq!(orders[0].id, first);
}
