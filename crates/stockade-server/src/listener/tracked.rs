//! The wrappers that report a connection's traffic to its [`Activity`]:
//! its socket's reads, each request's body, and each response's body.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::activity::Activity;

/// Marks a request in flight for as long as it lives (dropped when its
/// response body has been written, or when the connection is closed under
/// it).
pub(super) struct BusyGuard(Arc<Activity>);

impl BusyGuard {
    pub(super) fn new(activity: Arc<Activity>, body_pending: bool) -> Self {
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
pub(super) struct TrackedRequestBody {
    pub(super) inner: Incoming,
    pub(super) activity: Arc<Activity>,
    pub(super) received: bool,
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
    pub(super) inner: axum::body::Body,
    pub(super) _busy: BusyGuard,
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
pub(super) struct Watched {
    pub(super) inner: TcpStream,
    pub(super) activity: Arc<Activity>,
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
