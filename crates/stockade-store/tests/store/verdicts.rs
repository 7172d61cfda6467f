//! Commits: one verdict per order, the refusals (oversold, over the limit,
//! stale epoch), and the keys void orders keep.

use chrono::Utc;
use stockade_core::{Epoch, Order, OrderId, Purchase, PurchaseOutcome};
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::authority::Authority;

use crate::helpers::{each_store, order, sale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_order_gets_its_own_verdict_and_never_blocks_the_batch() {
    each_store(async |store| {
        let s = sale(store, "batch", 1_000, 2).await;
        let first = order(&s, "alice", 1, Some("k"), 1);
        assert_eq!(
            store.commit(std::slice::from_ref(&first)).await.unwrap(),
            [Verdict::Committed]
        );
        // 511 good orders around one whose key alice already used.
        let mut batch: Vec<Order> = (0..511)
            .map(|i| order(&s, &format!("u{i}"), 1, Some("k"), 1))
            .collect();
        batch.insert(25, order(&s, "alice", 1, Some("k"), 1));
        let verdicts = store.commit(&batch).await.unwrap();
        assert_eq!(
            verdicts[25],
            Verdict::Void(VoidReason::KeyTaken { original: first.id })
        );
        assert_eq!(
            verdicts
                .iter()
                .filter(|v| **v == Verdict::Committed)
                .count(),
            511,
            "every other order commits"
        );
        // The void order is decided for good: committing it again is void.
        assert_eq!(
            store.commit(&batch[25..26]).await.unwrap(),
            [Verdict::Void(VoidReason::Earlier)]
        );
        // And a committed one again is committed (a replayed outbox).
        assert_eq!(
            store.commit(&batch[..1]).await.unwrap(),
            [Verdict::Committed]
        );
        assert!(store.order(batch[25].id).await.unwrap().is_none());
        assert_eq!(store.sale_state(&s).await.unwrap().unwrap().sold, 512);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_refuses_oversold_over_limit_and_stale_orders() {
    each_store(async |store| {
        let s = sale(store, "arbiter", 3, 2).await;
        let verdicts = store
            .commit(&[
                order(&s, "a", 2, None, 1),
                order(&s, "a", 1, None, 1),
                order(&s, "b", 1, None, 1),
                order(&s, "c", 1, None, 1),
                order(&s, "d", 1, None, 7),
            ])
            .await
            .unwrap();
        assert_eq!(
            verdicts,
            [
                Verdict::Committed,
                Verdict::Void(VoidReason::OverLimit),
                Verdict::Committed,
                Verdict::Void(VoidReason::Oversold),
                Verdict::Void(VoidReason::StaleEpoch {
                    current: Epoch::FIRST
                }),
            ]
        );
        let state = store.sale_state(&s).await.unwrap().unwrap();
        assert_eq!((state.sold, state.remaining()), (3, 0));
        assert_eq!(store.all_orders(&s).await.unwrap().len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_void_order_keeps_a_free_key_and_never_takes_a_used_one() {
    each_store(async |store| {
        let s = sale(store, "void-keys", 10, 5).await;
        let committed = order(&s, "a", 1, Some("k1"), 1);
        store
            .commit(std::slice::from_ref(&committed))
            .await
            .unwrap();
        store
            .advance_epoch(&s, Epoch::FIRST, Authority::Primary)
            .await
            .unwrap();
        // Stale orders: one whose key is taken, one whose key is free.
        let taken = order(&s, "a", 1, Some("k1"), 1);
        let free = order(&s, "a", 1, Some("k2"), 1);
        let verdicts = store.commit(&[taken.clone(), free.clone()]).await.unwrap();
        assert!(matches!(
            verdicts[0],
            Verdict::Void(VoidReason::StaleEpoch { .. })
        ));
        assert!(matches!(
            verdicts[1],
            Verdict::Void(VoidReason::StaleEpoch { .. })
        ));
        // The free key now names the failed order: a purchase under the
        // current epoch with it is a duplicate of that order, not a sale.
        let replay = Purchase::new("void-keys", "a", 1)
            .unwrap()
            .with_idempotency_key("k2")
            .unwrap()
            .at_epoch(Epoch::new(2));
        assert_eq!(
            store
                .purchase(&replay, OrderId::generate(), Utc::now())
                .await
                .unwrap(),
            PurchaseOutcome::Duplicate { order_id: free.id }
        );
        assert!(store.is_void(free.id).await.unwrap());
        // The rebuild input carries it as released, with its key.
        let all = store.all_orders(&s).await.unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(
            all.iter()
                .any(|o| o.id == free.id && !o.status.holds_stock())
        );
    })
    .await;
}
