//! The PostgreSQL engine when its server goes away and comes back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{Engine, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock};
use stockade_engine::PostgresEngine;
use stockade_test_support::PostgresServer;

#[tokio::test]
async fn a_stopped_server_gives_retryable_errors_and_recovery_keeps_the_count() {
    let mut server = PostgresServer::start().unwrap();
    let url = server.fresh_database().await.unwrap();
    // A short acquire timeout: while the server is down, callers should
    // hear so quickly rather than queue for the default 10 s.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(1))
        .connect(&url)
        .await
        .unwrap();
    let engine = PostgresEngine::with_pool(pool, Arc::new(SystemClock))
        .await
        .unwrap();
    engine
        .create_sale(&SaleSpec::builder("pg-down", 5).unwrap().build().unwrap())
        .await
        .unwrap();
    let buy = |user: &str| Purchase::new("pg-down", user, 1).unwrap();
    assert!(matches!(
        engine.purchase(&buy("a")).await.unwrap(),
        PurchaseOutcome::Purchased { .. }
    ));

    server.stop();
    let err = engine.purchase(&buy("b")).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    server.start_again().unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match engine.purchase(&buy("b")).await {
            Ok(outcome) => {
                assert!(matches!(
                    outcome,
                    PurchaseOutcome::Purchased { remaining: 3, .. }
                ));
                break;
            }
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not recovered: {e}"),
        }
    }
    let snapshot = engine
        .snapshot(&SaleId::new("pg-down").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.remaining, 3);
}
