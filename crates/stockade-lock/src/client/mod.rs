//! [`Locks`]: the client. Acquiring (fail fast, bounded wait, unbounded
//! wait) and running critical sections; the waiting itself is in
//! `in_line` (one node) and `majority` (Redlock).

mod in_line;
mod majority;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::config::Config;
use crate::guard::Held;
use crate::keys::LockKeys;
use crate::node::Node;
use crate::quorum::{self, Acquisition};
use crate::{Lease, LockError, LockGuard, LocksBuilder, LostReason, telemetry};

/// What every guard and background task of a client share.
pub(crate) struct LocksInner {
    pub config: Config,
    pub nodes: Vec<Node>,
    /// Where background work (releases of dropped guards, watchdogs, acquire
    /// attempts) runs, so that it can be started from `Drop`.
    pub runtime: Handle,
}

/// A lock client over one Redis node, or several independent nodes
/// (Redlock). Cheap to clone; clones share connections.
///
/// Each client keeps, per node, one multiplexed connection for the scripts
/// and one pub/sub connection shared by all of its waiters.
#[derive(Clone)]
pub struct Locks {
    inner: Arc<LocksInner>,
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locks")
            .field("nodes", &self.inner.nodes)
            .field("quorum", &self.inner.config.quorum())
            .finish_non_exhaustive()
    }
}

/// The outcome of one attempt, as the waiting loop sees it.
enum Attempt {
    Acquired(LockGuard),
    Busy { retry_after: Option<Duration> },
}

