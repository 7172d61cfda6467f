//! The operations across all nodes: acquire, extend and release by majority
//! (Redlock). A single node is the case N = 1, quorum 1.
//!
//! Every operation sends to all nodes at once and decides as soon as the
//! outcome is certain (a quorum agreed, or a quorum became impossible), so a
//! slow or dead minority does not slow anyone down. Validity is
//! `lease − elapsed − drift`, with `elapsed` measured from before the first
//! request to after the last reply that was needed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use crate::LockError;
use crate::client::LocksInner;
use crate::keys::LockKeys;
use crate::node::{AcquireReply, Node, NodeError};

/// What one acquisition attempt found.
#[derive(Debug)]
pub(crate) enum Acquisition {
    /// The lock is ours on a quorum, until `valid_until`. Set `given_up`
    /// before releasing, so that nodes that grant it late give it back.
    Acquired {
        fence: u64,
        valid_until: Instant,
        given_up: Arc<AtomicBool>,
    },
    /// Someone else holds it. `retry_after`: the shortest remaining lease we
    /// were told about, if any.
    Busy { retry_after: Option<Duration> },
}

/// Failures collected from nodes, turned into an error that names them.
#[derive(Default)]
struct Failures(Vec<(String, NodeError)>);

impl Failures {
    fn push(&mut self, address: &str, error: NodeError) {
        self.0.push((address.to_owned(), error));
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn into_error(self, lock: &str, nodes: usize, quorum: usize) -> LockError {
        let count = self.0.len();
        let detail = self
            .0
            .iter()
            .map(|(address, error)| format!("{address}: {error}"))
            .collect::<Vec<_>>()
            .join("; ");
        let detail = if nodes == 1 {
            detail
        } else {
            format!("{count} of {nodes} nodes failed, {quorum} needed: {detail}")
        };
        let source = self.0.into_iter().find_map(|(_, error)| match error {
            NodeError::Redis(error) => Some(error),
            _ => None,
        });
        LockError::Unavailable {
            lock: lock.to_owned(),
            detail,
            source,
        }
    }
}

/// A failed call to one node (single-node operations), as an error that
/// names the node.
pub(crate) fn unavailable(keys: &LockKeys, node: &Node, error: NodeError) -> LockError {
    let mut failures = Failures::default();
    failures.push(&node.address, error);
    failures.into_error(&keys.name, 1, 1)
}

/// One attempt: the acquire script on every node, then (Redlock only) the
/// fence raise on the nodes that granted it.
pub(crate) async fn try_acquire(
    locks: &Arc<LocksInner>,
    keys: &LockKeys,
    token: &str,
    lease: Duration,
) -> Result<Acquisition, LockError> {
    let started = Instant::now();
    let nodes = &locks.nodes;
    let (n, quorum) = (nodes.len(), locks.config.quorum());
    let given_up = Arc::new(AtomicBool::new(false));
    // Until the lock is handed over, anything that ends this attempt (a
    // failure, or the caller dropping the future mid-flight) gives back what
    // it may have been granted.
    let mut abandon = Abandon {
        locks,
        keys,
        token,
        given_up: Arc::clone(&given_up),
        armed: true,
    };
    // One node: tokens with the clock floor, hand-off by queue. Several:
    // counters kept in step by `raise_fences`, releases announced.
    let single = n == 1;
    let mut calls = fan_out(locks, |node| {
        let (keys, token, given_up) = (keys.clone(), token.to_owned(), Arc::clone(&given_up));
        async move {
            let reply = node.acquire(&keys, &token, lease, single).await;
            // A straggler that was granted the lock after the attempt was
            // given up (or the lock released) must not leave it behind: the
            // release may have reached this node first (for instance when
            // the acquire had to reload its script).
            if matches!(reply, Ok(AcquireReply::Acquired { .. })) && given_up.load(Ordering::SeqCst)
            {
                let _ = node.release(&keys, &token, !single).await;
            }
            reply
        }
    });
    let mut granted: Vec<(usize, u64)> = Vec::with_capacity(n);
    let mut busy: Vec<Option<Duration>> = Vec::new();
    let mut failures = Failures::default();
    while let Some((index, reply)) = calls.next().await {
        match reply {
            Ok(AcquireReply::Acquired { fence }) => granted.push((index, fence)),
            Ok(AcquireReply::Held { remaining }) => busy.push(remaining),
            Err(error) => failures.push(&nodes[index].address, error),
        }
        if granted.len() >= quorum || busy.len() + failures.len() > n - quorum {
            break;
        }
    }
    // Nodes that have not answered yet keep going in their tasks: if they
    // grant the lock, it is ours there too (release and extension go to
    // every node).
    drop(calls);

    if granted.len() >= quorum {
        let fence = granted.iter().map(|(_, fence)| *fence).max().unwrap_or(0);
        let raised = n == 1 || raise_fences(locks, keys, token, fence, &granted).await;
        let drift = locks.config.drift(lease);
        if raised && started.elapsed() + drift < lease {
            abandon.armed = false;
            return Ok(Acquisition::Acquired {
                fence,
                valid_until: started + lease - drift,
                given_up,
            });
        }
        // Too slow (or the fence could not be raised on a quorum): give the
        // votes back (`abandon`) and try again after a jitter.
        return Ok(Acquisition::Busy {
            retry_after: Some(Duration::ZERO),
        });
    }
    // Give back what we may have been granted (`abandon`): nodes that said
    // yes, nodes that did not answer in time and nodes we stopped listening
    // to. Nothing to give back if every node said it is held.
    if busy.len() == n {
        abandon.armed = false;
    }
    if failures.len() > n - quorum {
        return Err(failures.into_error(&keys.name, n, quorum));
    }
    Ok(Acquisition::Busy {
        retry_after: busy.into_iter().flatten().min(),
    })
}

/// Releases an attempt's votes in the background when dropped armed.
struct Abandon<'a> {
    locks: &'a Arc<LocksInner>,
    keys: &'a LockKeys,
    token: &'a str,
    given_up: Arc<AtomicBool>,
    armed: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.given_up.store(true, Ordering::SeqCst);
            release_in_background(self.locks, self.keys, self.token);
        }
    }
}

