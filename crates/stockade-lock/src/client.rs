//! [`Locks`]: the client. Acquiring (fail fast, bounded wait, unbounded
//! wait), waiting on release notifications, and running critical sections.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::future::{join_all, select_all};
use rand::Rng;
use tokio::runtime::Handle;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

use crate::config::Config;
use crate::guard::Held;
use crate::keys::LockKeys;
use crate::node::{Node, WaitReply, millis};
use crate::quorum::{self, Acquisition};
use crate::subscriptions::{GrantReceiver, Interest};
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

    /// One node: wait in the lock's queue. One attempt first (unless other
    /// waiters of this client are already in line for this lock: then it is
    /// almost surely held), then subscribe to the lock's channel and queue; the
    /// release script hands the lock straight to the first live waiter in
    /// line and tells it with one message. A bounded re-check (the holder's
    /// remaining lease, capped by `max_fallback_retry`) covers lost messages
    /// and holders that never release, and renews the entry's deadline.
    async fn acquire_in_line(&self, request: &Request) -> Result<Option<LockGuard>, LockError> {
        let node = &self.inner.nodes[0];
        let keys = &request.keys;
        if request.wait == Some(Duration::ZERO) {
            return match self
                .attempt(keys, request.lease, request.lease_duration)
                .await?
            {
                Attempt::Acquired(guard) => Ok(Some(guard)),
                Attempt::Busy { .. } => {
                    telemetry::contended();
                    Ok(None)
                }
            };
        }
        // Other waiters of this client are in line for this lock, or getting
        // in line: join them without an attempt. Should the lock be free
        // after all, the check of a waiter that finds itself first in line
        // takes it.
        let in_line = node.subscriptions.has_waiters(&keys.channel);
        // Registered before the attempt, so that this client's waiters that
        // arrive meanwhile join instead of attempting too; subscribed only if
        // the attempt fails.
        let interest = node.subscriptions.register(&keys.channel);
        if !in_line {
            match self
                .attempt(keys, request.lease, request.lease_duration)
                .await?
            {
                Attempt::Acquired(guard) => return Ok(Some(guard)),
                Attempt::Busy { .. } => telemetry::contended(),
            }
            if request.out_of_time() {
                return Ok(None);
            }
        }
        interest.subscribe().await;
        let guard = self.wait_in_line(request, &interest).await?;
        if guard.is_some() {
            telemetry::waited(request.started.elapsed());
        }
        Ok(guard)
    }

    /// Queues and waits for the grant (see [`Self::acquire_in_line`]).
    async fn wait_in_line(
        &self,
        request: &Request,
        interest: &Interest,
    ) -> Result<Option<LockGuard>, LockError> {
        let node = &self.inner.nodes[0];
        let config = &self.inner.config;
        let keys = &request.keys;
        let token = new_owner_token();
        let mut waiter = QueuedWaiter {
            locks: Arc::clone(&self.inner),
            keys: keys.clone(),
            grant: node.subscriptions.expect_grant(&token),
            entry: self.queue_entry(request, &token),
            renewing: None,
            token,
            armed: true,
        };
        let unavailable = |error| quorum::unavailable(keys, node, error);
        // The grant is made after the request that queued (or last found us
        // still waiting) was sent: the lease runs from no earlier than that.
        let mut not_before = Instant::now();
        let length = node
            .enqueue(keys, &waiter.entry)
            .await
            .map_err(unavailable)?;
        let mut check_now = length == 1;
        if !check_now {
            telemetry::contended();
        }
        let mut holder_lease_end = None;
        loop {
            if check_now {
                let renewed = self.queue_entry(request, &waiter.token);
                waiter.renewing = Some(renewed.clone());
                let sent = Instant::now();
                let reply = node
                    .wait(keys, &waiter.token, &waiter.entry, &renewed)
                    .await
                    .map_err(unavailable)?;
                waiter.entry = renewed;
                waiter.renewing = None;
                let granted_after = match reply {
                    WaitReply::AlreadyGranted { fence } => Some((fence, not_before)),
                    WaitReply::Granted { fence } => Some((fence, sent)),
                    WaitReply::Waiting {
                        remaining,
                        requeued,
                    } => {
                        if requeued {
                            tracing::debug!(lock = %keys.name, "the queue had dropped this waiter; queued again");
                        }
                        telemetry::contended();
                        not_before = sent;
                        holder_lease_end = remaining.map(|remaining| sent + remaining);
                        None
                    }
                };
                if let Some((fence, granted_after)) = granted_after {
                    match self
                        .take_grant(request, &mut waiter, fence, granted_after)
                        .await?
                    {
                        Some(guard) => return Ok(Some(guard)),
                        // The grant expired before it could be used: back in line.
                        None => continue,
                    }
                }
            }
            if request.out_of_time() {
                waiter.leave().await;
                return Ok(None);
            }
            let now = Instant::now();
            let mut wake_at = now + config.max_fallback_retry;
            if let Some(end) = holder_lease_end {
                wake_at = wake_at.min(end + Duration::from_millis(1));
            }
            if let Some(deadline) = request.deadline {
                wake_at = wake_at.min(deadline);
            }
            tokio::select! {
                grant = waiter.grant.granted() => {
                    node.clock.observe(grant.server_us);
                    match self.take_grant(request, &mut waiter, grant.fence, not_before).await? {
                        Some(guard) => return Ok(Some(guard)),
                        None => check_now = true,
                    }
                }
                // The pub/sub connection came back (messages may have been
                // lost meanwhile): check.
                () = interest.notified() => check_now = true,
                () = tokio::time::sleep_until(wake_at) => check_now = true,
            }
        }
    }

    /// Turns a grant into a guard. The lease was set when the lock was
    /// granted, at some moment after `granted_after`; if that leaves less
    /// than two thirds of the lease (a long wait since this waiter last heard
    /// from Redis), the lease is renewed first so that the guard starts with
    /// most of it. None: the grant had expired before it could be renewed.
    async fn take_grant(
        &self,
        request: &Request,
        waiter: &mut QueuedWaiter,
        fence: u64,
        granted_after: Instant,
    ) -> Result<Option<LockGuard>, LockError> {
        let config = &self.inner.config;
        let lease = request.lease_duration;
        let mut valid_until = granted_after + lease - config.drift(lease);
        if valid_until < Instant::now() + lease * 2 / 3 {
            let extended = quorum::extend(
                &self.inner,
                &request.keys,
                &waiter.token,
                lease,
                config.command_timeout,
            )
            .await;
            valid_until = match extended {
                Ok(valid_until) => valid_until,
                Err(LockError::NotHeld { .. }) => return Ok(None),
                Err(error) => return Err(error),
            };
        }
        // From here on no await: the lock is either handed to the guard or,
        // if this future is dropped before, passed on by `QueuedWaiter`.
        waiter.armed = false;
        Ok(Some(LockGuard::new(
            Held::new(
                Arc::clone(&self.inner),
                request.keys.clone(),
                waiter.token.clone(),
                fence,
                lease,
                valid_until,
                Arc::new(AtomicBool::new(false)),
            ),
            request.lease == Lease::Watchdog,
        )))
    }

    /// A queue entry (`deadline_us:lease_ms:token`, see `lua/queue.lua`)
    /// dated now. The deadline, in the server's clock: the end of the wait,
    /// or two re-check periods and a command timeout from now, whichever is
    /// first. A live waiter renews it at every re-check; a waiter whose
    /// process died stops renewing, and the release scripts skip its entry
    /// once the deadline has passed.
    fn queue_entry(&self, request: &Request, token: &str) -> String {
        let config = &self.inner.config;
        let node = &self.inner.nodes[0];
        let mut lifetime = config.max_fallback_retry * 2 + config.command_timeout;
        if let Some(deadline) = request.deadline {
            lifetime = lifetime.min(deadline.saturating_duration_since(Instant::now()));
        }
        let lifetime_us = u64::try_from(lifetime.as_micros()).unwrap_or(u64::MAX);
        let deadline_us = node.clock.estimate_us().saturating_add(lifetime_us);
        format!("{deadline_us}:{}:{token}", millis(request.lease_duration))
    }

    /// Redlock: a grant on one node is not a grant of the lock, and the
    /// nodes' queues could order the same waiters differently (each sees
    /// arrivals in its own order), so two waiters could each be granted a
    /// minority and neither the majority. Waiters therefore do not queue:
    /// they subscribe to the lock's channel on every node and try again
    /// (with a jitter) when a release is announced, or when the holder's
    /// lease runs out (capped by `max_fallback_retry`), whichever is first.
    async fn acquire_by_majority(&self, request: &Request) -> Result<Option<LockGuard>, LockError> {
        let config = &self.inner.config;
        let keys = &request.keys;
        let wait = request.wait;
        let started = request.started;
        let deadline = request.deadline;
        // If this client is already listening for this lock's releases
        // (other local waiters), join in before the first attempt: then a
        // release right after it is not missed, and no second attempt is
        // needed after subscribing.
        let mut interests: Vec<Interest> = Vec::new();
        if wait != Some(Duration::ZERO) {
            let joined: Option<Vec<Interest>> = self
                .inner
                .nodes
                .iter()
                .map(|node| node.subscriptions.join_active(&keys.channel))
                .collect();
            interests = joined.unwrap_or_default();
        }
        let mut waited = false;
        loop {
            // Listen before trying, so that a release that lands while the
            // attempt is in flight still wakes us.
            let mut wakeups: Vec<Pin<Box<OwnedNotified>>> = interests
                .iter()
                .map(|interest| Box::pin(interest.notified()))
                .collect();
            for wakeup in &mut wakeups {
                wakeup.as_mut().enable();
            }
            let outcome = self
                .attempt(keys, request.lease, request.lease_duration)
                .await?;
            let retry_after = match outcome {
                Attempt::Acquired(guard) => {
                    if waited {
                        telemetry::waited(started.elapsed());
                    }
                    return Ok(Some(guard));
                }
                Attempt::Busy { retry_after } => retry_after,
            };
            telemetry::contended();
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(None);
            }
            waited = true;
            if interests.is_empty() {
                // First time we found it held: subscribe (shared per client),
                // then try again at once, since the holder may have released
                // it before the subscription was in place.
                let channel = &keys.channel;
                interests = join_all(
                    self.inner
                        .nodes
                        .iter()
                        .map(|node| node.subscriptions.interest(channel)),
                )
                .await;
                continue;
            }
            // Sleep until a release message, or until the holder's lease runs
            // out (the fallback if a message is lost), or the deadline.
            let fallback = retry_after
                .unwrap_or(config.max_fallback_retry)
                .min(config.max_fallback_retry)
                + Duration::from_millis(1);
            let mut wake_at = now + fallback;
            if let Some(deadline) = deadline {
                wake_at = wake_at.min(deadline);
            }
            let released = async {
                if wakeups.is_empty() {
                    std::future::pending::<()>().await;
                }
                select_all(wakeups).await;
            };
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
            // Spread the retries of clients that woke together, so they do
            // not split the vote again.
            let jitter = rand::rng().random_range(Duration::ZERO..=config.retry_jitter);
            tokio::time::sleep(jitter).await;
        }
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

