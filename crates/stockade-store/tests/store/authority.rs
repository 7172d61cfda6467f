//! Who decides a sale: the epoch compare-and-set, the store deciding
//! purchases itself, and the engine views that hold off a move to the
//! fallback.

use chrono::Utc;
use stockade_core::{Epoch, OrderId, Purchase, PurchaseOutcome};
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::authority::{Advance, Authority};

use stockade_core::SaleId;
use stockade_store::engine_views::InFlightOrders;

use crate::helpers::{each_store, each_store_with_pool, order, sale};

fn in_flight(orders: usize, sales: &[&str]) -> InFlightOrders {
    InFlightOrders {
        orders,
        sales: sales.iter().map(|s| SaleId::new(*s).unwrap()).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advancing_the_epoch_fences_off_orders_of_the_old_one() {
    each_store(async |store| {
        let s = sale(store, "fence", 10, 10).await;
        assert_eq!(
            store
                .advance_epoch(&s, Epoch::FIRST, Authority::Fallback)
                .await
                .unwrap(),
            Advance::Advanced(Epoch::new(2))
        );
        // Compare-and-set: a second instance expecting epoch 1 is told.
        assert_eq!(
            store
                .advance_epoch(&s, Epoch::FIRST, Authority::Fallback)
                .await
                .unwrap(),
            Advance::Moved {
                epoch: Epoch::new(2),
                authority: Authority::Fallback
            }
        );
        // A move to the fallback leaves epoch 1 undrained (the engine was
        // unreachable): its orders still commit, judged like any other.
        assert_eq!(
            store
                .commit(&[order(&s, "late", 1, None, 1)])
                .await
                .unwrap(),
            [Verdict::Committed]
        );
        // The rebuild back to the primary drains it and advances: from then
        // on an order of epoch 1 or 2 is stale.
        assert_eq!(
            store
                .advance_epoch(&s, Epoch::new(2), Authority::Primary)
                .await
                .unwrap(),
            Advance::Advanced(Epoch::new(3))
        );
        assert_eq!(
            store
                .commit(&[
                    order(&s, "later", 1, None, 1),
                    order(&s, "fallback-era", 1, None, 2)
                ])
                .await
                .unwrap(),
            [
                Verdict::Void(VoidReason::StaleEpoch {
                    current: Epoch::new(3)
                }),
                Verdict::Void(VoidReason::StaleEpoch {
                    current: Epoch::new(3)
                })
            ]
        );
        // Only the undrained epoch's order was sold.
        assert_eq!(store.sale_state(&s).await.unwrap().unwrap().sold, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_decides_purchases_itself_under_its_epoch() {
    each_store(async |store| {
        sale(store, "direct", 2, 1).await;
        let buy = |user: &str, epoch: u64| {
            Purchase::new("direct", user, 1)
                .unwrap()
                .with_idempotency_key("tap")
                .unwrap()
                .at_epoch(Epoch::new(epoch))
        };
        let now = Utc::now();
        assert_eq!(
            store
                .purchase(&buy("a", 2), OrderId::generate(), now)
                .await
                .unwrap(),
            PurchaseOutcome::WrongEpoch {
                engine: Epoch::FIRST
            }
        );
        let PurchaseOutcome::Purchased {
            order_id,
            remaining,
        } = store
            .purchase(&buy("a", 1), OrderId::generate(), now)
            .await
            .unwrap()
        else {
            panic!("the first purchase sells");
        };
        assert_eq!(remaining, 1);
        assert_eq!(
            store
                .purchase(&buy("a", 1), OrderId::generate(), now)
                .await
                .unwrap(),
            PurchaseOutcome::Duplicate { order_id }
        );
        let unkeyed = Purchase::new("direct", "a", 1).unwrap();
        assert_eq!(
            store
                .purchase(&unkeyed, OrderId::generate(), now)
                .await
                .unwrap(),
            PurchaseOutcome::LimitExceeded {
                already: 1,
                sku: None
            }
        );
        assert!(matches!(
            store
                .purchase(&buy("b", 1), OrderId::generate(), now)
                .await
                .unwrap(),
            PurchaseOutcome::Purchased { remaining: 0, .. }
        ));
        assert_eq!(
            store
                .purchase(&buy("c", 1), OrderId::generate(), now)
                .await
                .unwrap(),
            PurchaseOutcome::SoldOut
        );
        assert_eq!(
            store.order(order_id).await.unwrap().unwrap().epoch,
            Epoch::FIRST
        );
    })
    .await;
}

/// The engine views decide moves to the fallback from every instance: one
/// instance that still reaches the engine keeps the sale where it is; a
/// report of not reaching it keeps the last time it did; an instance with
/// accepted orders still on their way to the store, or without a report
/// since its last contact, holds the move off until it reports none (or
/// falls silent past the live period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_views_hold_off_the_fallback_while_any_instance_reaches_or_commits() {
    use std::time::Duration;
    use stockade_store::engine_views::FallbackHold;
    each_store(async |store| {
        let (quiet, live) = (Duration::from_secs(4), Duration::from_secs(10));
        assert_eq!(
            store.fallback_hold(quiet, live).await.unwrap(),
            None,
            "nobody has reported yet"
        );
        store
            .report_engine_view("cut-off", false, InFlightOrders::default)
            .await
            .unwrap();
        assert_eq!(store.fallback_hold(quiet, live).await.unwrap(), None);
        store
            .report_engine_view("healthy", true, InFlightOrders::default)
            .await
            .unwrap();
        assert_eq!(
            store.fallback_hold(quiet, live).await.unwrap(),
            Some(FallbackHold::Reached)
        );
        // The healthy one loses Redis too: its last success still counts
        // until the quiet period has passed.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .report_engine_view("healthy", false, || in_flight(3, &[]))
            .await
            .unwrap();
        assert_eq!(
            store.fallback_hold(quiet, live).await.unwrap(),
            Some(FallbackHold::Reached)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let short = Duration::from_millis(200);
        assert_eq!(
            store.fallback_hold(short, live).await.unwrap(),
            Some(FallbackHold::Committing),
            "past the quiet period, its three orders still on their way hold the move off"
        );
        store
            .report_engine_view("healthy", false, InFlightOrders::default)
            .await
            .unwrap();
        assert_eq!(
            store.fallback_hold(short, live).await.unwrap(),
            None,
            "all committed: the sale may move"
        );
        // Reached and reported in one report: orders may have been
        // accepted since, so it holds the move off until its next report.
        store
            .report_engine_view("late", true, InFlightOrders::default)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            store.fallback_hold(short, live).await.unwrap(),
            Some(FallbackHold::Committing)
        );
        assert_eq!(
            store.fallback_hold(short, short).await.unwrap(),
            None,
            "an instance silent past the live period holds nothing off"
        );
        store.prune_engine_views().await.unwrap();
    })
    .await;
}

/// A report that reached the engine records one instant for the reach and
/// the report, so it holds a move off until the next report, every time.
/// (PostgreSQL's clock moved between two reads in one statement: a report
/// straddling a millisecond looked like one made after the reach, and the
/// move went ahead while that instance may still accept orders.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_reached_the_engine_always_holds_the_move_off() {
    use std::time::Duration;
    use stockade_store::engine_views::FallbackHold;
    each_store(async |store| {
        // Quiet period 0: only the "reported at its reach" rule holds off.
        let (quiet, live) = (Duration::ZERO, Duration::from_secs(10));
        for round in 0..3_000 {
            store
                .report_engine_view("one", true, InFlightOrders::default)
                .await
                .unwrap();
            assert_eq!(
                store.fallback_hold(quiet, live).await.unwrap(),
                Some(FallbackHold::Committing),
                "report {round}: reached and reported at once holds the move off"
            );
        }
        // A later report (times are in milliseconds) with nothing in flight
        // lets the move go.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .report_engine_view("one", false, InFlightOrders::default)
            .await
            .unwrap();
        assert_eq!(store.fallback_hold(quiet, live).await.unwrap(), None);
        store.prune_engine_views().await.unwrap();
    })
    .await;
}

/// A rebuild advances a sale's epoch only once every other live instance
/// has reported, after the sale was closed, that it holds none of the
/// sale's orders: a report stamped before then may predate an order the
/// engine accepted; one naming the sale (or, from an older version, naming
/// no sales but holding orders) holds the advance off; another sale's
/// orders do not; the asking instance and silent ones are not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_waits_for_live_instances_that_may_hold_the_sales_orders() {
    use std::time::Duration;
    each_store_with_pool(async |store, pool| {
        let set_old_report = async |orders: i64| {
            sqlx::query(
                "UPDATE engine_views SET in_flight = $1, in_flight_sales = NULL WHERE instance = 'other'",
            )
            .bind(orders)
            .execute(pool)
            .await
            .unwrap();
        };
        let hot = SaleId::new("hot").unwrap();
        let live = Duration::from_secs(10);
        let holding = async |since: i64, live: Duration| {
            store
                .rebuild_hold(&hot, since, live, "asking")
                .await
                .unwrap()
        };
        store
            .report_engine_view("early", true, InFlightOrders::default)
            .await
            .unwrap();
        store
            .report_engine_view("asking", true, || in_flight(4, &["hot"]))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let since = store.clock_ms().await.unwrap();
        assert_eq!(
            holding(since, live).await,
            vec!["early".to_owned()],
            "a report from before the close may predate an accepted order"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .report_engine_view("early", true, || in_flight(2, &["cold", "hot"]))
            .await
            .unwrap();
        store
            .report_engine_view("other", false, || in_flight(7, &["cold"]))
            .await
            .unwrap();
        assert_eq!(
            holding(since, live).await,
            vec!["early".to_owned()],
            "its orders of the sale hold the advance off; another sale's do not"
        );
        store
            .report_engine_view("early", true, || in_flight(1, &["cold"]))
            .await
            .unwrap();
        assert!(
holding(since, live).await.is_empty()
        );
        // A report without sales (an older version) holding orders holds
        // off every sale's advance; one holding none does not.
        set_old_report(3).await;
        assert_eq!(
            holding(since, live).await,
            vec!["other".to_owned()]
        );
        set_old_report(0).await;
        assert!(
holding(since, live).await.is_empty()
        );
        // Silent past the live period: gone, nothing to wait for.
        store
            .report_engine_view("early", true, || in_flight(1, &["hot"]))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
holding(since, Duration::from_millis(200)).await.is_empty()
        );
        store.prune_engine_views().await.unwrap();
    })
    .await;
}
