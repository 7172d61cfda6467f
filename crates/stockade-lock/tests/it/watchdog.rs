//! The watchdog: long critical sections stay protected; lost locks are
//! noticed and critical sections cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use stockade_lock::{ErrorKind, Lease, LockError, LostReason};

use crate::support::{WATCHDOG_LEASE, client, cmd, lock_key, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_section_of_five_leases_alive() {
    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let url = server.url();
    let outcome = a
        .run("long-job", async |guard| {
            // Five leases long; check along the way that nobody else gets in.
            for _ in 0..10 {
                tokio::time::sleep(WATCHDOG_LEASE / 2).await;
                assert!(
                    b.try_lock("long-job", Lease::Watchdog)
                        .await
                        .unwrap()
                        .is_none()
                );
                assert!(!guard.is_lost());
            }
            let ttl: i64 = cmd(&url, &["PTTL", &lock_key("long-job")]).await;
            assert!(ttl > 0, "the lease is being extended (PTTL {ttl})");
            guard.fence()
        })
        .await;
    let fence = outcome.expect("the section ran to the end under the lock");
    // Released at the end: free again.
    let next = b
        .try_lock("long-job", Lease::Watchdog)
        .await
        .unwrap()
        .unwrap();
    assert!(next.fence() > fence);
    next.release().await.unwrap();
}

/// Sets `flag` when dropped: shows that a cancelled section was dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lock_is_reported_lost_and_run_cancels_the_section() {
    let server = redis();
    let locks = client(&server.url()).await;

    // The guard's view.
    let guard = locks.lock("job").await.unwrap();
    let _: i64 = cmd(&server.url(), &["DEL", &lock_key("job")]).await;
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost() completes");
    assert_eq!(reason, LostReason::Taken);
    assert!(guard.is_lost());
    drop(guard);

    // `run`'s view: the section is cancelled, not run to completion.
    let (finished, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let url = server.url();
    let outcome = locks
        .run("job", async |_guard| {
            let _sentinel = SetOnDrop(dropped.clone());
            let _: i64 = cmd(&url, &["DEL", &lock_key("job")]).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            finished.store(true, Ordering::SeqCst);
        })
        .await;
    let error = outcome.unwrap_err();
    assert!(
        matches!(
            error,
            LockError::Lost {
                reason: LostReason::Taken,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Lost);
    assert!(!finished.load(Ordering::SeqCst));
    assert!(dropped.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_is_reported_lost_and_run_cancels_the_section() {
    let mut server = redis();
    let locks = client(&server.url()).await;
    let finished = Arc::new(AtomicBool::new(false));
    let (started, running) = tokio::sync::oneshot::channel();
    let section = {
        let (locks, finished) = (locks.clone(), finished.clone());
        tokio::spawn(async move {
            locks
                .run("job", async move |_guard| {
                    let _ = started.send(());
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    finished.store(true, Ordering::SeqCst);
                })
                .await
        })
    };
    // Once the section holds the lock, lose all of Redis's data.
    running.await.unwrap();
    server.restart().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(15), section)
        .await
        .expect("run returns once the loss is noticed")
        .unwrap();
    let error = outcome.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Lost, "{error}");
    assert!(!finished.load(Ordering::SeqCst));
    // The restarted server works for the next holder.
    let guard = locks.lock("job").await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_can_be_spawned_and_returns_the_sections_value() {
    let server = redis();
    let locks = client(&server.url()).await;
    let task = tokio::spawn({
        let locks = locks.clone();
        async move { locks.run("job", async |guard| guard.name().len()).await }
    });
    assert_eq!(task.await.unwrap().unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_makes_the_lease_run_out_and_the_guard_knows() {
    let server = redis();
    let locks = client(&server.url()).await;
    let guard = locks.lock("job").await.unwrap();
    // The watchdog cannot extend the lease while Redis answers nothing.
    server.pause();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await;
    // The guard gives up a little before the key expires (the clock-drift
    // allowance); stay frozen until Redis's own lease is over too.
    tokio::time::sleep(WATCHDOG_LEASE / 2).await;
    server.resume();
    assert_eq!(reason.expect("lost() completes"), LostReason::Expired);
    // The extensions sent while frozen find the lock expired, and so does the
    // release: reported as not held (or Redis as unavailable if it is still
    // catching up), never as success.
    let error = guard.release().await.unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::NotHeld | ErrorKind::Unavailable),
        "{error}"
    );
}
