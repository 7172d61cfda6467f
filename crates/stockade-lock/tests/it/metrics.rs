//! The metrics hooks report acquisitions, waits, contention and lost leases.

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use stockade_lock::{Lease, telemetry};

use crate::support::{client, cmd, lock_key, redis};

// A current-thread runtime: the recorder is installed for this thread, and
// every task of the test (watchdogs and attempts included) runs on it.
#[tokio::test(flavor = "current_thread")]
async fn acquisitions_waits_contention_and_losses_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _installed = metrics::set_default_local_recorder(&recorder);
    telemetry::describe();

    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let holder = a.try_lock("job", Lease::Watchdog).await.unwrap().unwrap();
    assert!(b.try_lock("job", Lease::Watchdog).await.unwrap().is_none());
    let waiter = tokio::spawn(async move { b.lock("job").await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    holder.release().await.unwrap();
    let guard = waiter.await.unwrap().unwrap();
    let _: i64 = cmd(&server.url(), &["DEL", &lock_key("job")]).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .unwrap();

    let mut seen = std::collections::HashMap::new();
    for (key, _unit, _description, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name().to_owned();
        let amount = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Histogram(samples) => samples.len() as f64,
            DebugValue::Gauge(g) => g.into_inner(),
        };
        *seen.entry(name).or_insert(0.0) += amount;
    }
    assert_eq!(seen.get(telemetry::ACQUIRED_TOTAL), Some(&2.0), "{seen:?}");
    assert!(
        seen.get(telemetry::CONTENDED_TOTAL)
            .is_some_and(|n| *n >= 2.0),
        "{seen:?}"
    );
    assert_eq!(seen.get(telemetry::WAIT_SECONDS), Some(&1.0), "{seen:?}");
    assert!(
        seen.get(telemetry::ACQUIRE_SECONDS)
            .is_some_and(|n| *n >= 3.0),
        "{seen:?}"
    );
    assert_eq!(seen.get(telemetry::LOST_TOTAL), Some(&1.0), "{seen:?}");
    assert!(
        seen.get(telemetry::RELEASED_TOTAL)
            .is_some_and(|n| *n >= 1.0),
        "{seen:?}"
    );
}
