//! Shared helpers: a SQLite and a PostgreSQL store, sales, orders.

use chrono::Utc;
use stockade_core::{Epoch, IdempotencyKey, Order, OrderId, OrderStatus, SaleId, SaleSpec, UserId};
use stockade_store::OrderStore;
use stockade_test_support::PostgresServer;

pub(crate) struct Stores {
    pub(crate) sqlite: OrderStore,
    pub(crate) sqlite_url: String,
    pub(crate) postgres: OrderStore,
    pub(crate) postgres_url: String,
    _dir: tempfile::TempDir,
    _pg: PostgresServer,
}

pub(crate) async fn stores() -> Stores {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("orders.db").display()
    );
    let sqlite = OrderStore::open(&sqlite_url).await.unwrap();
    let pg = PostgresServer::start().unwrap();
    let postgres_url = pg.fresh_database().await.unwrap();
    let postgres = OrderStore::open(&postgres_url).await.unwrap();
    Stores {
        sqlite,
        sqlite_url,
        postgres,
        postgres_url,
        _dir: dir,
        _pg: pg,
    }
}

pub(crate) async fn sale(store: &OrderStore, id: &str, stock: u32, limit: u32) -> SaleId {
    let spec = SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap();
    store.save_sale(&spec, Utc::now()).await.unwrap();
    spec.id().clone()
}

pub(crate) fn order(
    sale: &SaleId,
    user: &str,
    quantity: u32,
    key: Option<&str>,
    epoch: u64,
) -> Order {
    Order {
        id: OrderId::generate(),
        sale_id: sale.clone(),
        user_id: UserId::new(user).unwrap(),
        quantity,
        items: vec![stockade_core::Item {
            sku: stockade_core::SkuId::default_sku(),
            quantity,
        }],
        tier: None,
        idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
        status: OrderStatus::Confirmed,
        created_at: Utc::now(),
        expires_at: None,
        epoch: Epoch::new(epoch),
    }
}

pub(crate) async fn each_store(test: impl AsyncFn(&OrderStore)) {
    let stores = stores().await;
    test(&stores.sqlite).await;
    test(&stores.postgres).await;
}

/// Like [`each_store`], with a pool of the store's own database for what
/// the test writes or reads behind the store's back.
pub(crate) async fn each_store_with_pool(test: impl AsyncFn(&OrderStore, &sqlx::AnyPool)) {
    sqlx::any::install_default_drivers();
    let stores = stores().await;
    for (store, url) in [
        (&stores.sqlite, &stores.sqlite_url),
        (&stores.postgres, &stores.postgres_url),
    ] {
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        test(store, &pool).await;
        pool.close().await;
    }
}
