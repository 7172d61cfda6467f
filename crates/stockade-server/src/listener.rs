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

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::client_cap::{Admission as ClientAdmission, ClientCap, Slot};

/// File descriptors kept out of the connection cap's default and bound:
/// the store's pool, Redis connections, the listener, logs, the SQLite
/// files.
pub const RESERVED_FILES: u64 = 128;

/// The default cap is never above this, however high the open-file limit.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 10_000;

/// Timeouts, the connection cap and the shutdown bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a client may take to send a request head, counted from when
    /// it connected or its previous response was sent; and then its body,
    /// counted from the end of the head.
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection may stay open without a request.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open connections of one client address at most.
    pub max_connections_per_client: usize,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_timeout: Duration,
}

impl HttpLimits {
    /// The default cap for an open-file limit: the limit less
    /// [`RESERVED_FILES`], at most [`DEFAULT_MAX_CONNECTIONS`], at least 16.
    pub fn default_max_connections(open_file_limit: u64) -> usize {
        open_file_limit
            .saturating_sub(RESERVED_FILES)
            .clamp(16, DEFAULT_MAX_CONNECTIONS) as usize
    }

    /// The highest cap allowed under an open-file limit.
    pub fn most_connections(open_file_limit: u64) -> usize {
        open_file_limit.saturating_sub(RESERVED_FILES).max(16) as usize
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(75),
            max_connections: Self::default_max_connections(open_file_limit()),
            max_connections_per_client: crate::client_cap::DEFAULT_PER_CLIENT,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// The process's open-file limit (`ulimit -n`, the soft limit).
pub fn open_file_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1_024, |(soft, _)| soft)
}

/// Raises the open-file soft limit to the hard limit (as Go's runtime
/// does), so that the default connection cap is not held at a distribution's
/// historical 1,024. Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => open_file_limit(),
    }
}

/// The answer to a connection over the cap.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 94\r\n\
\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"too many open connections; retry shortly\"}}";

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

/// The answer to a request on a connection over its client's cap; the
/// connection closes after it.
fn over_cap() -> axum::response::Response {
    let mut response =
        axum::response::Response::new(axum::body::Body::from(crate::client_cap::OVER_CAP_BODY));
    *response.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", "application/json"),
        ("retry-after", "1"),
        ("connection", "close"),
    ] {
        headers.insert(name, axum::http::HeaderValue::from_static(value));
    }
    response
}

/// Answers a connection over the cap without reading it, and closes it.
fn refuse(stream: TcpStream) {
    // The socket's send buffer is empty: the answer fits without waiting.
    let _ = stream.try_write(REFUSAL);
    if let Ok(stream) = stream.into_std() {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

/// Serves one connection until the client closes it, a timeout closes it,
/// or the shutdown does. On `probation` (its client is over its cap) only
/// admin requests are served; anything else is refused and the connection
/// closed.
#[allow(clippy::too_many_arguments)]
async fn connection(
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

/// Marks a request in flight for as long as it lives (dropped when its
/// response body has been written, or when the connection is closed under
/// it).
struct BusyGuard(Arc<Activity>);

impl BusyGuard {
    fn new(activity: Arc<Activity>, body_pending: bool) -> Self {
        activity.request_started(Instant::now(), body_pending);
        Self(activity)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.request_finished(Instant::now());
    }
}

/// A request body that tells the connection's [`Activity`] when it has
/// arrived, so that a body trickled in slowly is timed like a slow head.
struct TrackedRequestBody {
    inner: Incoming,
    activity: Arc<Activity>,
    received: bool,
}

impl TrackedRequestBody {
    fn mark_received(&mut self) {
        if !self.received {
            self.received = true;
            self.activity.body_received();
        }
    }
}

impl http_body::Body for TrackedRequestBody {
    type Data = axum::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None | Some(Err(_))) => self.mark_received(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.mark_received(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for TrackedRequestBody {
    /// A body the handler never read (a request refused on its head) does
    /// not keep the connection in the body phase.
    fn drop(&mut self) {
        self.mark_received();
    }
}

/// A response body that keeps its request [`BusyGuard`] until hyper has
/// written it all (or the connection is dropped).
struct TrackedBody {
    inner: axum::body::Body,
    _busy: BusyGuard,
}

impl http_body::Body for TrackedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A socket that reports its reads to the connection's [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read(Instant::now());
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Duration = Duration::from_secs(5);
    const IDLE: Duration = Duration::from_secs(75);

    #[test]
    fn default_cap_stays_inside_the_open_file_limit() {
        assert_eq!(HttpLimits::default_max_connections(1_024), 896);
        assert_eq!(HttpLimits::default_max_connections(1 << 20), 10_000);
        assert_eq!(HttpLimits::default_max_connections(64), 16);
        assert_eq!(HttpLimits::most_connections(4_096), 3_968);
    }

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(
            head.ends_with(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "too_many_connections");
    }

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
