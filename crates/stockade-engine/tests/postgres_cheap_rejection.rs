//! DESIGN.md invariant 6, cheap rejection, on the PostgreSQL engine: buyers
//! turned away cost no write. Measured by the WAL position, which any row
//! lock or commit record would move.

use std::sync::Arc;

use sqlx::Row;
use stockade_core::{Engine, Epoch, Purchase, PurchaseOutcome, SaleSpec, SystemClock};
use stockade_engine::PostgresEngine;
use stockade_test_support::PostgresServer;

async fn wal_position(engine: &PostgresEngine) -> i64 {
    sqlx::query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS lsn")
        .fetch_one(engine.pool())
        .await
        .unwrap()
        .get("lsn")
}

#[tokio::test]
async fn sold_out_answers_write_nothing() {
    let server = PostgresServer::start().unwrap();
    let url = server.fresh_database().await.unwrap();
    let engine = PostgresEngine::connect(&url, 4, Arc::new(SystemClock))
        .await
        .unwrap();
    let spec = SaleSpec::builder("gone", 1).unwrap().build().unwrap();
    engine.create_sale(&spec).await.unwrap();
    let first = engine
        .purchase(&Purchase::new("gone", "first", 1).unwrap())
        .await
        .unwrap();
    assert!(matches!(first, PurchaseOutcome::Purchased { .. }));

    let before = wal_position(&engine).await;
    for i in 0..200 {
        let outcome = engine
            .purchase(&Purchase::new("gone", format!("late-{i}"), 1).unwrap())
            .await
            .unwrap();
        assert_eq!(outcome, PurchaseOutcome::SoldOut);
        let again = engine
            .purchase(&Purchase::new("gone", "first", 1).unwrap())
            .await
            .unwrap();
        assert_eq!(again, PurchaseOutcome::LimitExceeded { already: 1 });
    }
    let written = wal_position(&engine).await - before;
    // 400 row locks with their commits would write well over 20 KB.
    assert!(
        written < 2_000,
        "400 rejections wrote {written} bytes of WAL"
    );

    // A purchase that can succeed still takes the lock and writes.
    engine
        .release(
            spec.id(),
            match first {
                PurchaseOutcome::Purchased { order_id, .. } => order_id,
                _ => unreachable!(),
            },
            Epoch::FIRST,
        )
        .await
        .unwrap();
    let before = wal_position(&engine).await;
    let bought = engine
        .purchase(&Purchase::new("gone", "late-0", 1).unwrap())
        .await
        .unwrap();
    assert!(matches!(
        bought,
        PurchaseOutcome::Purchased { remaining: 0, .. }
    ));
    assert!(wal_position(&engine).await > before);
}
