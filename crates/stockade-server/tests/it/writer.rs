//! The group-commit writer as a pipeline, on SQLite and on PostgreSQL: with
//! several batches in flight, orders of one sale are still judged in arrival
//! order; a store failure fails only its own batch; decided orders leave the
//! engine's outbox.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use stockade_core::{
    Engine, Epoch, Order, OrderId, OrderStatus, Purchase, PurchaseOutcome, SaleId, SaleSpec,
    SystemClock, UserId,
};
use stockade_engine::MemoryEngine;
use stockade_server::writer::{CommitQueue, CommitResult, WriterConfig};
use stockade_store::arbiter::Verdict;
use stockade_store::{OrderStore, StoreEngine, StoreKind};
use stockade_test_support::PostgresServer;
use tokio::sync::{Mutex, oneshot};

/// A store with the URL it was opened at, so a test can reach the same
/// database directly (to install a fault).
struct Store {
    store: OrderStore,
    url: String,
}

/// Runs `test` against a fresh SQLite store and a fresh PostgreSQL store.
async fn each_store(test: impl AsyncFn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("orders.db").display()
    );
    let sqlite = Store {
        store: OrderStore::open(&sqlite_url).await.unwrap(),
        url: sqlite_url,
    };
    test(&sqlite).await;
    let pg = PostgresServer::start().unwrap();
    let postgres_url = pg.fresh_database().await.unwrap();
    let postgres = Store {
        store: OrderStore::open(&postgres_url).await.unwrap(),
        url: postgres_url,
    };
    test(&postgres).await;
}

/// The store deciding itself: an engine with no outbox to clear.
fn store_engine(store: &OrderStore) -> Arc<dyn Engine> {
    Arc::new(StoreEngine::new(store.clone(), Arc::new(SystemClock)))
}

async fn sale(store: &OrderStore, id: &str, stock: u32) -> SaleSpec {
    let spec = SaleSpec::builder(id, stock).unwrap().build().unwrap();
    store.save_sale(&spec, Utc::now()).await.unwrap();
    spec
}

fn order(sale: &SaleId, user: &str) -> Order {
    Order {
        id: OrderId::generate(),
        sale_id: sale.clone(),
        user_id: UserId::new(user).unwrap(),
        quantity: 1,
        items: vec![stockade_core::Item {
            sku: stockade_core::SkuId::default_sku(),
            quantity: 1,
        }],
        tier: None,
        idempotency_key: None,
        status: OrderStatus::Confirmed,
        created_at: Utc::now(),
        expires_at: None,
        epoch: Epoch::new(1),
    }
}

/// Waits for a submitted order's answer, failing the test if the writer
/// never gives one.
async fn answer(done: oneshot::Receiver<CommitResult>) -> CommitResult {
    tokio::time::timeout(Duration::from_secs(30), done)
        .await
        .expect("the writer answers within 30 s")
        .expect("the writer answers every order")
}

