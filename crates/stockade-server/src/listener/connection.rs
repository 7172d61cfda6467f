//! One connection: hyper's HTTP/1.1 server around the router, handed to the
//! graceful shutdown, and watched by the connection's [`Activity`] for its
//! timeouts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt;

use super::activity::Activity;
use super::cap::{Admitted, over_cap};
use super::limits::HttpLimits;
use super::shutdown::Signals;
use super::tracked;

/// Serves one connection until the client closes it, a timeout closes it,
/// or the shutdown does. On probation (its client is over its cap) only
/// admin requests are served; anything else is refused and the connection
/// closed.
pub(super) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    admitted: Admitted,
    signals: Signals,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(tracked::watched(stream, Arc::clone(&activity)));
    let probation = admitted.probation.clone();
    let on_request = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let (mut request, busy) = tracked::start(request, &on_request);
        request.extensions_mut().insert(ConnectInfo(peer));
        let refused = probation
            .as_ref()
            .is_some_and(|cap| !cap.is_admin(request.headers()));
        let response = (!refused).then(|| router.clone().oneshot(request));
        async move {
            let response = match response {
                Some(response) => response.await?,
                None => {
                    tracing::debug!(%peer, "a request over its client's connection cap refused");
                    over_cap()
                }
            };
            // Busy until the whole body is written: a streamed answer
            // (server-sent events) is not idle while it streams.
            Ok::<_, Infallible>(response.map(|body| tracked::TrackedBody::new(body, busy)))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // hyper's header-read timeout would also time the wait between requests
    // (see the module docs): the watchdog below times heads and idleness
    // apart.
    builder.header_read_timeout(None).keep_alive(true);
    let mut served = pin!(signals.watcher.watch(builder.serve_connection(io, service)));
    let mut stopping = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, %peer, "connection ended with an error");
                }
                break;
            }
            phase = activity.expired(limits.header_read_timeout, limits.idle_timeout) => {
                tracing::debug!(%peer, ?phase, "closing a connection past its timeout");
                break;
            }
            // hyper, told by the graceful shutdown, finishes a request in
            // flight and closes; one still reading a head would wait for it.
            () = signals.stopping.cancelled(), if !stopping => {
                if !activity.is_busy() {
                    break;
                }
                stopping = true;
            }
            () = signals.closing.cancelled() => break,
        }
    }
    // `admitted`, a parameter, is dropped after the connection: its places
    // under the caps are given back once its socket is closed.
}