/// Starts `call` on every node and yields `(node index, result)` as they
/// come. With several nodes each call runs in its own task, so it completes
/// (and its effect on that node is what we expect) even when the caller
/// stops listening because the outcome is already decided. With one node
/// the call runs inline (the outcome is decided by its answer alone).
fn fan_out<T, F, C>(
    locks: &Arc<LocksInner>,
    call: C,
) -> FuturesUnordered<BoxFuture<'static, (usize, Result<T, NodeError>)>>
where
    T: Send + 'static,
    F: Future<Output = Result<T, NodeError>> + Send + 'static,
    C: Fn(Node) -> F,
{
    let single = locks.nodes.len() == 1;
    locks
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let call = call(node.clone());
            if single {
                return async move { (index, call.await) }.boxed();
            }
            let task = locks.runtime.spawn(call);
            async move {
                let outcome = task
                    .await
                    .unwrap_or_else(|join| Err(NodeError::Reply(join.to_string())));
                (index, outcome)
            }
            .boxed()
        })
        .collect()
}

/// Raises the fencing counter to `fence` on the nodes that granted the lock.
/// True when a quorum of them confirmed that the lock is still ours.
async fn raise_fences(
    locks: &Arc<LocksInner>,
    keys: &LockKeys,
    token: &str,
    fence: u64,
    granted: &[(usize, u64)],
) -> bool {
    let (n, quorum) = (locks.nodes.len(), locks.config.quorum());
    let mut calls: FuturesUnordered<_> = granted
        .iter()
        .map(|(index, _)| locks.nodes[*index].raise_fence(keys, token, fence))
        .collect();
    let (mut raised, mut refused) = (0, n - granted.len());
    while let Some(reply) = calls.next().await {
        match reply {
            Ok(true) => raised += 1,
            _ => refused += 1,
        }
        if raised >= quorum {
            return true;
        }
        if refused > n - quorum {
            return false;
        }
    }
    false
}