/// Small batches, so that a few hundred orders make many batches and, on
/// PostgreSQL, several commits in flight at once.
const SMALL_BATCHES: WriterConfig = WriterConfig {
    max_batch: 8,
    max_delay: Duration::from_millis(1),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_orders_by_arrival_win_with_batches_in_flight() {
    each_store(async |store| {
        const SALES: usize = 3;
        const STOCK: usize = 40;
        const BUYERS: usize = 64;
        const ORDERS_PER_SALE: usize = 100;
        let mut sales = Vec::new();
        for n in 0..SALES {
            sales.push(sale(&store.store, &format!("arrival-{n}"), STOCK as u32).await);
        }
        let (queue, writer) = CommitQueue::start(
            store.store.clone(),
            store_engine(&store.store),
            SMALL_BATCHES,
            Default::default(),
        );
        // Concurrent buyers; each takes the next arrival number and submits
        // under one lock, so the queue sees orders in arrival-number order.
        let arrivals = Arc::new(Mutex::new(0_usize));
        let buyers: Vec<_> = (0..BUYERS)
            .map(|_| {
                let queue = queue.clone();
                let arrivals = Arc::clone(&arrivals);
                let sales: Vec<SaleId> = sales.iter().map(|s| s.id().clone()).collect();
                tokio::spawn(async move {
                    let mut answers = Vec::new();
                    loop {
                        let (arrival, done) = {
                            let mut next = arrivals.lock().await;
                            let arrival = *next;
                            if arrival == SALES * ORDERS_PER_SALE {
                                return answers;
                            }
                            *next += 1;
                            // Sales interleaved, so every batch touches
                            // several of them.
                            let sale = &sales[arrival % SALES];
                            let done = queue.submit(order(sale, &format!("b{arrival}"))).await;
                            (arrival, done)
                        };
                        answers.push((arrival, answer(done).await));
                    }
                })
            })
            .collect();
        let mut answers = Vec::new();
        for buyer in buyers {
            answers.extend(buyer.await.unwrap());
        }
        drop(queue);
        writer.await.unwrap();
        answers.sort_by_key(|(arrival, _)| *arrival);
        assert_eq!(answers.len(), SALES * ORDERS_PER_SALE);
        for (arrival, result) in &answers {
            let verdict = result.as_ref().expect("the store stays up");
            let rank_in_sale = arrival / SALES;
            assert_eq!(
                *verdict == Verdict::Committed,
                rank_in_sale < STOCK,
                "{:?}: arrival {arrival} (#{rank_in_sale} of sale {}) got {verdict:?}",
                store.store.kind(),
                arrival % SALES
            );
        }
        for spec in &sales {
            let state = store.store.sale_state(spec.id()).await.unwrap().unwrap();
            assert_eq!(state.sold, STOCK as u32);
        }
    })
    .await;
}

/// Makes every transaction that inserts an order of `poison` fail.
async fn poison_buyer(store: &Store, poison: &str) {
    let pool = sqlx::AnyPool::connect(&store.url).await.unwrap();
    let statements = match store.store.kind() {
        StoreKind::Postgres => vec![
            format!(
                "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$
                 BEGIN
                   IF NEW.user_id = '{poison}' THEN RAISE EXCEPTION 'poisoned batch'; END IF;
                   RETURN NEW;
                 END $$ LANGUAGE plpgsql"
            ),
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON orders
               FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
                .to_owned(),
        ],
        StoreKind::Sqlite => vec![format!(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON orders
               WHEN NEW.user_id = '{poison}'
             BEGIN SELECT RAISE(ABORT, 'poisoned batch'); END"
        )],
    };
    for statement in statements {
        sqlx::query(&statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_fails_only_its_batch_and_later_batches_commit() {
    sqlx::any::install_default_drivers();
    each_store(async |store| {
        let spec = sale(&store.store, "failure", 100).await;
        poison_buyer(store, "poison").await;
        // Batches of exactly four: each closes as its fourth order arrives,
        // long before the delay.
        let config = WriterConfig {
            max_batch: 4,
            max_delay: Duration::from_secs(5),
        };
        let (queue, writer) = CommitQueue::start(
            store.store.clone(),
            store_engine(&store.store),
            config,
            Default::default(),
        );
        let users = [
            ["a0", "a1", "a2", "a3"],
            ["b0", "poison", "b2", "b3"],
            ["c0", "c1", "c2", "c3"],
            ["d0", "d1", "d2", "d3"],
        ];
        let mut submitted = Vec::new();
        for batch in users {
            for user in batch {
                let order = order(spec.id(), user);
                submitted.push((order.id, queue.submit(order).await));
            }
        }
        let mut results = Vec::new();
        for (id, done) in submitted {
            results.push((id, answer(done).await));
        }
        drop(queue);
        writer.await.unwrap();
        for (index, (id, result)) in results.iter().enumerate() {
            let in_poisoned_batch = index / 4 == 1;
            let stored = store.store.order(*id).await.unwrap();
            if in_poisoned_batch {
                let error = result.as_ref().expect_err("the poisoned batch fails");
                assert!(error.to_string().contains("poisoned batch"), "{error}");
                assert!(stored.is_none(), "nothing of the failed batch commits");
                assert!(!store.store.is_void(*id).await.unwrap());
            } else {
                assert_eq!(result.as_ref().unwrap(), &Verdict::Committed);
                assert!(stored.is_some());
            }
        }
        let state = store.store.sale_state(spec.id()).await.unwrap().unwrap();
        assert_eq!(state.sold, 12, "{:?}", store.store.kind());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decided_orders_leave_the_engine_outbox() {
    each_store(async |store| {
        let spec = sale(&store.store, "acks", 50).await;
        let engine = Arc::new(MemoryEngine::new(Arc::new(SystemClock)));
        engine.create_sale(&spec).await.unwrap();
        for n in 0..30 {
            let purchase = Purchase::new("acks", format!("u{n}"), 1)
                .unwrap()
                .at_epoch(Epoch::new(1));
            let outcome = engine.purchase(&purchase).await.unwrap();
            assert!(matches!(outcome, PurchaseOutcome::Purchased { .. }));
        }
        let mut accepted = engine.outbox(spec.id()).await.unwrap();
        assert_eq!(accepted.len(), 30);
        // One order the store will refuse (stale epoch): decided as well,
        // so it leaves the outbox too.
        accepted[7].epoch = Epoch::new(9);
        let engine_handle: Arc<dyn Engine> = engine.clone();
        let (queue, writer) = CommitQueue::start(
            store.store.clone(),
            engine_handle,
            SMALL_BATCHES,
            Default::default(),
        );
        let mut submitted = Vec::new();
        for order in accepted {
            submitted.push(queue.submit(order).await);
        }
        let mut committed = 0;
        for done in submitted {
            if answer(done).await.unwrap() == Verdict::Committed {
                committed += 1;
            }
        }
        assert_eq!(committed, 29);
        // The writer's task ends only after the acknowledger has drained.
        drop(queue);
        writer.await.unwrap();
        assert_eq!(engine.outbox(spec.id()).await.unwrap(), Vec::<Order>::new());
    })
    .await;
}
