//! Sales of several SKUs in the store: the arbiter judges an engine's
//! orders per SKU and per buyer and SKU, a cancel gives each item back,
//! and rows written before SKUs read as one `default` SKU.

use chrono::Utc;
use stockade_core::{Item, Order, SaleId, SaleSpec, SkuId, SkuSpec};
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::{OrderStore, Stored};

use crate::helpers::{each_store, each_store_with_pool, order};

fn items(list: &[(&str, u32)]) -> Vec<Item> {
    list.iter()
        .map(|(sku, quantity)| Item {
            sku: SkuId::new(*sku).unwrap(),
            quantity: *quantity,
        })
        .collect()
}

/// An order of `list`'s items by `user`, under the first epoch.
fn bundle(sale: &SaleId, user: &str, list: &[(&str, u32)]) -> Order {
    let mut order = order(sale, user, 0, None, 1);
    order.items = items(list);
    order.quantity = order.items.iter().map(|item| item.quantity).sum();
    order
}

async fn shoes(store: &OrderStore, id: &str) -> SaleId {
    let skus = [("a", 2), ("b", 3)]
        .map(|(sku, stock)| SkuSpec {
            id: SkuId::new(sku).unwrap(),
            stock,
        })
        .to_vec();
    let spec = SaleSpec::with_skus(id, skus)
        .unwrap()
        .per_user_limit(4)
        .unwrap()
        .per_sku_limit(2)
        .unwrap()
        .build()
        .unwrap();
    store.save_sale(&spec, Utc::now()).await.unwrap();
    spec.id().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arbiter_judges_every_item_of_an_engines_order() {
    each_store(async |store| {
        let s = shoes(store, "judged").await;
        let verdicts = store
            .commit(&[
                bundle(&s, "u1", &[("a", 2)]),
                // a is gone though b is not: oversold.
                bundle(&s, "u2", &[("b", 1), ("a", 1)]),
                // Two of b is u3's per-SKU limit.
                bundle(&s, "u3", &[("b", 3)]),
                bundle(&s, "u3", &[("b", 2)]),
                bundle(&s, "u3", &[("b", 1)]),
                bundle(&s, "u4", &[("z", 1)]),
            ])
            .await
            .unwrap();
        assert_eq!(
            verdicts,
            [
                Verdict::Committed,
                Verdict::Void(VoidReason::Oversold),
                Verdict::Void(VoidReason::OverLimit),
                Verdict::Committed,
                Verdict::Void(VoidReason::OverLimit),
                Verdict::Void(VoidReason::UnknownSku),
            ]
        );
        let state = store.sale_state(&s).await.unwrap().unwrap();
        assert_eq!(state.sold, 4);
        assert_eq!(state.counts.sold, [2, 2]);
        assert_eq!(state.sku_remaining(), [0, 1]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_bundle_gives_each_item_back() {
    each_store(async |store| {
        let s = shoes(store, "cancelled").await;
        let pair = bundle(&s, "u", &[("a", 1), ("b", 2)]);
        let verdicts = store.commit(std::slice::from_ref(&pair)).await.unwrap();
        assert_eq!(verdicts, [Verdict::Committed]);
        match store.stored(pair.id).await.unwrap() {
            Some(Stored::Order(stored)) => assert_eq!(stored.items, pair.items),
            other => panic!("{other:?}"),
        }
        store.cancel(pair.id, Utc::now(), false).await.unwrap();
        let state = store.sale_state(&s).await.unwrap().unwrap();
        assert_eq!((state.sold, state.counts.sold.clone()), (0, vec![0, 0]));
        // The buyer's allowance of b is back: two more of b commit.
        let again = bundle(&s, "u", &[("b", 2)]);
        assert_eq!(store.commit(&[again]).await.unwrap(), [Verdict::Committed]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_from_before_skus_read_as_one_default_sku() {
    each_store_with_pool(async |store, pool| {
        // What a store of the previous release holds: no SKU columns set.
        sqlx::query(
            "INSERT INTO sales (id, total_stock, per_user_limit, created_at_ms, sold)
             VALUES ('old', 5, 2, 0, 2)",
        )
        .execute(pool)
        .await
        .unwrap();
        let old = order(&SaleId::new("old").unwrap(), "u", 2, None, 1);
        sqlx::query(
            "INSERT INTO orders (id, sale_id, user_id, quantity, status, created_at_ms,
                                 updated_at_ms, epoch)
             VALUES ($1, 'old', 'u', 2, 'confirmed', 0, 0, 1)",
        )
        .bind(old.id.to_string())
        .execute(pool)
        .await
        .unwrap();
        sqlx::query("INSERT INTO holdings (sale_id, user_id, quantity) VALUES ('old', 'u', 2)")
            .execute(pool)
            .await
            .unwrap();
        let state = store
            .sale_state(&SaleId::new("old").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            state.spec,
            SaleSpec::builder("old", 5)
                .unwrap()
                .per_user_limit(2)
                .unwrap()
                .build()
                .unwrap()
        );
        assert_eq!(state.sku_remaining(), [3]);
        match store.stored(old.id).await.unwrap() {
            Some(Stored::Order(stored)) => assert_eq!(stored.items, items(&[("default", 2)])),
            other => panic!("{other:?}"),
        }
        // And it sells on: an order of the default SKU commits, and a
        // cancel of the old order gives its items back.
        let next = bundle(&SaleId::new("old").unwrap(), "v", &[("default", 2)]);
        assert_eq!(store.commit(&[next]).await.unwrap(), [Verdict::Committed]);
        store.cancel(old.id, Utc::now(), false).await.unwrap();
        let state = store
            .sale_state(&SaleId::new("old").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(state.sold, 2);
    })
    .await;
}