/// Extends the lease on every node. Returns the new validity deadline when a
/// quorum extended it.
pub(crate) async fn extend(
    locks: &Arc<LocksInner>,
    keys: &LockKeys,
    token: &str,
    lease: Duration,
    timeout: Duration,
) -> Result<Instant, LockError> {
    let started = Instant::now();
    let nodes = &locks.nodes;
    let (n, quorum) = (nodes.len(), locks.config.quorum());
    let mut calls: FuturesUnordered<_> = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| async move { (index, node.extend(keys, token, lease, timeout).await) })
        .collect();
    let (mut extended, mut not_held) = (0, 0);
    let mut failures = Failures::default();
    while let Some((index, reply)) = calls.next().await {
        match reply {
            Ok(true) => extended += 1,
            Ok(false) => not_held += 1,
            Err(error) => failures.push(&nodes[index].address, error),
        }
        if extended >= quorum {
            let drift = locks.config.drift(lease);
            if started.elapsed() + drift >= lease {
                break;
            }
            return Ok(started + lease - drift);
        }
        if not_held > n - quorum {
            return Err(LockError::NotHeld {
                lock: keys.name.clone(),
            });
        }
    }
    if failures.is_empty() {
        // Extended on a quorum, but too slowly to leave any validity.
        return Err(LockError::Unavailable {
            lock: keys.name.clone(),
            detail: "the extension took longer than the lease".to_owned(),
            source: None,
        });
    }
    Err(failures.into_error(&keys.name, n, quorum))
}

/// Releases on every node and reports whether the lock was still ours on a
/// quorum. Each node's release runs in its own task, so it completes even if
/// the caller stops waiting (or the answer is known before every node has
/// replied).
pub(crate) async fn release(
    locks: &Arc<LocksInner>,
    keys: &LockKeys,
    token: &str,
) -> Result<(), LockError> {
    let (n, quorum) = (locks.nodes.len(), locks.config.quorum());
    // With one node the release hands the lock to the next queued waiter;
    // Redlock waiters do not queue (see `client`), they are told of the
    // release and try again.
    let announce = n > 1;
    let mut calls = fan_out(locks, |node| {
        let (keys, token) = (keys.clone(), token.to_owned());
        async move { node.release(&keys, &token, announce).await }
    });
    let (mut released, mut not_held) = (0, 0);
    let mut failures = Failures::default();
    while let Some((index, outcome)) = calls.next().await {
        match outcome {
            Ok(true) => released += 1,
            Ok(false) => not_held += 1,
            Err(error) => failures.push(&locks.nodes[index].address, error),
        }
        if released >= quorum {
            return Ok(());
        }
        if not_held > n - quorum {
            return Err(LockError::NotHeld {
                lock: keys.name.clone(),
            });
        }
    }
    if released + not_held == n {
        // No failures, but neither side has a majority (an even N).
        return Err(LockError::NotHeld {
            lock: keys.name.clone(),
        });
    }
    Err(failures.into_error(&keys.name, n, quorum))
}

/// Releases on every node without waiting for the result (for dropped guards
/// and abandoned attempts). Never blocks.
pub(crate) fn release_in_background(locks: &Arc<LocksInner>, keys: &LockKeys, token: &str) {
    let (locks, keys, token) = (Arc::clone(locks), keys.clone(), token.to_owned());
    let runtime = locks.runtime.clone();
    runtime.spawn(async move {
        let _ = release(&locks, &keys, &token).await;
    });
}
