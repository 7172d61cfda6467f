//! Cancellation safety: dropping an acquire future, or a guard, never leaves
//! a lock behind.

use std::time::Duration;

use stockade_lock::Lease;

use crate::support::{client, cmd, lock_key, redis};

/// Waits (bounded) until the lock key is gone.
async fn wait_until_free(url: &str, name: &str) -> bool {
    for _ in 0..200 {
        let value: Option<String> = cmd(url, &["GET", &lock_key(name)]).await;
        if value.is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_after_redis_granted_it_releases_the_lock() {
    let server = redis();
    let url = server.url();
    let locks = client(&url).await;
    // Warm the connection and the script cache.
    locks
        .try_lock("warm", Lease::Watchdog)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();

    // Freeze Redis so that the acquire script is sent but not answered, drop
    // the acquire future, then let Redis run the script and answer.
    server.pause();
    let attempt = tokio::time::timeout(
        Duration::from_millis(100),
        locks.try_lock("job", Duration::from_secs(30)),
    )
    .await;
    assert!(
        attempt.is_err(),
        "the acquire cannot finish while Redis is frozen"
    );
    server.resume();

    // The script ran after all (the key was set), but nobody was there to
    // take the guard: it was released in the background.
    assert!(
        wait_until_free(&url, "job").await,
        "the granted lock was not released"
    );
    let guard = locks.try_lock("job", Lease::Watchdog).await.unwrap();
    assert!(guard.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_waiters_and_attempts_at_random_points_leaves_no_lock() {
    let server = redis();
    let url = server.url();
    let (a, b) = (client(&url).await, client(&url).await);
    for round in 0..40u64 {
        // A holder, and a waiter that gives up at an arbitrary moment, while
        // the holder releases at another.
        let holder = a
            .try_lock("job", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        let give_up = Duration::from_micros(round * 137 % 2000);
        let release_after = Duration::from_micros(round * 251 % 2000);
        let waiter = tokio::spawn({
            let b = b.clone();
            async move {
                tokio::time::timeout(
                    give_up,
                    b.lock_with("job", Duration::from_secs(30), Duration::from_secs(30)),
                )
                .await
            }
        });
        tokio::time::sleep(release_after).await;
        holder.release().await.unwrap();
        match waiter.await.unwrap() {
            // It got the lock in time: dropping the guard releases it.
            Ok(guard) => drop(guard.unwrap()),
            // It gave up: whatever it was doing must not leave a lock.
            Err(_elapsed) => {}
        }
        if !wait_until_free(&url, "job").await {
            let value: Option<String> = cmd(&url, &["GET", &lock_key("job")]).await;
            let pttl: i64 = cmd(&url, &["PTTL", &lock_key("job")]).await;
            let queue: Vec<String> =
                cmd(&url, &["LRANGE", "stockade-lock:{job}:queue", "0", "-1"]).await;
            let time: Vec<String> = cmd(&url, &["TIME"]).await;
            panic!(
                "round {round} left the lock held: {value:?} {pttl} {queue:?} {time:?} give_up {give_up:?} release_after {release_after:?}"
            );
        }
    }
    let channels: Vec<String> = cmd(&url, &["PUBSUB", "CHANNELS"]).await;
    assert!(
        channels.is_empty(),
        "abandoned waiters unsubscribe: {channels:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_guard_releases_it_without_blocking() {
    let server = redis();
    let url = server.url();
    let (a, b) = (client(&url).await, client(&url).await);
    let guard = a.lock("job").await.unwrap();
    let waiter = tokio::spawn(async move { b.lock("job").await.map(|g| g.fence()) });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let fence = guard.fence();
    drop(guard);
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter got the dropped lock")
        .unwrap()
        .unwrap();
    assert!(next > fence);
}
