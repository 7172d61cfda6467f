//! The HTTP server in front of the router, made to hold under hostile
//! clients:
//!
//! - a cap on open connections ([`HttpLimits::max_connections`]): one more
//!   is answered `503` with `Retry-After: 1` and closed at once, so the
//!   process never runs out of file descriptors;
//! - a cap on each client's connections ([`crate::client_cap`]), so one
//!   client cannot hold them all;
//! - a header-read timeout: a client that has not sent a whole request head
//!   this long after it connected (or after its previous response), or then
//!   the whole body the head announced within the same time, is
//!   disconnected, so clients that trickle a request (slowloris, or its
//!   slow-body variant) cannot pin connections;
//! - an idle timeout for keep-alive connections between requests;
//! - a bounded shutdown: on the signal it stops accepting, closes every
//!   connection that has no request in flight, lets requests in flight
//!   (purchases waiting for their commit) finish, and after
//!   [`HttpLimits::shutdown_timeout`] closes whatever is left, whatever the
//!   clients do. The caller then flushes the writer.
//!
//! Each connection is HTTP/1.1 served by hyper; a small state machine
//! ([`Activity`]) tracks whether it is reading a request head or body, busy
//! with a request, or idle, and a watchdog closes it when the phase's deadline
//! passes.
//!
//! # Layout
//!
//! - `mod.rs`: the accept loop ([`serve`]);
//! - `limits.rs`: [`HttpLimits`], their defaults, and the open-file limit
//!   the connection cap's default derives from;
//! - `cap.rs`: the answers of the connection caps;
//! - `connection.rs`: one connection, served by hyper and watched;
//! - `activity.rs`: a connection's [`Phase`] and the deadline it owes;
//! - `tracked.rs`: the socket and body wrappers that report to it.

mod activity;
mod cap;
mod connection;
mod limits;
mod tracked;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use activity::{Activity, Phase};
pub use limits::{
    DEFAULT_MAX_CONNECTIONS, HttpLimits, RESERVED_FILES, open_file_limit, raise_open_file_limit,
};

use crate::client_cap::{Admission as ClientAdmission, ClientCap};
use cap::refuse;
use connection::connection;

/// Serves `router` on `listener` under `limits` (each client's connections
/// counted by `clients`) until `shutdown` completes, then shuts down within
/// [`HttpLimits::shutdown_timeout`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    clients: Arc<ClientCap>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let stopping = CancellationToken::new();
    let closing = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    let mut last_refusal_log: Option<Instant> = None;
    let mut last_accept_error_log: Option<Instant> = None;
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and the like: wait a little rather than spin,
                    // and say so at most every ten seconds.
                    if every_ten_seconds(&mut last_accept_error_log) {
                        tracing::error!(%error, "cannot accept connections");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            if every_ten_seconds(&mut last_refusal_log) {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection cap reached; refusing new connections with 503 (--max-connections)"
                );
            }
            refuse(stream);
            continue;
        };
        let client = match clients.admit(peer.ip()) {
            ClientAdmission::Counted(slot) => (slot, None),
            ClientAdmission::Probation(slot) => (slot, Some(Arc::clone(&clients))),
            ClientAdmission::Refused => {
                tracing::warn!(
                    %peer,
                    most = clients.most(),
                    "a client is over its connection cap; refusing (--max-connections-per-client)"
                );
                refuse(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        connections.spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            (permit, client.0),
            client.1,
            stopping.clone(),
            closing.clone(),
        ));
    }
    tracing::info!(
        open = connections.len(),
        "stopping: answering the requests in flight, then committing queued orders"
    );
    // Stop accepting: new clients are refused by the kernel from here.
    drop(listener);
    connections.close();
    stopping.cancel();
    if tokio::time::timeout(limits.shutdown_timeout, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            timeout_ms = limits.shutdown_timeout.as_millis() as u64,
            "closing the connections still open after the shutdown timeout (--shutdown-timeout-ms)"
        );
        closing.cancel();
        connections.wait().await;
    }
    Ok(())
}

fn every_ten_seconds(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < Duration::from_secs(10)) {
        return false;
    }
    *last = Some(now);
    true
}
