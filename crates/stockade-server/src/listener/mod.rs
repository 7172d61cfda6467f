//! The HTTP server in front of the router, made to hold under hostile
//! clients:
//!
//! - a cap on open connections ([`HttpLimits::max_connections`]): one more
//!   is answered `503` with `Retry-After: 1` and closed at once, so the
//!   process never runs out of file descriptors;
//! - a cap on each client's connections ([`crate::client_cap`]), so one
//!   client cannot hold them all;
//! - a header-read timeout: a client that has not sent a whole request head
//!   this long after it connected (or after its first byte following a
//!   response), or then the whole body the head announced within the same
//!   time, is disconnected, so clients that trickle a request (slowloris,
//!   or its slow-body variant) cannot pin connections;
//! - an idle timeout for keep-alive connections between requests, longer
//!   than the header-read one;
//! - a bounded shutdown: on the signal it stops accepting, closes every
//!   connection that has no request in flight, lets requests in flight
//!   (purchases waiting for their commit) finish, and after
//!   [`HttpLimits::shutdown_timeout`] closes whatever is left, whatever the
//!   clients do. The caller then flushes the writer.
//!
//! Each connection is HTTP/1.1 served by hyper (`http1::Builder`), its
//! shutdown driven by hyper-util's `GracefulShutdown` and its socket's reads
//! seen through tokio-util's `InspectReader`. The crates do not cover the
//! caps (see `cap.rs`) nor the timeouts as the tests hold them (see
//! `activity.rs`): hyper's own `header_read_timeout` also times the wait for
//! the next request on a keep-alive connection, from the end of the previous
//! response, so an idle connection could not outlast a slow head; and
//! tower-http's `RequestBodyTimeoutLayer` restarts its clock on every frame,
//! so a body trickled a byte at a time would never be cut.
//!
//! # Layout
//!
//! - `mod.rs`: the accept loop ([`serve`]);
//! - `limits.rs`: [`HttpLimits`], their defaults, and the open-file limit
//!   the connection cap's default derives from;
//! - `cap.rs`: the connection caps, checked on accept, and their answers;
//! - `connection.rs`: one connection: hyper around the router, and the
//!   watchdog that closes it;
//! - `activity.rs`: a connection's [`Phase`] and the deadline it owes;
//! - `tracked.rs`: the socket and body wrappers that report to it;
//! - `shutdown.rs`: the bounded graceful shutdown.

mod activity;
mod cap;
mod connection;
mod limits;
mod shutdown;
mod tracked;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::time::Instant;

pub use activity::{Activity, Phase};
pub use limits::{
    DEFAULT_MAX_CONNECTIONS, HttpLimits, RESERVED_FILES, open_file_limit, raise_open_file_limit,
};

use crate::client_cap::ClientCap;
use cap::{Caps, every_ten_seconds};
use shutdown::Shutdown;

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
    let mut caps = Caps::new(&limits, clients);
    let connections = Shutdown::default();
    let mut shutdown = pin!(shutdown);
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
        let Some((stream, admitted)) = caps.admit(stream, peer) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection::serve(
            stream,
            peer,
            router.clone(),
            limits,
            admitted,
            connections.signals(),
        ));
    }
    tracing::info!(
        open = connections.open(),
        "stopping: answering the requests in flight, then committing queued orders"
    );
    // Stop accepting: new clients are refused by the kernel from here.
    drop(listener);
    connections.run(limits.shutdown_timeout).await;
    Ok(())
}
