//! One node: waiting in the lock's queue for a grant handed off by the
//! release script, taking the grant, and leaving the queue on giving up.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::time::Instant;

use super::{Attempt, Locks, LocksInner, Request, new_owner_token};
use crate::guard::Held;
use crate::keys::LockKeys;
use crate::node::{WaitReply, millis};
use crate::quorum;
use crate::subscriptions::{GrantReceiver, Interest};
use crate::{Lease, LockError, LockGuard, telemetry};

impl Locks {
    /// One node: wait in the lock's queue. One attempt first (unless other
    /// waiters of this client are already in line for this lock: then it is
    /// almost surely held), then subscribe to the lock's channel and queue; the
    /// release script hands the lock straight to the first live waiter in
    /// line and tells it with one message. A bounded re-check (the holder's
    /// remaining lease, capped by `max_fallback_retry`) covers lost messages
    /// and holders that never release, and renews the entry's deadline.
    pub(super) async fn acquire_in_line(
        &self,
        request: &Request,
    ) -> Result<Option<LockGuard>, LockError> {
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
        // arrive meanwhile join instead of attempting too. Never subscribed:
        // grants come on the client's grant channel; it only counts this
        // client's waiters for this lock, and wakes them when the pub/sub
        // connection comes back.
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
        let _grants = node.subscriptions.grant_interest().await;
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

    /// A queue entry (`deadline_us:lease_ms:client:token`, see `lua/queue.lua`)
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
        format!(
            "{deadline_us}:{}:{}:{token}",
            millis(request.lease_duration),
            node.subscriptions.client_id()
        )
    }
}

/// How many times a waiter that gave up tries to leave the queue.
const LEAVE_ATTEMPTS: u32 = 4;

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
