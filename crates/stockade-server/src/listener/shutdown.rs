//! The bounded shutdown. hyper-util's [`GracefulShutdown`] tells every
//! connection to finish the request it is serving and close (hyper then
//! closes idle connections at once), and waits for them all. Two things it
//! does not do are added here:
//!
//! - a connection that is still reading a request head (or has read
//!   nothing since its last response) has nothing to answer, yet hyper
//!   would wait for that head and serve it: [`Signals::stopping`] tells the
//!   connection's watchdog to close it at once;
//! - the wait is bounded: after [`HttpLimits::shutdown_timeout`]
//!   [`Signals::closing`] drops whatever connections are left, whatever
//!   their clients do, so the caller can flush the writer.
//!
//! [`HttpLimits::shutdown_timeout`]: super::HttpLimits::shutdown_timeout

use std::pin::pin;
use std::time::Duration;

use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio_util::sync::CancellationToken;

/// The shutdown of every connection of one listener.
#[derive(Debug, Default)]
pub(super) struct Shutdown {
    graceful: GracefulShutdown,
    stopping: CancellationToken,
    closing: CancellationToken,
}

/// What one connection is told of the shutdown.
#[derive(Debug)]
pub(super) struct Signals {
    /// Hands the connection to [`GracefulShutdown`].
    pub(super) watcher: Watcher,
    /// Cancelled when the shutdown begins.
    pub(super) stopping: CancellationToken,
    /// Cancelled when the shutdown bound passes: close now.
    pub(super) closing: CancellationToken,
}

impl Shutdown {
    /// The signals for a connection just accepted.
    pub(super) fn signals(&self) -> Signals {
        Signals {
            watcher: self.graceful.watcher(),
            stopping: self.stopping.clone(),
            closing: self.closing.clone(),
        }
    }

    /// Connections still open.
    pub(super) fn open(&self) -> usize {
        self.graceful.count()
    }

    /// Lets the connections finish the requests they are serving, closes
    /// the others, and after `bound` closes every one left; returns once
    /// all are closed.
    pub(super) async fn run(self, bound: Duration) {
        let Self {
            graceful,
            stopping,
            closing,
        } = self;
        stopping.cancel();
        let mut all_closed = pin!(graceful.shutdown());
        if tokio::time::timeout(bound, all_closed.as_mut())
            .await
            .is_err()
        {
            tracing::warn!(
                timeout_ms = bound.as_millis() as u64,
                "closing the connections still open after the shutdown timeout (--shutdown-timeout-ms)"
            );
            closing.cancel();
            all_closed.await;
        }
    }
}
