//! The settings of every SQLite connection of the store.

use sqlx::AnyConnection;

/// Set on each connection as it opens, in order.
const SETTINGS: &[&str] = &[
    // WAL lets readers work beside the one writer; FULL makes every commit
    // durable (the WAL fsynced) before it is acknowledged.
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    // Buyers are random keys of the holdings and order indexes, so a commit
    // of 512 orders dirties about as many pages of each. A checkpoint every
    // 10,000 WAL pages (about 40 MB) instead of 1,000 copies a page that
    // several commits dirtied back to the database once, and 32 MiB of page
    // cache keeps the indexes' inner pages in memory. Neither changes
    // durability, which is the WAL's fsync at each commit.
    "PRAGMA wal_autocheckpoint = 10000",
    "PRAGMA cache_size = -32768",
    "PRAGMA busy_timeout = 5000",
    "PRAGMA foreign_keys = ON",
];

/// Applies [`SETTINGS`] to a new connection.
pub(crate) async fn configure(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    for setting in SETTINGS {
        sqlx::query(setting).execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sqlx::Row;
    use stockade_core::{
        Epoch, IdempotencyKey, Item, Order, OrderId, OrderStatus, SaleId, SaleSpec, SkuId, UserId,
    };

    use crate::OrderStore;
    use crate::arbiter::Verdict;

    /// A store in a new SQLite file of `dir`.
    async fn store_in(dir: &tempfile::TempDir) -> OrderStore {
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("store.db").display()
        );
        OrderStore::open(&url).await.unwrap()
    }

    /// Reads a setting as an integer, or as text when it is one.
    async fn read(conn: &mut AnyConnection, pragma: &str) -> String {
        let row = sqlx::query(&format!("PRAGMA {pragma}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        row.try_get::<i64, _>(0)
            .map(|n| n.to_string())
            .or_else(|_| row.try_get::<String, _>(0))
            .unwrap()
    }

    use super::*;

    #[tokio::test]
    async fn every_connection_commits_durably_and_checkpoints_in_large_steps() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir).await;
        // Every connection the pool can hold at once.
        let mut held = Vec::new();
        for _ in 0..store.pool.options().get_max_connections() {
            held.push(store.pool.acquire().await.unwrap());
        }
        for conn in &mut held {
            assert_eq!(read(conn, "journal_mode").await, "wal");
            assert_eq!(read(conn, "synchronous").await, "2", "FULL");
            assert_eq!(read(conn, "wal_autocheckpoint").await, "10000");
            assert_eq!(read(conn, "cache_size").await, "-32768");
            assert_eq!(read(conn, "foreign_keys").await, "1");
        }
    }

    /// An order of `sale` by a new buyer, with `key` if given.
    fn order(sale: &SaleId, buyer: usize, key: Option<&str>) -> Order {
        Order {
            id: OrderId::generate(),
            sale_id: sale.clone(),
            user_id: UserId::new(format!("buyer-{buyer}")).unwrap(),
            quantity: 1,
            items: vec![Item {
                sku: SkuId::default_sku(),
                quantity: 1,
            }],
            tier: None,
            idempotency_key: key.map(|key| IdempotencyKey::new(key).unwrap()),
            status: OrderStatus::Confirmed,
            created_at: Utc::now(),
            expires_at: None,
            epoch: Epoch::new(1),
        }
    }

    #[tokio::test]
    async fn keyless_orders_stay_out_of_the_buyer_key_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir).await;
        let spec = SaleSpec::builder("keys", 100).unwrap().build().unwrap();
        store.save_sale(&spec, Utc::now()).await.unwrap();
        let sale = SaleId::new("keys").unwrap();
        // 40 buyers without a key, 10 with one.
        let orders: Vec<Order> = (0..50)
            .map(|buyer| order(&sale, buyer, (buyer >= 40).then_some("k")))
            .collect();
        let verdicts = store.commit(&orders).await.unwrap();
        assert!(verdicts.iter().all(|v| *v == Verdict::Committed));
        // The index's entries, counted in its pages (SQLite's dbstat table).
        let entries: i64 = sqlx::query(
            "SELECT COALESCE(SUM(ncell), 0) FROM dbstat
              WHERE name = 'orders_by_buyer_key' AND pagetype = 'leaf'",
        )
        .fetch_one(&store.pool)
        .await
        .unwrap()
        .get(0);
        assert_eq!(entries, 10, "only the keyed orders are in the index");
        // The index still keeps a buyer's key to one order.
        let again = order(&sale, 45, Some("k"));
        let verdicts = store.commit(&[again]).await.unwrap();
        assert!(matches!(verdicts[..], [Verdict::Void(_)]), "{verdicts:?}");
    }
}
