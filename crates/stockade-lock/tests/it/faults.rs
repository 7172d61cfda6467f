//! Faults: Redis unreachable, paused, its script cache flushed; bad input.

use std::time::Duration;

use stockade_lock::{ErrorKind, Lease, Locks};

use crate::support::{client, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_nothing_is_unavailable() {
    let port = stockade_test_support::free_port().unwrap();
    let error = Locks::builder()
        .node(format!("redis://127.0.0.1:{port}"))
        .command_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_is_unavailable_not_a_hang() {
    let server = redis();
    let locks = client(&server.url()).await;
    server.pause();
    let outcome = locks.try_lock("job", Lease::Watchdog).await;
    server.resume();
    let error = outcome.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_is_reloaded_transparently() {
    let server = redis();
    let locks = client(&server.url()).await;
    let guard = locks.lock("job").await.unwrap();
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    guard.release().await.unwrap();
    server.command(&["SCRIPT", "FLUSH"]).unwrap();
    let guard = locks.lock("job").await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarting_between_acquisitions_is_survived() {
    let mut server = redis();
    let locks = client(&server.url()).await;
    let first = locks.lock("job").await.unwrap();
    first.release().await.unwrap();
    server.restart().unwrap();
    // The first call after the restart may fail (the old connection died);
    // the error says to retry, and a retry reconnects.
    let guard = loop {
        match locks.try_lock("job", Lease::Watchdog).await {
            Ok(guard) => break guard.unwrap(),
            Err(error) => {
                assert!(error.is_retryable(), "{error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_leases_are_invalid() {
    let server = redis();
    let locks = client(&server.url()).await;
    for name in ["", "a{b}"] {
        let error = locks.try_lock(name, Lease::Watchdog).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
    }
    let error = locks
        .try_lock("job", Duration::from_millis(1))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_keep_growing_after_redis_loses_its_data() {
    let mut server = redis();
    let locks = client(&server.url()).await;
    let mut last = None;
    for _ in 0..3 {
        let guard = locks.lock("job").await.unwrap();
        assert!(last.is_none_or(|last| guard.fence() > last));
        last = Some(guard.fence());
        guard.release().await.unwrap();
    }
    // The counter is gone with the data; the next token must still be larger
    // (it is reseeded from the server clock).
    server.restart().unwrap();
    let guard = loop {
        match locks.lock("job").await {
            Ok(guard) => break guard,
            Err(error) => assert!(error.is_retryable(), "{error}"),
        }
    };
    assert!(
        guard.fence() > last.unwrap(),
        "{} after {:?}",
        guard.fence(),
        last
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_keep_growing_when_the_counter_lags_behind() {
    // After a failover to a replica that had not received the last
    // increments, the counter is older than tokens already handed out (or
    // missing). Simulated here by setting it back, or deleting it, between
    // two acquisitions.
    let server = redis();
    let url = server.url();
    let locks = client(&url).await;
    let fence_key = format!("{}:fence", crate::support::lock_key("job"));
    let mut last = locks.lock("job").await.unwrap();
    let first_counter: String = crate::support::cmd(&url, &["GET", &fence_key]).await;
    for lag in ["set back", "deleted", "set back", "deleted"] {
        let previous = last.fence();
        last.release().await.unwrap();
        if lag == "set back" {
            let _: String = crate::support::cmd(&url, &["SET", &fence_key, &first_counter]).await;
        } else {
            let _: i64 = crate::support::cmd(&url, &["DEL", &fence_key]).await;
        }
        last = locks.lock("job").await.unwrap();
        assert!(
            last.fence() > previous,
            "counter {lag}: token {} after {previous}",
            last.fence()
        );
    }
    last.release().await.unwrap();
}
