//! Mutual exclusion: many tasks in several clients, one critical section.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

use crate::support::{client, redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_in_four_clients_never_overlap() {
    const CLIENTS: usize = 4;
    const TASKS_PER_CLIENT: usize = 16;
    const ROUNDS: u64 = 3;
    let server = redis();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(client(&server.url()).await);
    }
    // A shared value updated by a read-modify-write that is only correct
    // under mutual exclusion: read, yield for a while, write back + 1.
    let value = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for locks in &clients {
        for _ in 0..TASKS_PER_CLIENT {
            let (locks, value, inside, fences) =
                (locks.clone(), value.clone(), inside.clone(), fences.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = locks.lock("counter").await.unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    fences.lock().await.push(guard.fence());
                    let read = value.load(Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    value.store(read + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total = (CLIENTS * TASKS_PER_CLIENT) as u64 * ROUNDS;
    assert_eq!(value.load(Ordering::SeqCst), total);
    // Fencing tokens grow with every holder, in the order they held the lock.
    let fences = fences.lock().await;
    assert_eq!(fences.len() as u64, total);
    assert!(
        fences.windows(2).all(|pair| pair[0] < pair[1]),
        "fencing tokens must strictly increase from holder to holder"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_is_refused_and_then_granted_after_release() {
    let server = redis();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let guard = a
        .try_lock("job", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert!(
        b.try_lock("job", Duration::from_secs(10))
            .await
            .unwrap()
            .is_none()
    );
    // Different names are different locks.
    let other = b
        .try_lock("other-job", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(other.is_some());
    let first_fence = guard.fence();
    guard.release().await.unwrap();
    let next = b
        .try_lock("job", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert!(next.fence() > first_fence);
    next.release().await.unwrap();
}
