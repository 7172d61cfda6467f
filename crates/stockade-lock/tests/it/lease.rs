//! Fixed leases: expiry, and releases that come too late.

use std::time::Duration;

use stockade_lock::{ErrorKind, LostReason};

use crate::support::{client, cmd, lock_key, redis};

const LEASE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_expires_and_the_guard_knows() {
    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let guard = a.try_lock("report", LEASE).await.unwrap().unwrap();
    assert!(!guard.is_lost());
    assert!(guard.validity() <= LEASE);
    assert!(b.try_lock("report", LEASE).await.unwrap().is_none());

    // Nobody releases it: the lease runs out and `lost()` says so.
    assert_eq!(guard.lost().await, LostReason::Expired);
    assert!(guard.is_lost());
    assert_eq!(guard.validity(), Duration::ZERO);

    // Someone else can take it now (waiting out the last milliseconds of the
    // key's expiry, which the guard's drift allowance made it give up early).
    let next = b
        .lock_with("report", Duration::from_secs(5), LEASE * 10)
        .await
        .unwrap();
    assert!(next.fence() > guard.fence());
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_after_expiry_is_reported() {
    let server = redis();
    let locks = client(&server.url()).await;
    let guard = locks.try_lock("report", LEASE).await.unwrap().unwrap();
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let error = guard.release().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotHeld, "{error}");
    assert!(!error.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_release_never_deletes_the_new_holders_lock() {
    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let stale = a.try_lock("report", LEASE).await.unwrap().unwrap();
    let _ = stale.lost().await;
    let holder = b
        .lock_with("report", Duration::from_secs(5), Duration::from_secs(10))
        .await
        .unwrap();
    let before: String = cmd(&server.url(), &["GET", &lock_key("report")]).await;

    // The non-holder's release is refused...
    let error = stale.release().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotHeld, "{error}");
    // ...and the holder's lock is untouched.
    let after: String = cmd(&server.url(), &["GET", &lock_key("report")]).await;
    assert_eq!(before, after);
    assert!(a.try_lock("report", LEASE).await.unwrap().is_none());
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_can_be_extended_while_held_but_not_after() {
    let server = redis();
    let locks = client(&server.url()).await;
    let guard = locks.try_lock("report", LEASE).await.unwrap().unwrap();
    guard.extend(Duration::from_secs(10)).await.unwrap();
    assert!(guard.validity() > LEASE);
    let ttl: i64 = cmd(&server.url(), &["PTTL", &lock_key("report")]).await;
    assert!(ttl > LEASE.as_millis() as i64, "PTTL {ttl}");
    guard.release().await.unwrap();

    let guard = locks.try_lock("report", LEASE).await.unwrap().unwrap();
    let _: i64 = cmd(&server.url(), &["DEL", &lock_key("report")]).await;
    let error = guard.extend(Duration::from_secs(10)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotHeld);
    assert!(guard.is_lost());
}
