//! Waiting: waiters sleep on the release notification instead of polling,
//! and share one pub/sub connection per client.

use std::time::Duration;

use stockade_lock::{ErrorKind, Lease, Locks};

use crate::support::{calls_between, client, cmd, command_calls, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_issues_no_commands_while_waiting_and_wakes_on_release() {
    let server = redis();
    let url = server.url();
    // A long lease and a long fallback: if the waiter did not wake on the
    // release message it would sleep for about ten seconds.
    let waiter_client = Locks::builder()
        .node(&url)
        .max_fallback_retry(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    let holder_client = client(&url).await;
    let holder = holder_client
        .try_lock("slot", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();

    let before_wait = command_calls(&url).await;
    let waiter = tokio::spawn(async move {
        waiter_client
            .lock_with("slot", Duration::from_secs(20), Duration::from_secs(10))
            .await
    });
    // Let the waiter settle into waiting, then watch it for a while.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = command_calls(&url).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_wait = command_calls(&url).await;

    // Getting into the wait: a first attempt, SUBSCRIBE (on the client's
    // pub/sub connection, opened now), a second attempt. (`INFO
    // commandstats` also counts the commands the scripts run inside.)
    let delta = |name: &str| settled.get(name).unwrap_or(&0) - before_wait.get(name).unwrap_or(&0);
    assert_eq!(delta("evalsha"), 2, "{before_wait:?} {settled:?}");
    assert_eq!(delta("subscribe"), 1, "{before_wait:?} {settled:?}");
    // Then nothing at all, for 1.5 s: no polling.
    let while_waiting = calls_between(&settled, &after_wait);
    assert_eq!(
        while_waiting, 0,
        "the waiter polled while waiting: {settled:?} {after_wait:?}"
    );

    holder.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter woke on the release, long before the lease or fallback")
        .unwrap()
        .unwrap();
    assert_eq!(guard.name(), "slot");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_a_client_share_one_pubsub_connection() {
    let server = redis();
    let url = server.url();
    let holder_client = client(&url).await;
    let waiting_client = client(&url).await;
    let mut holders = Vec::new();
    for name in ["a", "b", "c"] {
        holders.push(
            holder_client
                .try_lock(name, Duration::from_secs(10))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let mut waiters = Vec::new();
    for i in 0..12 {
        let locks = waiting_client.clone();
        let name = ["a", "b", "c"][i % 3];
        waiters.push(tokio::spawn(async move {
            let guard = locks
                .lock_with(name, Duration::from_secs(20), Duration::from_secs(10))
                .await
                .unwrap();
            guard.release().await.unwrap();
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pubsub_clients: String = cmd(&url, &["CLIENT", "LIST", "TYPE", "pubsub"]).await;
    assert_eq!(
        pubsub_clients.lines().count(),
        1,
        "twelve waiters on three locks use one pub/sub connection:\n{pubsub_clients}"
    );
    // On one channel: the client's grant channel, whatever the lock.
    let channels: Vec<String> = cmd(&url, &["PUBSUB", "CHANNELS"]).await;
    assert_eq!(channels.len(), 1, "{channels:?}");
    assert!(
        channels[0].starts_with("stockade-lock:grants:"),
        "{channels:?}"
    );
    let numsub: Vec<redis::Value> = cmd(&url, &["PUBSUB", "NUMSUB", &channels[0]]).await;
    assert_eq!(numsub.get(1), Some(&redis::Value::Int(1)));

    for holder in holders {
        holder.release().await.unwrap();
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
    // The last waiter out unsubscribed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let channels: Vec<String> = cmd(&url, &["PUBSUB", "CHANNELS"]).await;
    assert!(channels.is_empty(), "{channels:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_times_out_and_try_lock_fails_fast() {
    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let holder = a.lock("busy").await.unwrap();
    assert!(b.try_lock("busy", Lease::Watchdog).await.unwrap().is_none());
    let error = b
        .lock_with("busy", Duration::from_millis(300), Lease::Watchdog)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(error.is_retryable());
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_takes_over_a_crashed_holders_lock_when_its_lease_runs_out() {
    let server = redis();
    let url = server.url();
    let (a, b) = (client(&url).await, client(&url).await);
    let holder = a
        .try_lock("orphan", Duration::from_millis(500))
        .await
        .unwrap()
        .unwrap();
    // The holder "crashes": its guard is leaked, no release is ever sent.
    std::mem::forget(holder);
    // No release message will come: the waiter retries when the lease ends.
    let guard = b
        .lock_with("orphan", Duration::from_secs(10), Duration::from_secs(10))
        .await
        .unwrap();
    guard.release().await.unwrap();
}