/// How many times a waiter that gave up tries to leave the queue.
const LEAVE_ATTEMPTS: u32 = 4;

/// 128 random bits, hex: the value the lock key holds while this acquisition
/// owns it, and a queued waiter's name.
fn new_owner_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// A waiter in a lock's queue. Dropped while armed (its future was dropped,
/// or an error ended the wait), it leaves the queue from a background task
/// and passes on the lock if the grant raced its departure: a waiter that
/// gives up never leaves a lock or a queue entry behind (short of Redis being
/// unreachable, when the entry's deadline and the grant's lease bound it).
struct QueuedWaiter {
    locks: Arc<LocksInner>,
    keys: LockKeys,
    token: String,
    /// The entry as queued.
    entry: String,
    /// The renewed entry, while a renewal is in flight (it may or may not
    /// have replaced `entry` in the queue).
    renewing: Option<String>,
    grant: GrantReceiver,
    armed: bool,
}

impl QueuedWaiter {
    /// Leaves now (the wait ran out), in this task.
    async fn leave(&mut self) {
        let keys = &self.keys;
        let renewed = self.renewing.as_deref().unwrap_or(&self.entry);
        let node = &self.locks.nodes[0];
        match node.leave(keys, &self.token, &self.entry, renewed).await {
            Ok(granted) => {
                if granted {
                    tracing::debug!(lock = %keys.name, "granted while giving up; passed on");
                }
                self.armed = false;
            }
            // Left armed: `Drop` tries again in the background.
            Err(error) => tracing::debug!(lock = %keys.name, %error, "leaving the queue failed"),
        }
    }
}

impl Drop for QueuedWaiter {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let locks = Arc::clone(&self.locks);
        let keys = self.keys.clone();
        let token = std::mem::take(&mut self.token);
        let entry = std::mem::take(&mut self.entry);
        let renewed = self.renewing.take().unwrap_or_else(|| entry.clone());
        let runtime = locks.runtime.clone();
        runtime.spawn(async move {
            let node = &locks.nodes[0];
            // A departure that never reaches Redis leaves an entry that may
            // be granted the lock for a whole lease: worth a few retries.
            let mut backoff = Duration::from_millis(50);
            for attempt in 1..=LEAVE_ATTEMPTS {
                match node.leave(&keys, &token, &entry, &renewed).await {
                    Ok(_) => return,
                    Err(error) if attempt == LEAVE_ATTEMPTS => {
                        tracing::warn!(lock = %keys.name, %error, "leaving the queue failed; the entry's deadline and the lease bound it");
                    }
                    Err(_) => {
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                }
            }
        });
    }
}
