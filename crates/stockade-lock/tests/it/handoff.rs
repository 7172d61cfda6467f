//! Hand-off: waiters queue in Redis, and a release grants the lock straight
//! to the first live waiter in line, with one message.

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_lock::{FencingToken, LockGuard, Locks};
use tokio::task::JoinHandle;

use crate::support::{cmd, command_calls, lock_key, redis};

pub(crate) const LONG: Duration = Duration::from_secs(30);

pub(crate) fn queue_key(name: &str) -> String {
    format!("{}:queue", lock_key(name))
}

/// A client whose waiters never re-check on their own within a test (a long
/// fallback): whatever they do, they do because of a grant.
pub(crate) async fn patient_client(url: &str) -> Locks {
    Locks::builder()
        .node(url)
        .max_fallback_retry(LONG)
        .connect()
        .await
        .unwrap()
}

async fn queue_length(url: &str, name: &str) -> usize {
    cmd(url, &["LLEN", &queue_key(name)]).await
}

/// Waits (bounded) until the queue holds `length` entries.
pub(crate) async fn until_queued(url: &str, name: &str, length: usize) {
    for _ in 0..500 {
        if queue_length(url, name).await == length {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "the queue of {name} never reached {length} entries (it has {})",
        queue_length(url, name).await
    );
}

/// Waits (bounded) until the lock key is gone.
async fn until_free(url: &str, name: &str) {
    for _ in 0..300 {
        let value: Option<String> = cmd(url, &["GET", &lock_key(name)]).await;
        if value.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the lock {name} stayed held");
}

/// Polls `waiting` (an acquire future) until the queue holds `length`
/// entries, then stops polling it: the waiter is queued and will not run
/// again unless polled.
async fn poll_until_queued<F: Future + Unpin>(
    waiting: &mut F,
    url: &str,
    name: &str,
    length: usize,
) {
    for _ in 0..500 {
        let polled = tokio::time::timeout(Duration::from_millis(5), &mut *waiting).await;
        assert!(polled.is_err(), "the lock was free");
        if queue_length(url, name).await == length {
            return;
        }
    }
    panic!("the waiter never queued");
}

/// A waiter that records the order it got the lock in and its token, then
/// releases at once.
fn waiter(
    locks: &Locks,
    name: &'static str,
    index: usize,
    order: &Arc<Mutex<Vec<(usize, FencingToken)>>>,
) -> JoinHandle<()> {
    let (locks, order) = (locks.clone(), Arc::clone(order));
    tokio::spawn(async move {
        let guard = locks.lock_with(name, LONG, LONG).await.unwrap();
        order.lock().unwrap().push((index, guard.fence()));
        guard.release().await.unwrap();
    })
}

/// Ten waiters in two clients queue one after the other behind a holder;
/// returns the order they got the lock in, with their tokens, and the
/// holder's token.
async fn ten_in_line(url: &str) -> (Vec<(usize, FencingToken)>, FencingToken) {
    let clients = [
        patient_client(url).await,
        patient_client(url).await,
        patient_client(url).await,
    ];
    let holder = clients[0].try_lock("line", LONG).await.unwrap().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for index in 0..10 {
        tasks.push(waiter(&clients[1 + index % 2], "line", index, &order));
        until_queued(url, "line", index + 1).await;
    }
    let holder_fence = holder.fence();
    holder.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("every waiter got its turn")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    (order, holder_fence)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_follow_the_order_of_arrival() {
    let server = redis();
    let (order, _) = ten_in_line(&server.url()).await;
    let indices: Vec<usize> = order.iter().map(|(index, _)| *index).collect();
    assert_eq!(
        indices,
        (0..10).collect::<Vec<_>>(),
        "first come, first served"
    );
    assert_eq!(queue_length(&server.url(), "line").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_keep_fencing_tokens_increasing() {
    let server = redis();
    let (order, holder_fence) = ten_in_line(&server.url()).await;
    let mut previous = holder_fence;
    for (index, fence) in order {
        assert!(
            fence > previous,
            "waiter {index} got token {fence} after {previous}"
        );
        previous = fence;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_exactly_one_waiter_with_one_message() {
    let server = redis();
    let url = server.url();
    let clients = [
        patient_client(&url).await,
        patient_client(&url).await,
        patient_client(&url).await,
    ];
    let holder = clients[0].try_lock("one", LONG).await.unwrap().unwrap();
    // Six waiters in two clients; whoever gets the lock keeps it.
    let acquired = Arc::new(Mutex::new(Vec::<LockGuard>::new()));
    let mut tasks = Vec::new();
    for index in 0..6 {
        let (locks, acquired) = (clients[1 + index % 2].clone(), Arc::clone(&acquired));
        tasks.push(tokio::spawn(async move {
            let guard = locks.lock_with("one", LONG, LONG).await.unwrap();
            acquired.lock().unwrap().push(guard);
        }));
    }
    until_queued(&url, "one", 6).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let before = command_calls(&url).await;
    holder.release().await.unwrap();
    for _ in 0..200 {
        if !acquired.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Give any other waiter that was woken the time to try.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = command_calls(&url).await;
    let delta = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);

    assert_eq!(acquired.lock().unwrap().len(), 1, "one waiter holds it");
    // The release script, and nothing else: no waiter tried and failed.
    assert_eq!(delta("evalsha"), 1, "{before:?}\n{after:?}");
    assert_eq!(delta("publish"), 1, "one message: {before:?}\n{after:?}");
    assert_eq!(queue_length(&url, "one").await, 5);

    // Drain: each release hands on to the next.
    for _ in 0..6 {
        let guard = loop {
            if let Some(guard) = acquired.lock().unwrap().pop() {
                break guard;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        guard.release().await.unwrap();
    }
    for task in tasks {
        task.await.unwrap();
    }
    until_free(&url, "one").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_line_without_blocking_it() {
    let server = redis();
    let url = server.url();
    let (a, b, c) = (
        patient_client(&url).await,
        patient_client(&url).await,
        patient_client(&url).await,
    );
    let holder = a.try_lock("job", LONG).await.unwrap().unwrap();
    let quitter = tokio::spawn({
        let b = b.clone();
        async move { b.lock_with("job", LONG, LONG).await }
    });
    until_queued(&url, "job", 1).await;
    let stayer = tokio::spawn(async move { c.lock_with("job", LONG, LONG).await });
    until_queued(&url, "job", 2).await;

    // The first in line gives up (its future is dropped).
    quitter.abort();
    until_queued(&url, "job", 1).await;
    holder.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), stayer)
        .await
        .expect("the next in line got the lock at once")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    until_free(&url, "job").await;

    // A bounded wait that runs out leaves the line too.
    let holder = a.try_lock("job", LONG).await.unwrap().unwrap();
    let error = b
        .lock_with("job", Duration::from_millis(300), LONG)
        .await
        .unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert_eq!(queue_length(&url, "job").await, 0);
    holder.release().await.unwrap();
    until_free(&url, "job").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_races_the_waiters_departure_is_passed_on() {
    let server = redis();
    let url = server.url();
    let (a, b, c) = (
        patient_client(&url).await,
        patient_client(&url).await,
        patient_client(&url).await,
    );
    let holder = a.try_lock("job", LONG).await.unwrap().unwrap();
    // The first waiter queues, then stops being polled: it never sees its
    // grant before it is dropped.
    let mut first = Box::pin(b.lock_with("job", LONG, LONG));
    poll_until_queued(&mut first, &url, "job", 1).await;
    let second = tokio::spawn(async move { c.lock_with("job", LONG, LONG).await });
    until_queued(&url, "job", 2).await;

    holder.release().await.unwrap();
    // The lock is the first waiter's now...
    let owner: Option<String> = cmd(&url, &["GET", &lock_key("job")]).await;
    assert!(owner.is_some());
    // ... and it gives up: its departure passes the lock to the second.
    drop(first);
    let guard = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the grant was passed on, not left to expire")
        .unwrap()
        .unwrap();
    let owner_now: Option<String> = cmd(&url, &["GET", &lock_key("job")]).await;
    assert_ne!(owner_now, owner);
    guard.release().await.unwrap();
    until_free(&url, "job").await;

    // And with nobody behind it, the lock is freed.
    let holder = a.try_lock("job", LONG).await.unwrap().unwrap();
    {
        let mut alone = pin!(b.lock_with("job", LONG, LONG));
        poll_until_queued(&mut alone, &url, "job", 1).await;
        holder.release().await.unwrap();
    }
    until_free(&url, "job").await;
    assert_eq!(queue_length(&url, "job").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_is_skipped_once_its_deadline_has_passed() {
    let server = redis();
    let url = server.url();
    let holder_client = patient_client(&url).await;
    // The dead waiter's client re-checks (and so renews its entry) every
    // 100 ms: its entry's deadline is 2 × 100 + 200 ms after each renewal.
    let doomed_client = Locks::builder()
        .node(&url)
        .max_fallback_retry(Duration::from_millis(100))
        .command_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let live_client = patient_client(&url).await;
    let holder = holder_client.try_lock("job", LONG).await.unwrap().unwrap();

    // The waiter's process "dies" while queued: its future is neither polled
    // nor dropped again (no renewal, no departure), as when a process is
    // killed or its machine is lost.
    let mut doomed = Box::pin(doomed_client.lock_with("job", LONG, LONG));
    poll_until_queued(&mut doomed, &url, "job", 1).await;
    std::mem::forget(doomed);
    let live = tokio::spawn(async move { live_client.lock_with("job", LONG, LONG).await });
    until_queued(&url, "job", 2).await;

    // Past the dead waiter's deadline, the release skips it: the live waiter
    // behind it gets the lock at once, not after the dead one's 30 s lease.
    tokio::time::sleep(Duration::from_millis(600)).await;
    holder.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), live)
        .await
        .expect("the live waiter got the lock")
        .unwrap()
        .unwrap();
    assert_eq!(queue_length(&url, "job").await, 0, "the dead entry is gone");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_grant_message_is_caught_by_the_re_check() {
    let server = redis();
    let url = server.url();
    let holder_client = patient_client(&url).await;
    let waiter_client = Locks::builder()
        .node(&url)
        .max_fallback_retry(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let holder = holder_client.try_lock("job", LONG).await.unwrap().unwrap();
    let waiting = tokio::spawn(async move { waiter_client.lock_with("job", LONG, LONG).await });
    until_queued(&url, "job", 1).await;
    // Hand the lock over by hand, without a message: the owner becomes the
    // queued waiter's token, as the release script would set it.
    let entry: String = cmd(&url, &["LPOP", &queue_key("job")]).await;
    let token = entry.rsplit(':').next().unwrap().to_owned();
    let _: String = cmd(&url, &["SET", &lock_key("job"), &token, "PX", "30000"]).await;
    std::mem::forget(holder);
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the re-check found the lock granted")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    until_free(&url, "job").await;
}
