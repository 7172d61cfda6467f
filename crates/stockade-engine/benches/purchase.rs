//! Purchase throughput per engine: one hot sale that never sells out, 64
//! concurrent tasks, every purchase by a distinct buyer. Redis and
//! PostgreSQL are throwaway servers on this machine (PostgreSQL with fsync
//! on, as in production); on PostgreSQL the engine is the order store
//! deciding itself (`stockade_store::StoreEngine`, reported as `postgres`).
//!
//! Run with `cargo bench -p stockade-engine --bench purchase`; criterion
//! reports purchases per second as "elem/s".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stockade_core::{Engine, Purchase, PurchaseOutcome, SaleSpec, SystemClock};
use stockade_engine::{MemoryEngine, RedisEngine, RedisEngineConfig};
use stockade_store::{OrderStore, StoreEngine};
use stockade_test_support::postgres_server::Durability;
use stockade_test_support::{PostgresServer, RedisServer};

const TASKS: u64 = 64;
const SALE: &str = "bench-hot-sale";

/// Runs `iters` purchases over 64 tasks and returns the wall time.
async fn purchases(engine: Arc<dyn Engine>, next_buyer: Arc<AtomicU64>, iters: u64) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let engine = Arc::clone(&engine);
            let next_buyer = Arc::clone(&next_buyer);
            // Spread iters over the tasks, remainder to the first ones.
            let count = iters / TASKS + u64::from(task < iters % TASKS);
            tokio::spawn(async move {
                for _ in 0..count {
                    let buyer = next_buyer.fetch_add(1, Ordering::Relaxed);
                    let purchase = Purchase::new(SALE, format!("b{buyer}"), 1).unwrap();
                    let outcome = engine.purchase(&purchase).await.unwrap();
                    assert!(
                        matches!(outcome, PurchaseOutcome::Purchased { .. }),
                        "{outcome:?}"
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

fn bench_engine(c: &mut Criterion, runtime: &tokio::runtime::Runtime, engine: Arc<dyn Engine>) {
    runtime.block_on(async {
        let spec = SaleSpec::builder(SALE, 1_000_000_000)
            .unwrap()
            .build()
            .unwrap();
        engine.create_sale(&spec).await.unwrap();
    });
    let next_buyer = Arc::new(AtomicU64::new(0));
    let mut group = c.benchmark_group("purchase_64_tasks");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function(engine.name(), |b| {
        b.to_async(runtime)
            .iter_custom(|iters| purchases(Arc::clone(&engine), Arc::clone(&next_buyer), iters));
    });
    group.finish();
}

fn engines(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = Arc::new(SystemClock);

    bench_engine(c, &runtime, Arc::new(MemoryEngine::new(clock.clone())));

    let redis = RedisServer::start().expect("redis-server must be installed");
    let engine = runtime
        .block_on(RedisEngine::connect(
            &RedisEngineConfig::new(redis.url()),
            clock.clone(),
        ))
        .unwrap();
    bench_engine(c, &runtime, Arc::new(engine));

    let postgres =
        PostgresServer::start_with(Durability::Durable).expect("PostgreSQL must be installed");
    let store = runtime
        .block_on(async {
            let url = postgres.fresh_database().await.unwrap();
            OrderStore::open(&url).await
        })
        .unwrap();
    bench_engine(c, &runtime, Arc::new(StoreEngine::new(store, clock)));
}

criterion_group!(benches, engines);
criterion_main!(benches);
