//! Criterion benchmarks, against a throwaway redis-server (or `REDIS_URL`):
//!
//! `uncontended/*`: acquire + release of a free lock, per library (two round
//! trips each: the floor under any hand-off).
//!
//! The contended numbers (hand-off p50/p99 under 64 waiters, acquisitions/s,
//! commands per acquisition) are a fixed-window measurement, not a
//! per-iteration timing, so they come from the harness instead:
//! `cargo run --release -p stockade-lock-bench --example lock_bench`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use stockade_lock::{Lease, Locks};
use stockade_test_support::RedisServer;

fn uncontended(c: &mut Criterion) {
    // Started on the main thread, which lives as long as the benchmark.
    let server = std::env::var("REDIS_URL")
        .is_err()
        .then(|| RedisServer::start().expect("starting redis-server"));
    let url =
        std::env::var("REDIS_URL").unwrap_or_else(|_| server.as_ref().expect("a server").url());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let locks = runtime.block_on(Locks::connect(&url)).unwrap();
    let manager = rslock::LockManager::new(vec![url.clone()]);
    let lease = Duration::from_secs(10);

    let mut group = c.benchmark_group("uncontended");
    group.bench_function("stockade-lock", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = locks
                .try_lock("criterion", Lease::Fixed(lease))
                .await
                .unwrap();
            guard.unwrap().release().await.unwrap();
        });
    });
    group.bench_function("rslock", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = manager.acquire("criterion-rslock", lease).await.unwrap();
            guard.release().await;
        });
    });
    group.finish();
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
