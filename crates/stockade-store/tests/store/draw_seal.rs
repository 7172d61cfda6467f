//! A draw's seed sealed in the store (issue 35, item 2): a draw saved by
//! a build from before sealed seeds keeps the seed it was created with
//! through the migration, and is drawn from it with no key; a sealed draw
//! is frozen only with the key it was created with, and a refused freeze
//! changes nothing.

use std::path::Path;

use chrono::TimeDelta;
use sqlx::AnyPool;
use sqlx::migrate::Migrator;
use stockade_core::draw::{DrawConfig, DrawKey, Seed, draw_order};
use stockade_core::{Item, SaleId, SaleSpec, SkuId, UserId};
use stockade_store::OrderStore;
use stockade_store::draws::{Entered, Freeze};

/// The migration that sealed the seeds.
const SEALED: &str = "20261129600001";

fn url(dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", dir.join("orders.db").display())
}

/// The frozen entries' ids in their drawn order.
async fn placed(store: &OrderStore, sale: &SaleId) -> Vec<String> {
    let entries = store.entries(sale).await.unwrap();
    entries.iter().map(|e| e.id.to_string()).collect()
}

/// Enters three buyers and moves the store's clock past the close.
async fn enter_three(store: &OrderStore, sale: &SaleId) -> Vec<String> {
    let item = Item {
        sku: SkuId::new("default").unwrap(),
        quantity: 1,
    };
    let mut ids = Vec::new();
    for b in 0..3 {
        let user = UserId::new(format!("b{b}")).unwrap();
        match store
            .enter_draw(sale, &user, std::slice::from_ref(&item), None)
            .await
            .unwrap()
        {
            Entered::New(entry) => ids.push(entry.id.to_string()),
            other => panic!("entry refused: {other:?}"),
        }
    }
    store.shift_clock(TimeDelta::hours(2));
    ids
}

#[tokio::test]
async fn a_draw_saved_before_sealed_seeds_keeps_its_seed() {
    let dir = tempfile::tempdir().unwrap();
    let earlier = dir.path().join("earlier-migrations");
    std::fs::create_dir(&earlier).unwrap();
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/store");
    for file in std::fs::read_dir(&migrations).unwrap() {
        let file = file.unwrap();
        if file.file_name().to_string_lossy().as_ref() < SEALED {
            std::fs::copy(file.path(), earlier.join(file.file_name())).unwrap();
        }
    }
    sqlx::any::install_default_drivers();
    // The schema, a sale and its draw as the earlier build saved them:
    // the seed in clear.
    let legacy = Seed::from_bytes([5; 32]);
    let now = chrono::Utc::now().timestamp_millis();
    {
        let pool = AnyPool::connect(&url(dir.path())).await.unwrap();
        Migrator::new(earlier.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO sales (id, total_stock, per_user_limit, created_at_ms)
             VALUES ('old', 5, 1, $1)",
        )
        .bind(now)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO draws (sale_id, entries_open_at_ms, entries_close_at_ms, seed, commitment)
             VALUES ('old', $1, $2, $3, $4)",
        )
        .bind(now - 1_000)
        .bind(now + 3_600_000)
        .bind(legacy.to_hex())
        .bind(legacy.commitment())
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let store = OrderStore::open(&url(dir.path())).await.unwrap();
    let sale = SaleId::new("old").unwrap();
    let record = store.draw(&sale).await.unwrap().unwrap();
    assert_eq!(record.commitment, legacy.commitment());
    assert_eq!(record.seed().unwrap(), Some(legacy.clone()));
    let ids = enter_three(&store, &sale).await;
    assert!(
        store
            .claim_draw(&sale, "me", TimeDelta::seconds(10))
            .await
            .unwrap()
    );
    // No key needed: it is drawn from the seed it was created with.
    assert!(matches!(
        store.freeze_draw(&sale, "me", None).await.unwrap(),
        Freeze::Frozen { .. }
    ));
    let placed = placed(&store, &sale).await;
    assert_eq!(placed, draw_order(&legacy, &ids).unwrap());
}

#[tokio::test]
async fn a_sealed_draw_is_frozen_only_with_the_key_it_was_created_with() {
    let dir = tempfile::tempdir().unwrap();
    let store = OrderStore::open(&url(dir.path())).await.unwrap();
    let key = DrawKey::new(b"the-key-0123456789abcdef0123456789".to_vec()).unwrap();
    let sale = SaleId::new("sealed").unwrap();
    let now = store.draw_clock().await.unwrap();
    let spec = SaleSpec::builder("sealed", 5).unwrap().build().unwrap();
    let config = DrawConfig::new(now - TimeDelta::seconds(1), now + TimeDelta::hours(1)).unwrap();
    let sealed = key.seal(&sale);
    store
        .save_sale_with_room(&spec, None, Some((&config, &sealed)), now)
        .await
        .unwrap();
    let ids = enter_three(&store, &sale).await;
    assert!(
        store
            .claim_draw(&sale, "me", TimeDelta::seconds(10))
            .await
            .unwrap()
    );
    let other = DrawKey::new(b"another-key-0123456789abcdef012345".to_vec()).unwrap();
    for (wrong, says) in [(None, "has none"), (Some(&other), "does not give the seed")] {
        let error = store.freeze_draw(&sale, "me", wrong).await.unwrap_err();
        assert!(error.to_string().contains(says), "{error}");
        let record = store.draw(&sale).await.unwrap().unwrap();
        assert_eq!(
            record.entry_digest, None,
            "a refused freeze changes nothing"
        );
        assert_eq!(record.seed().unwrap(), None);
    }
    assert!(matches!(
        store.freeze_draw(&sale, "me", Some(&key)).await.unwrap(),
        Freeze::Frozen { .. }
    ));
    let seed = store
        .draw(&sale)
        .await
        .unwrap()
        .unwrap()
        .seed()
        .unwrap()
        .unwrap();
    assert!(seed.matches(&sealed.commitment));
    assert_eq!(seed, key.seed(&sale, &sealed.nonce));
    let placed = placed(&store, &sale).await;
    assert_eq!(placed, draw_order(&seed, &ids).unwrap());
}
