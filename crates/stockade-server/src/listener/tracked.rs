//! The wrappers that report a connection's traffic to its [`Activity`]:
//! its socket's reads (through tokio-util's `InspectReader`), each request
//! and its body, and each response's body.
//!
//! Own code for the bodies: no crate tells when a request's body has all
//! arrived, or when hyper has finished writing (and dropped) a response's
//! body, to a watcher that must be woken then. tower-http's in-flight
//! counter counts the same span but only answers when polled.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::Incoming;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::io::InspectReader;

use super::activity::Activity;

/// `stream`, reporting to `activity` whenever bytes arrive (its writes,
/// vectored ones too, pass straight through).
pub(super) fn watched(
    stream: TcpStream,
    activity: Arc<Activity>,
) -> InspectReader<TcpStream, impl FnMut(&[u8])> {
    InspectReader::new(stream, move |read: &[u8]| {
        if !read.is_empty() {
            activity.bytes_read(Instant::now());
        }
    })
}

/// A request handed to the router: its body reports its arrival, and the
/// returned guard marks it in flight until dropped.
pub(super) fn start(
    request: hyper::Request<Incoming>,
    activity: &Arc<Activity>,
) -> (hyper::Request<TrackedRequestBody>, BusyGuard) {
    let body_pending = !http_body::Body::is_end_stream(request.body());
    activity.request_started(Instant::now(), body_pending);
    let busy = BusyGuard(Arc::clone(activity));
    let request = request.map(|inner| TrackedRequestBody {
        inner,
        activity: Arc::clone(activity),
        received: !body_pending,
    });
    (request, busy)
}

/// Marks a request in flight for as long as it lives (dropped when its
/// response body has been written, or when the connection is closed under
/// it).
pub(super) struct BusyGuard(Arc<Activity>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.request_finished(Instant::now());
    }
}

/// A request body that tells the connection's [`Activity`] when it has
/// arrived, so that a body trickled in slowly is timed like a slow head.
pub(super) struct TrackedRequestBody {
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
pub(super) struct TrackedBody {
    inner: axum::body::Body,
    _busy: BusyGuard,
}

impl TrackedBody {
    pub(super) fn new(inner: axum::body::Body, busy: BusyGuard) -> Self {
        Self { inner, _busy: busy }
    }
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