impl Locks {
    /// Connects to a single Redis node with default settings.
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::builder().node(url).connect().await
    }

    /// Starts building a client (several nodes, leases, timeouts).
    pub fn builder() -> LocksBuilder {
        LocksBuilder::default()
    }

    pub(crate) async fn from_config(config: Config) -> Result<Self, LockError> {
        let nodes = config
            .nodes
            .iter()
            .map(|url| Node::new(url, &config))
            .collect::<Result<Vec<_>, _>>()?;
        let pings = join_all(nodes.iter().map(Node::ping)).await;
        let reachable = pings.iter().filter(|ping| ping.is_ok()).count();
        if reachable < config.quorum() {
            let detail = nodes
                .iter()
                .zip(&pings)
                .filter_map(|(node, ping)| {
                    ping.as_ref()
                        .err()
                        .map(|error| format!("{}: {error}", node.address))
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(LockError::Connect {
                detail: format!(
                    "only {reachable} of {} nodes answered, {} needed: {detail}",
                    nodes.len(),
                    config.quorum()
                ),
            });
        }
        Ok(Self {
            inner: Arc::new(LocksInner {
                config,
                nodes,
                runtime: Handle::current(),
            }),
        })
    }

    /// The number of nodes, and the quorum needed out of them.
    pub fn nodes(&self) -> (usize, usize) {
        (self.inner.nodes.len(), self.inner.config.quorum())
    }

    /// Tries once. Returns `Ok(None)` at once if someone else holds the lock.
    pub async fn try_lock(
        &self,
        name: &str,
        lease: impl Into<Lease>,
    ) -> Result<Option<LockGuard>, LockError> {
        self.acquire(name, Some(Duration::ZERO), lease.into()).await
    }

    /// Waits until the lock is acquired, with a [`Lease::Watchdog`] lease.
    /// To give up, drop the future (for instance with
    /// [`tokio::time::timeout`]): that is safe, no lock is left behind.
    pub async fn lock(&self, name: &str) -> Result<LockGuard, LockError> {
        let guard = self.acquire(name, None, Lease::Watchdog).await?;
        guard.ok_or_else(|| LockError::Internal {
            lock: name.to_owned(),
            detail: "an unbounded wait ended without the lock".to_owned(),
        })
    }

    /// Waits up to `wait` for the lock. Fails with [`LockError::Timeout`]
    /// if someone else held it the whole time.
    pub async fn lock_with(
        &self,
        name: &str,
        wait: Duration,
        lease: impl Into<Lease>,
    ) -> Result<LockGuard, LockError> {
        match self.acquire(name, Some(wait), lease.into()).await? {
            Some(guard) => Ok(guard),
            None => Err(LockError::Timeout {
                lock: name.to_owned(),
                waited: wait,
            }),
        }
    }

    /// Acquires the lock (waiting as long as it takes, watchdog lease), runs
    /// `section`, and releases the lock. If ownership is lost while the
    /// section runs, the section is cancelled (its future dropped at its
    /// next `.await`) and [`LockError::Lost`] is returned. It is also
    /// returned if the section finished but the release found the lock no
    /// longer ours, since part of the section may then have run unprotected.
    ///
    /// ```no_run
    /// # async fn demo(locks: stockade_lock::Locks) -> Result<(), stockade_lock::LockError> {
    /// let fence = locks
    ///     .run("nightly-reconciliation", async |guard| {
    ///         // ... work that must not run twice at once ...
    ///         guard.fence()
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<T>(
        &self,
        name: &str,
        section: impl AsyncFnOnce(&LockGuard) -> T,
    ) -> Result<T, LockError> {
        let guard = self.lock(name).await?;
        let outcome = {
            let section = section(&guard);
            tokio::select! {
                biased;
                reason = guard.lost() => Err(reason),
                value = section => Ok(value),
            }
        };
        let lost = |reason| LockError::Lost {
            lock: name.to_owned(),
            reason,
        };
        match outcome {
            Err(reason) => Err(lost(reason)),
            Ok(value) => {
                let reason = guard.lost_reason();
                match guard.release().await {
                    Ok(()) => Ok(value),
                    Err(LockError::NotHeld { .. }) => {
                        Err(lost(reason.unwrap_or(LostReason::Taken)))
                    }
                    // The section finished while we held the lock; the
                    // lease will clear it.
                    Err(error) => {
                        tracing::warn!(lock = name, %error, "release after the critical section failed");
                        Ok(value)
                    }
                }
            }
        }
    }

    /// Acquiring, with or without waiting. `wait`: `Some(ZERO)` tries once,
    /// `None` waits forever. Returns `Ok(None)` when the wait ran out.
    async fn acquire(
        &self,
        name: &str,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<LockGuard>, LockError> {
        let keys = LockKeys::new(&self.inner.config.key_prefix, name)?;
        let config = &self.inner.config;
        let lease_duration = match lease {
            Lease::Watchdog => config.watchdog_lease,
            Lease::Fixed(lease) => lease,
        };
        if lease_duration <= config.drift(lease_duration) {
            return Err(LockError::InvalidConfig(format!(
                "a lease of {lease_duration:?} is shorter than the clock-drift allowance"
            )));
        }
        let request = Request {
            keys,
            wait,
            lease,
            lease_duration,
            started: Instant::now(),
            deadline: wait.and_then(|wait| Instant::now().checked_add(wait)),
        };
        let outcome = if self.inner.nodes.len() > 1 {
            self.acquire_by_majority(&request).await
        } else {
            self.acquire_in_line(&request).await
        };
        let elapsed = request.started.elapsed();
        match &outcome {
            Ok(Some(_)) => telemetry::acquire_finished("acquired", elapsed),
            Ok(None) if wait == Some(Duration::ZERO) => {
                telemetry::acquire_finished("busy", elapsed)
            }
            Ok(None) => telemetry::acquire_finished("timeout", elapsed),
            Err(_) => telemetry::acquire_finished("error", elapsed),
        }
        outcome
    }

    /// One attempt. Dropping it mid-flight is safe: the attempt gives back
    /// whatever it may have been granted (see `quorum::try_acquire`), and
    /// once it has the lock the guard is built without another await, so
    /// the lock is either handed over or released.
    async fn attempt(
        &self,
        keys: &LockKeys,
        lease: Lease,
        lease_duration: Duration,
    ) -> Result<Attempt, LockError> {
        let token = new_owner_token();
        let outcome = quorum::try_acquire(&self.inner, keys, &token, lease_duration).await?;
        Ok(match outcome {
            Acquisition::Acquired {
                fence,
                valid_until,
                given_up,
            } => Attempt::Acquired(LockGuard::new(
                Held::new(
                    Arc::clone(&self.inner),
                    keys.clone(),
                    token,
                    fence,
                    lease_duration,
                    valid_until,
                    given_up,
                ),
                lease == Lease::Watchdog,
            )),
            Acquisition::Busy { retry_after } => Attempt::Busy { retry_after },
        })
    }
}

/// What one acquire call asked for.
struct Request {
    keys: LockKeys,
    wait: Option<Duration>,
    lease: Lease,
    lease_duration: Duration,
    started: Instant,
    /// When the wait ends; None: never.
    deadline: Option<Instant>,
}

impl Request {
    fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }
}

/// 128 random bits, hex: the value the lock key holds while this acquisition
/// owns it, and a queued waiter's name.
fn new_owner_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}
