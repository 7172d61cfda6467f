//! The order store as the arbiter, on SQLite and on PostgreSQL: every order
//! of a batch gets its own verdict, a bad one never blocks the others, and
//! whatever an engine decided the store never holds an oversold sale, a
//! buyer over the limit, a key used twice, or an order of a stale epoch.

use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stockade_core::{
    Epoch, IdempotencyKey, Order, OrderId, OrderStatus, Purchase, PurchaseOutcome, SaleId,
    SaleSpec, UserId,
};
use stockade_store::OrderStore;
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::authority::{Advance, Authority};
use stockade_store::releases::Cancel;
use stockade_test_support::PostgresServer;

struct Stores {
    sqlite: OrderStore,
    sqlite_url: String,
    postgres: OrderStore,
    postgres_url: String,
    _dir: tempfile::TempDir,
    _pg: PostgresServer,
}

async fn stores() -> Stores {
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

async fn sale(store: &OrderStore, id: &str, stock: u32, limit: u32) -> SaleId {
    let spec = SaleSpec::builder(id, stock)
        .unwrap()
        .per_user_limit(limit)
        .unwrap()
        .build()
        .unwrap();
    store.save_sale(&spec, Utc::now()).await.unwrap();
    spec.id().clone()
}

fn order(sale: &SaleId, user: &str, quantity: u32, key: Option<&str>, epoch: u64) -> Order {
    Order {
        id: OrderId::generate(),
        sale_id: sale.clone(),
        user_id: UserId::new(user).unwrap(),
        quantity,
        idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
        status: OrderStatus::Confirmed,
        created_at: Utc::now(),
        expires_at: None,
        epoch: Epoch::new(epoch),
    }
}

async fn each_store(test: impl AsyncFn(&OrderStore)) {
    let stores = stores().await;
    test(&stores.sqlite).await;
    test(&stores.postgres).await;
}

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
            PurchaseOutcome::LimitExceeded { already: 1 }
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

/// One order of a random commit plan, in terms both namespaces share.
#[derive(Clone, Debug)]
struct PlannedOrder {
    /// Orders with one slot share their id (a replay).
    slot: usize,
    /// An index into the plan's sales; `sales.len()` names a sale the store
    /// does not have.
    sale: usize,
    user: usize,
    quantity: u32,
    key: Option<usize>,
    epoch: u64,
}

/// A random case: sales, orders committed before, and the batch.
#[derive(Debug)]
struct Plan {
    /// (stock, per-buyer limit) of each sale.
    sales: Vec<(u32, u32)>,
    earlier: Vec<PlannedOrder>,
    batch: Vec<PlannedOrder>,
}

impl Plan {
    fn random(rng: &mut StdRng) -> Self {
        let sales: Vec<(u32, u32)> = (0..rng.random_range(1..=3))
            .map(|_| (rng.random_range(1..=8), rng.random_range(1..=3)))
            .collect();
        let mut slots = 0;
        let mut fresh = |rng: &mut StdRng| {
            slots += 1;
            PlannedOrder {
                slot: slots - 1,
                // Now and then a sale the store does not have.
                sale: rng.random_range(0..sales.len() * 8 + 1) / 8,
                user: rng.random_range(0..4),
                quantity: rng.random_range(1..=3),
                key: rng.random_bool(0.5).then(|| rng.random_range(0..3)),
                // Sales are at epoch 1: epoch 2 orders are stale.
                epoch: if rng.random_bool(0.1) { 2 } else { 1 },
            }
        };
        let earlier: Vec<PlannedOrder> = (0..rng.random_range(0..4)).map(|_| fresh(rng)).collect();
        let mut batch: Vec<PlannedOrder> = Vec::new();
        for _ in 0..rng.random_range(1..=24) {
            let replayable: Vec<&PlannedOrder> = earlier.iter().chain(&batch).collect();
            let planned = if !replayable.is_empty() && rng.random_bool(0.15) {
                replayable[rng.random_range(0..replayable.len())].clone()
            } else {
                fresh(rng)
            };
            batch.push(planned);
        }
        Self {
            sales,
            earlier,
            batch,
        }
    }
}

/// A verdict with order ids replaced by plan slots.
#[derive(Debug, PartialEq)]
enum SlotVerdict {
    Committed,
    Void(&'static str),
    KeyTaken { original: usize },
}

/// Everything a case leaves in the store, in plan terms.
#[derive(Debug, PartialEq)]
struct CaseResult {
    verdicts: Vec<SlotVerdict>,
    sales: Vec<CaseSale>,
}

/// A sale after a case: its sold count, its (buyer, quantity) holdings, and
/// its orders, committed and void.
#[derive(Debug, PartialEq)]
struct CaseSale {
    sold: u32,
    holdings: Vec<(String, i64)>,
    orders: Vec<CaseOrder>,
}

/// An order row: (slot, buyer, quantity, key, status).
type CaseOrder = (usize, String, i64, Option<String>, String);

/// Applies `plan` to sales named after `prefix`: the earlier orders one by
/// one, then the batch in one commit (`batched`) or one by one.
async fn run_plan(
    store: &OrderStore,
    pool: &sqlx::AnyPool,
    plan: &Plan,
    prefix: &str,
    batched: bool,
) -> CaseResult {
    let mut sale_ids = Vec::new();
    for (n, (stock, limit)) in plan.sales.iter().enumerate() {
        sale_ids.push(sale(store, &format!("{prefix}-{n}"), *stock, *limit).await);
    }
    sale_ids.push(SaleId::new(format!("{prefix}-unknown")).unwrap());
    let mut ids: Vec<OrderId> = Vec::new();
    let mut build = |planned: &PlannedOrder| {
        while ids.len() <= planned.slot {
            ids.push(OrderId::generate());
        }
        Order {
            id: ids[planned.slot],
            sale_id: sale_ids[planned.sale].clone(),
            user_id: UserId::new(format!("u{}", planned.user)).unwrap(),
            quantity: planned.quantity,
            idempotency_key: planned
                .key
                .map(|k| IdempotencyKey::new(format!("k{k}")).unwrap()),
            status: OrderStatus::Confirmed,
            created_at: Utc::now(),
            expires_at: None,
            epoch: Epoch::new(planned.epoch),
        }
    };
    let earlier: Vec<Order> = plan.earlier.iter().map(&mut build).collect();
    let batch: Vec<Order> = plan.batch.iter().map(&mut build).collect();
    for order in &earlier {
        store.commit(std::slice::from_ref(order)).await.unwrap();
    }
    let verdicts = if batched {
        store.commit(&batch).await.unwrap()
    } else {
        let mut verdicts = Vec::new();
        for order in &batch {
            verdicts.extend(store.commit(std::slice::from_ref(order)).await.unwrap());
        }
        verdicts
    };
    let slot_of = |id: OrderId| ids.iter().position(|known| *known == id).unwrap();
    let verdicts = verdicts
        .into_iter()
        .map(|verdict| match verdict {
            Verdict::Committed => SlotVerdict::Committed,
            Verdict::Void(VoidReason::KeyTaken { original }) => SlotVerdict::KeyTaken {
                original: slot_of(original),
            },
            Verdict::Void(reason) => SlotVerdict::Void(reason.label()),
        })
        .collect();
    let mut sales = Vec::new();
    for sale in &sale_ids[..plan.sales.len()] {
        let sold = store.sale_state(sale).await.unwrap().unwrap().sold;
        let holdings = sqlx::query_as::<_, (String, i64)>(
            "SELECT user_id, quantity FROM holdings WHERE sale_id = $1 ORDER BY user_id",
        )
        .bind(sale.as_str())
        .fetch_all(pool)
        .await
        .unwrap();
        let mut orders: Vec<CaseOrder> =
            sqlx::query_as::<_, (String, String, i64, Option<String>, String)>(
                "SELECT id, user_id, quantity, idempotency_key, status FROM orders
                  WHERE sale_id = $1",
            )
            .bind(sale.as_str())
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .map(|(id, user, quantity, key, status)| {
                (slot_of(id.parse().unwrap()), user, quantity, key, status)
            })
            .collect();
        orders.sort();
        sales.push(CaseSale {
            sold,
            holdings,
            orders,
        });
    }
    CaseResult { verdicts, sales }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_judged_exactly_like_its_orders_one_by_one() {
    // Random batches mixing committed and void orders (oversold, over the
    // limit, stale, unknown sale, key taken, replays) of several sales: the
    // one-transaction bulk commit must give each order the verdict, and
    // leave the store with the rows, that committing them one at a time in
    // the same order does.
    const CASES: u64 = 40;
    sqlx::any::install_default_drivers();
    let stores = stores().await;
    for (store, url) in [
        (&stores.sqlite, &stores.sqlite_url),
        (&stores.postgres, &stores.postgres_url),
    ] {
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        for case in 0..CASES {
            let plan = Plan::random(&mut StdRng::seed_from_u64(case));
            let batched = run_plan(store, &pool, &plan, &format!("c{case}-batch"), true).await;
            let single = run_plan(store, &pool, &plan, &format!("c{case}-single"), false).await;
            assert_eq!(
                batched,
                single,
                "case {case} on {:?}: {plan:#?}",
                store.kind()
            );
        }
    }
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
        store.report_engine_view("cut-off", false, 0).await.unwrap();
        assert_eq!(store.fallback_hold(quiet, live).await.unwrap(), None);
        store.report_engine_view("healthy", true, 0).await.unwrap();
        assert_eq!(
            store.fallback_hold(quiet, live).await.unwrap(),
            Some(FallbackHold::Reached)
        );
        // The healthy one loses Redis too: its last success still counts
        // until the quiet period has passed.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.report_engine_view("healthy", false, 3).await.unwrap();
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
        store.report_engine_view("healthy", false, 0).await.unwrap();
        assert_eq!(
            store.fallback_hold(short, live).await.unwrap(),
            None,
            "all committed: the sale may move"
        );
        // Reached and reported in one report: orders may have been
        // accepted since, so it holds the move off until its next report.
        store.report_engine_view("late", true, 0).await.unwrap();
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
