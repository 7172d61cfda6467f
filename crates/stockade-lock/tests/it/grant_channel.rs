//! Grant messages go on the granted waiter's client's own channel: a hand-off
//! wakes that client alone, and a grant is not lost with the pub/sub
//! connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use stockade_lock::LockGuard;

use crate::handoff::{LONG, patient_client, until_queued};
use crate::support::{cmd, redis};

/// Subscribers of `channel` (`PUBSUB NUMSUB`; pattern subscribers are not
/// counted).
async fn subscribers(url: &str, channel: &str) -> i64 {
    let reply: Vec<redis::Value> = cmd(url, &["PUBSUB", "NUMSUB", channel]).await;
    match reply.as_slice() {
        [_, redis::Value::Int(count)] => *count,
        other => panic!("PUBSUB NUMSUB answered {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_heard_by_the_granted_waiters_client_alone() {
    let server = redis();
    let url = server.url();
    let holder_client = patient_client(&url).await;
    let holder = holder_client.try_lock("job", LONG).await.unwrap().unwrap();

    // Hears every message on every lock channel and grant channel.
    let mut sniffer = redis::Client::open(url.as_str())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    sniffer.psubscribe("stockade-lock:*").await.unwrap();
    let mut messages = sniffer.into_on_message();

    // One waiter in each of three clients.
    let acquired = Arc::new(Mutex::new(Vec::<LockGuard>::new()));
    let mut tasks = Vec::new();
    for index in 0..3 {
        let (locks, acquired) = (patient_client(&url).await, Arc::clone(&acquired));
        tasks.push(tokio::spawn(async move {
            let guard = locks.lock_with("job", LONG, LONG).await.unwrap();
            acquired.lock().unwrap().push(guard);
        }));
        until_queued(&url, "job", index + 1).await;
    }
    // Nobody listens on the lock's own channel: each client listens on a
    // grant channel of its own.
    assert_eq!(subscribers(&url, "stockade-lock:{job}:released").await, 0);
    let mut listened: Vec<String> =
        cmd(&url, &["PUBSUB", "CHANNELS", "stockade-lock:grants:*"]).await;
    assert_eq!(listened.len(), 3, "{listened:?}");
    for channel in &listened {
        assert_eq!(subscribers(&url, channel).await, 1, "on {channel}");
    }

    holder.release().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the release published the grant")
        .unwrap();
    // On one client's channel: the other two waiting clients are not woken
    // by a hand-off that is not theirs.
    let channel = message.get_channel_name().to_owned();
    assert!(listened.contains(&channel), "{channel} not in {listened:?}");

    // Drain: every waiter gets its turn, each grant on its own client's
    // channel.
    let mut channels = vec![channel];
    for turn in 0..3 {
        let guard = loop {
            if let Some(guard) = acquired.lock().unwrap().pop() {
                break guard;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        guard.release().await.unwrap();
        if turn < 2 {
            let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
                .await
                .expect("the release published the grant")
                .unwrap();
            channels.push(message.get_channel_name().to_owned());
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    channels.sort();
    listened.sort();
    assert_eq!(
        channels, listened,
        "each grant on its waiter's client's channel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_its_grant_when_its_pubsub_connection_was_killed() {
    let server = redis();
    let url = server.url();
    let holder_client = patient_client(&url).await;
    // A 30 s fallback: only the reconnection can wake the waiter in time.
    let waiter_client = patient_client(&url).await;
    let holder = holder_client.try_lock("job", LONG).await.unwrap().unwrap();
    let waiting = tokio::spawn(async move { waiter_client.lock_with("job", LONG, LONG).await });
    until_queued(&url, "job", 1).await;

    // The pub/sub connection dies, and the lock is handed over at once: the
    // grant message is published while the connection is down, or just
    // after it is back.
    let killed: i64 = cmd(&url, &["CLIENT", "KILL", "TYPE", "pubsub"]).await;
    assert_eq!(killed, 1);
    holder.release().await.unwrap();

    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the reconnection made the waiter check, long before its fallback")
        .unwrap()
        .unwrap();
    let owner: Option<String> = cmd(&url, &["GET", "stockade-lock:{job}"]).await;
    assert!(owner.is_some());
    guard.release().await.unwrap();
}
