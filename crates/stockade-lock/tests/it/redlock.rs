//! Redlock over three independent nodes.

use std::time::Duration;

use stockade_lock::{ErrorKind, Lease, Locks};
use stockade_test_support::RedisServer;

use crate::support::{cmd, lock_key, redis};

async fn redlock(servers: &[RedisServer]) -> Locks {
    let mut builder = Locks::builder()
        .watchdog_lease(Duration::from_millis(900))
        .command_timeout(Duration::from_millis(250));
    for server in servers {
        builder = builder.node(server.url());
    }
    builder.connect().await.unwrap()
}

fn three_servers() -> Vec<RedisServer> {
    (0..3).map(|_| redis()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_with_one_node_down_and_fails_with_two_down() {
    let mut servers = three_servers();
    let locks = redlock(&servers).await;
    assert_eq!(locks.nodes(), (3, 2));

    let guard = locks
        .try_lock("job", Lease::Watchdog)
        .await
        .unwrap()
        .unwrap();
    let mut taken = 0;
    for server in &servers {
        let value: Option<String> = cmd(&server.url(), &["GET", &lock_key("job")]).await;
        taken += usize::from(value.is_some());
    }
    assert!(taken >= 2, "the lock is taken on a majority of the nodes");
    guard.release().await.unwrap();

    servers[0].kill();
    let guard = locks
        .try_lock("job", Lease::Watchdog)
        .await
        .unwrap()
        .expect("two of three nodes are a majority");
    // The watchdog keeps it alive on the two live nodes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!guard.is_lost());
    guard.release().await.unwrap();

    servers[1].kill();
    let error = locks.try_lock("job", Lease::Watchdog).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.is_retryable());
    // What is left of a failed attempt on the live node is given back.
    let url = servers[2].url();
    let mut left: Option<String> = Some(String::new());
    for _ in 0..100 {
        left = cmd(&url, &["GET", &lock_key("job")]).await;
        if left.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(left.is_none(), "the minority vote was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_accounts_for_the_time_spent_acquiring() {
    let servers = three_servers();
    let locks = Locks::builder()
        .node(servers[0].url())
        .node(servers[1].url())
        .node(servers[2].url())
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    // Two of three nodes hold every client for 400 ms: the quorum cannot be
    // reached before one of them answers.
    for server in &servers[..2] {
        let _: String = cmd(&server.url(), &["CLIENT", "PAUSE", "400", "ALL"]).await;
    }
    let lease = Duration::from_secs(2);
    let started = std::time::Instant::now();
    let guard = locks.try_lock("job", lease).await.unwrap().unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(390), "{elapsed:?}");
    // validity = lease − elapsed − drift (1 % + 2 ms): at most 2000 − 400 − 22 ms.
    let validity = guard.validity();
    assert!(
        validity <= lease - Duration::from_millis(400) - Duration::from_millis(22),
        "validity {validity:?} after {elapsed:?}"
    );
    assert!(validity > Duration::ZERO);
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_grow_across_quorums_even_when_node_counters_diverge() {
    let mut servers = three_servers();
    // Node 0's counter is far ahead of the others (it granted acquisitions
    // that never reached a majority, say).
    let fence_key = format!("{}:fence", lock_key("job"));
    for (server, value) in servers.iter().zip(["100", "5", "5"]) {
        let _: String = cmd(&server.url(), &["SET", &fence_key, value]).await;
    }
    let locks = Locks::builder()
        .node(servers[0].url())
        .node(servers[1].url())
        .node(servers[2].url())
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    // The first majority is nodes 0 and 1 (node 2 is held up): the token is
    // node 0's 101, and node 1's counter is raised to it.
    let _: String = cmd(&servers[2].url(), &["CLIENT", "PAUSE", "300", "ALL"]).await;
    let first = locks
        .try_lock("job", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    let first_fence = first.fence();
    assert_eq!(first_fence.get(), 101);
    first.release().await.unwrap();

    // The next majority is nodes 1 and 2. Had node 1's counter not been
    // raised, it would draw max(7, 7) = 7 < 101.
    servers[0].kill();
    let second = locks
        .lock_with("job", Duration::from_secs(5), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        second.fence() > first_fence,
        "{} after {first_fence}",
        second.fence()
    );
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_excludes_and_hands_over() {
    let servers = three_servers();
    let (a, b) = (redlock(&servers).await, redlock(&servers).await);
    let guard = a.try_lock("job", Lease::Watchdog).await.unwrap().unwrap();
    assert!(b.try_lock("job", Lease::Watchdog).await.unwrap().is_none());
    let waiter = tokio::spawn(async move { b.lock("job").await.map(|g| g.fence()) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fence = guard.fence();
    guard.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter is woken by the release")
        .unwrap()
        .unwrap();
    assert!(next > fence);
}
