//! A connection's [`Phase`] (reading a head, reading a body, busy, idle)
//! and the deadline each phase owes: the watchdog behind the header-read,
//! slow-body and idle timeouts.
//!
//! Own code, because the crates time these differently from what the
//! listener promises (and its tests check):
//!
//! - hyper 1.x's `http1::Builder::header_read_timeout` restarts its clock as
//!   soon as a keep-alive connection has sent its response, so it is also
//!   the idle timeout: an idle connection could not outlast a slow head.
//!   Here the idle clock runs until the next request's first byte, and the
//!   header clock from then;
//! - tower-http's `RequestBodyTimeoutLayer` restarts its clock on every
//!   frame, so a body trickled a byte at a time would never be cut. Here the
//!   whole body is due within the header timeout from the end of its head;
//! - a request in flight (its response body included) is never timed out.

use std::pin::pin;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a connection is doing, for its timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for (the rest of) a request head since this instant.
    ReadingHead(Instant),
    /// A request handed to the router whose body has been arriving since
    /// this instant (its head was read then).
    ReadingBody(Instant),
    /// This many requests handed to the router and not yet answered.
    Busy(usize),
    /// Nothing received since the last response, sent at this instant.
    Idle(Instant),
}

/// A connection's [`Phase`], changed by its reads and its requests, and
/// watched by its watchdog.
#[derive(Debug)]
pub struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    /// A connection accepted at `now`: it owes a request head.
    pub fn new(now: Instant) -> Self {
        Self {
            phase: Mutex::new(Phase::ReadingHead(now)),
            changed: Notify::new(),
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        *self.phase.lock()
    }

    /// Whether a request is in flight.
    pub fn is_busy(&self) -> bool {
        matches!(self.phase(), Phase::Busy(_) | Phase::ReadingBody(_))
    }

    /// Bytes arrived: an idle connection starts a request head.
    pub fn bytes_read(&self, now: Instant) {
        let mut phase = self.phase.lock();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::ReadingHead(now);
            drop(phase);
            self.changed.notify_one();
        }
    }

    /// A request head was read at `now` and handed to the router; its body
    /// is still to come when `body_pending`.
    pub fn request_started(&self, now: Instant, body_pending: bool) {
        let mut phase = self.phase.lock();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::ReadingBody(_) => Phase::Busy(2),
            _ if body_pending => Phase::ReadingBody(now),
            _ => Phase::Busy(1),
        };
        drop(phase);
        self.changed.notify_one();
    }

    /// The request's body has arrived (or will not be read).
    pub fn body_received(&self) {
        let mut phase = self.phase.lock();
        if let Phase::ReadingBody(_) = *phase {
            *phase = Phase::Busy(1);
        }
        drop(phase);
        self.changed.notify_one();
    }

    /// A request was answered at `now`.
    pub fn request_finished(&self, now: Instant) {
        let mut phase = self.phase.lock();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(now),
        };
        drop(phase);
        self.changed.notify_one();
    }

    /// When the current phase times out (never while busy).
    fn deadline(&self, header_read_timeout: Duration, idle_timeout: Duration) -> Option<Instant> {
        match self.phase() {
            Phase::ReadingHead(since) | Phase::ReadingBody(since) => {
                Some(since + header_read_timeout)
            }
            Phase::Idle(since) => Some(since + idle_timeout),
            Phase::Busy(_) => None,
        }
    }

    /// Completes when the connection has spent longer in its phase than the
    /// phase allows, with that phase.
    pub async fn expired(&self, header_read_timeout: Duration, idle_timeout: Duration) -> Phase {
        loop {
            let changed = self.changed.notified();
            let mut changed = pin!(changed);
            changed.as_mut().enable();
            match self.deadline(header_read_timeout, idle_timeout) {
                Some(deadline) if deadline <= Instant::now() => return self.phase(),
                Some(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {}
                        () = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const HEAD: Duration = Duration::from_secs(5);
    const IDLE: Duration = Duration::from_secs(75);

    #[tokio::test(start_paused = true)]
    async fn a_body_still_arriving_times_out_like_a_head_and_not_once_received() {
        let activity = Activity::new(Instant::now());
        activity.request_started(Instant::now(), true);
        let started = Instant::now();
        let phase = activity.expired(HEAD, IDLE).await;
        assert!(matches!(phase, Phase::ReadingBody(_)), "{phase:?}");
        assert_eq!(started.elapsed(), HEAD);
        activity.body_received();
        assert_eq!(activity.phase(), Phase::Busy(1));
        assert_eq!(activity.deadline(HEAD, IDLE), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_head_times_out_after_the_header_timeout() {
        let activity = Activity::new(Instant::now());
        let started = Instant::now();
        // Trickling bytes do not extend a head's deadline.
        activity.bytes_read(Instant::now());
        let phase = activity.expired(HEAD, IDLE).await;
        assert!(matches!(phase, Phase::ReadingHead(_)), "{phase:?}");
        assert_eq!(started.elapsed(), HEAD);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_times_out_after_the_idle_timeout_and_a_new_head_restarts_the_clock()
    {
        let activity = Arc::new(Activity::new(Instant::now()));
        activity.request_started(Instant::now(), false);
        tokio::time::sleep(Duration::from_secs(600)).await;
        // Busy: never timed out, however long the request takes.
        assert!(activity.is_busy());
        activity.request_finished(Instant::now());
        let idle_since = Instant::now();
        let watcher = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.expired(HEAD, IDLE).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        // A head begins 30 s into the idle time: now the header timeout
        // applies, from this moment.
        activity.bytes_read(Instant::now());
        let phase = watcher.await.unwrap();
        assert!(matches!(phase, Phase::ReadingHead(_)), "{phase:?}");
        assert_eq!(
            idle_since.elapsed(),
            Duration::from_secs(30) + HEAD,
            "the head's deadline, not the idle one"
        );
        activity.request_started(Instant::now(), false);
        activity.request_finished(Instant::now());
        let since = Instant::now();
        let phase = activity.expired(HEAD, IDLE).await;
        assert!(matches!(phase, Phase::Idle(_)), "{phase:?}");
        assert_eq!(since.elapsed(), IDLE);
    }
}
