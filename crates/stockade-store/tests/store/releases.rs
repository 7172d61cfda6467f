//! Cancels returning stock and owing releases, and the sales the
//! reconciler looks at.

use chrono::Utc;
use stockade_core::{Epoch, Order, OrderStatus, SaleId, SaleSpec};
use stockade_store::arbiter::Verdict;
use stockade_store::authority::Authority;
use stockade_store::releases::Cancel;

use crate::helpers::{each_store, order, sale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_returns_stock_in_the_store_and_records_the_release_owed() {
    each_store(async |store| {
        let s = sale(store, "cancel", 1, 1).await;
        let sold = order(&s, "a", 1, None, 1);
        store.commit(std::slice::from_ref(&sold)).await.unwrap();
        let Cancel::Cancelled { order, release } =
            store.cancel(sold.id, Utc::now(), true).await.unwrap()
        else {
            panic!("a live order is cancelled");
        };
        assert_eq!(order.status, OrderStatus::Cancelled);
        assert_eq!(release, Some(Epoch::FIRST));
        assert!(matches!(
            store.cancel(sold.id, Utc::now(), true).await.unwrap(),
            Cancel::AlreadyCancelled(_)
        ));
        assert_eq!(store.sale_state(&s).await.unwrap().unwrap().sold, 0);
        let pending = store.pending_releases_of(&s, 10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].order_id, sold.id);
        // The buyer's allowance came back too.
        assert_eq!(
            store.commit(&[order_again(&s)]).await.unwrap(),
            [Verdict::Committed]
        );
        // A rebuild under a newer epoch makes the release moot.
        store
            .advance_epoch(&s, Epoch::FIRST, Authority::Primary)
            .await
            .unwrap();
        assert!(store.pending_releases_of(&s, 10).await.unwrap().is_empty());
    })
    .await;
}

fn order_again(sale: &SaleId) -> Order {
    order(sale, "a", 1, None, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_looks_only_at_open_sales() {
    each_store(async |store| {
        let now = Utc::now();
        for (id, ends) in [
            ("endless", None),
            ("ends-later", Some(now + chrono::TimeDelta::hours(1))),
            ("ended", Some(now - chrono::TimeDelta::hours(1))),
        ] {
            let mut builder = SaleSpec::builder(id, 5).unwrap();
            if let Some(end) = ends {
                builder = builder
                    .starts_at(end - chrono::TimeDelta::hours(2))
                    .ends_at(end);
            }
            store
                .save_sale(&builder.build().unwrap(), now)
                .await
                .unwrap();
        }
        let open: Vec<String> = store
            .sale_states(Some(now - chrono::TimeDelta::minutes(1)))
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.spec.id().to_string())
            .collect();
        assert_eq!(open, ["endless", "ends-later"]);
    })
    .await;
}
