//! A commit's reads find the batch's own rows by index however far the
//! tables have grown since the pool's sessions first ran them.
//!
//! A flash sale starts on tables that are nearly empty and adds hundreds of
//! thousands of orders in its first minute, before autovacuum's first
//! ANALYZE. A session that kept the plan it made on the empty tables (a
//! hash join over a sequential scan) would read the whole `orders` and
//! `holdings` tables on every commit: each commit slower than the last.

use sqlx::{Connection, PgConnection, Row};
use stockade_store::OrderStore;
use stockade_test_support::PostgresServer;

use crate::helpers::{order, sale};

/// Rows added behind the sessions' back.
const GROWN: i64 = 50_000;

/// Rows read by sequential scans of `orders` and `holdings` so far.
async fn rows_scanned(store: &OrderStore, admin: &mut PgConnection) -> i64 {
    store.flush_statistics().await.unwrap();
    sqlx::query(
        "SELECT coalesce(sum(seq_tup_read), 0)::bigint FROM pg_stat_user_tables
          WHERE relname IN ('orders', 'holdings')",
    )
    .fetch_one(&mut *admin)
    .await
    .unwrap()
    .get(0)
}

async fn commit_batches(
    store: &OrderStore,
    sale: &stockade_core::SaleId,
    tag: &str,
    batches: usize,
) {
    for batch in 0..batches {
        let orders: Vec<_> = (0..4)
            .map(|i| {
                let key = (i % 2 == 0).then_some("k");
                order(sale, &format!("{tag}-{batch}-{i}"), 1, key, 1)
            })
            .collect();
        store.commit(&orders).await.unwrap();
    }
}

#[tokio::test]
async fn commit_reads_stay_index_lookups_as_the_tables_grow() {
    let pg = PostgresServer::start().unwrap();
    let url = pg.fresh_database().await.unwrap();
    let store = OrderStore::open(&url).await.unwrap();
    let sale = sale(&store, "grows", 1_000_000, 1).await;
    // The sessions run every statement of a commit on the empty tables,
    // more than the five runs after which PostgreSQL may keep a generic
    // plan for good.
    commit_batches(&store, &sale, "early", 30).await;

    let mut admin = PgConnection::connect(&url).await.unwrap();
    for statement in [
        "INSERT INTO orders (id, sale_id, user_id, quantity, status, created_at_ms, updated_at_ms, epoch)
         SELECT 'grown-' || g, 'grows', 'grown-' || g, 1, 'confirmed', 0, 0, 1
           FROM generate_series(1, $1) g",
        "INSERT INTO holdings (sale_id, user_id, quantity)
         SELECT 'grows', 'grown-' || g, 1 FROM generate_series(1, $1) g",
    ] {
        sqlx::query(statement).bind(GROWN).execute(&mut admin).await.unwrap();
    }

    let before = rows_scanned(&store, &mut admin).await;
    commit_batches(&store, &sale, "late", 20).await;
    let scanned = rows_scanned(&store, &mut admin).await - before;
    assert!(
        scanned < GROWN,
        "20 commits of 4 orders read {scanned} rows by sequential scans of tables of {GROWN} rows: \
         the sessions kept plans made on empty tables"
    );
    let _ = admin.close().await;
}
