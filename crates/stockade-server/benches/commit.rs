//! The commit path: `OrderStore::commit` of one batch of 512 orders (the
//! writer's default batch size) of one hot sale, each by a new buyer with
//! an idempotency key, on SQLite in a temporary file (`synchronous = FULL`,
//! as served) and on a throwaway PostgreSQL with fsync on (as in
//! production).
//!
//! Run with `cargo bench -p stockade-server --bench commit`; criterion
//! reports committed orders per second as "elem/s". The bench uses only the
//! store's public API, so it can be run unchanged against older commits to
//! compare.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use stockade_core::{Epoch, IdempotencyKey, Order, OrderId, OrderStatus, SaleId, SaleSpec, UserId};
use stockade_store::OrderStore;
use stockade_store::arbiter::Verdict;
use stockade_test_support::PostgresServer;
use stockade_test_support::postgres_server::Durability;

const BATCH: usize = 512;

/// A batch of new orders by new buyers.
fn batch(sale: &SaleId, next_buyer: &AtomicU64) -> Vec<Order> {
    (0..BATCH)
        .map(|_| {
            let buyer = next_buyer.fetch_add(1, Ordering::Relaxed);
            Order {
                id: OrderId::generate(),
                sale_id: sale.clone(),
                user_id: UserId::new(format!("buyer-{buyer}")).unwrap(),
                quantity: 1,
                items: vec![stockade_core::Item {
                    sku: stockade_core::SkuId::default_sku(),
                    quantity: 1,
                }],
                tier: None,
                idempotency_key: Some(IdempotencyKey::new(format!("key-{buyer}")).unwrap()),
                status: OrderStatus::Confirmed,
                created_at: Utc::now(),
                expires_at: None,
                epoch: Epoch::new(1),
            }
        })
        .collect()
}

fn bench_store(c: &mut Criterion, runtime: &tokio::runtime::Runtime, name: &str, url: &str) {
    let store = runtime.block_on(async {
        let store = OrderStore::open(url).await.unwrap();
        let spec = SaleSpec::builder("bench-commit", 1_000_000_000)
            .unwrap()
            .build()
            .unwrap();
        store.save_sale(&spec, Utc::now()).await.unwrap();
        store
    });
    let sale = SaleId::new("bench-commit").unwrap();
    let next_buyer = AtomicU64::new(0);
    let mut group = c.benchmark_group("commit_512");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function(name, |b| {
        b.to_async(runtime).iter_batched(
            || batch(&sale, &next_buyer),
            |orders| {
                let store = store.clone();
                async move {
                    let verdicts = store.commit(&orders).await.unwrap();
                    assert!(verdicts.iter().all(|v| *v == Verdict::Committed));
                }
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

fn commit(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("orders.db").display()
    );
    bench_store(c, &runtime, "sqlite", &sqlite);
    let pg = PostgresServer::start_with(Durability::Durable).unwrap();
    let url = runtime.block_on(pg.fresh_database()).unwrap();
    bench_store(c, &runtime, "postgres", &url);
}

criterion_group!(benches, commit);
criterion_main!(benches);
