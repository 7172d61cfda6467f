//! One connection: hyper's HTTP/1.1 server around the router, watched by
//! the connection's [`Activity`] for its timeouts and by the shutdown.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::activity::Activity;
use super::cap::over_cap;
use super::limits::HttpLimits;
use super::tracked::{BusyGuard, TrackedBody, TrackedRequestBody, Watched};
use crate::client_cap::{ClientCap, Slot};

/// Serves one connection until the client closes it, a timeout closes it,
/// or the shutdown does. On `probation` (its client is over its cap) only
/// admin requests are served; anything else is refused and the connection
/// closed.
#[allow(clippy::too_many_arguments)]
pub(super) async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    _places: (OwnedSemaphorePermit, Slot),
    probation: Option<Arc<ClientCap>>,
    stopping: CancellationToken,
    closing: CancellationToken,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let on_request = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let body_pending = !http_body::Body::is_end_stream(request.body());
        let busy = BusyGuard::new(Arc::clone(&on_request), body_pending);
        let activity = Arc::clone(&on_request);
        let mut request = request.map(|inner| TrackedRequestBody {
            inner,
            activity,
            received: !body_pending,
        });
        request.extensions_mut().insert(ConnectInfo(peer));
        let refused = probation
            .as_ref()
            .is_some_and(|cap| !cap.is_admin(request.headers()));
        let response = (!refused).then(|| router.clone().oneshot(request));
        async move {
            let Some(response) = response else {
                tracing::debug!(%peer, "a request over its client's connection cap refused");
                return Ok(over_cap().map(|body| TrackedBody {
                    inner: body,
                    _busy: busy,
                }));
            };
            // Busy until the whole body is written: a streamed answer
            // (server-sent events) is not idle while it streams.
            let response = response.await;
            response.map(|r| {
                r.map(|body| TrackedBody {
                    inner: body,
                    _busy: busy,
                })
            })
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The watchdog below times request heads and idleness apart.
        .header_read_timeout(None)
        .keep_alive(true);
    let mut served = pin!(builder.serve_connection(io, service));
    let mut draining = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, %peer, "connection ended with an error");
                }
                return;
            }
            phase = activity.expired(limits.header_read_timeout, limits.idle_timeout) => {
                tracing::debug!(%peer, ?phase, "closing a connection past its timeout");
                return;
            }
            () = stopping.cancelled(), if !draining => {
                // Nothing in flight: nothing to answer, close now.
                if !activity.is_busy() {
                    return;
                }
                served.as_mut().graceful_shutdown();
                draining = true;
            }
            () = closing.cancelled() => return,
        }
    }
}
