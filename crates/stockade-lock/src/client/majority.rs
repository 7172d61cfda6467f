//! Redlock: waiting for a lock held by a majority of nodes, by retrying
//! with a jitter when a release is announced or the holder's lease runs out.

use std::pin::Pin;
use std::time::Duration;

use futures::future::{join_all, select_all};
use rand::Rng;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

use super::{Attempt, Locks, Request};
use crate::subscriptions::Interest;
use crate::{LockError, LockGuard, telemetry};

impl Locks {
    /// Redlock: a grant on one node is not a grant of the lock, and the
    /// nodes' queues could order the same waiters differently (each sees
    /// arrivals in its own order), so two waiters could each be granted a
    /// minority and neither the majority. Waiters therefore do not queue:
    /// they subscribe to the lock's channel on every node and try again
    /// (with a jitter) when a release is announced, or when the holder's
    /// lease runs out (capped by `max_fallback_retry`), whichever is first.
    pub(super) async fn acquire_by_majority(
        &self,
        request: &Request,
    ) -> Result<Option<LockGuard>, LockError> {
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
}
