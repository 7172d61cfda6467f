//! The connection caps, checked as each connection is accepted: the global
//! one ([`HttpLimits::max_connections`]) and each client's
//! ([`crate::client_cap`]).
//!
//! Own code, because no crate caps *connections* this way: tower's and
//! tower-http's limits act on requests, and hyper / hyper-util / axum
//! accept whatever the listener hands them. A connection over the global
//! cap is answered `503` with `Retry-After: 1` and closed unread, so the
//! process never runs out of file descriptors and the client knows to come
//! back; a request on a connection over its client's cap gets the same
//! status, and the connection is closed after it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::HttpLimits;
use crate::client_cap::{Admission, ClientCap, Slot};

/// The answer to a connection over the cap.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 94\r\n\
\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"too many open connections; retry shortly\"}}";

/// Both caps of one listener.
#[derive(Debug)]
pub(super) struct Caps {
    permits: Arc<Semaphore>,
    most: usize,
    clients: Arc<ClientCap>,
    last_refusal_log: Option<Instant>,
}

/// A connection let in: its places under both caps, given back when
/// dropped (when the connection closes).
#[derive(Debug)]
pub(super) struct Admitted {
    _permit: OwnedSemaphorePermit,
    _slot: Slot,
    /// Its client is over its cap: serve only admin requests, answer
    /// anything else [`over_cap`].
    pub(super) probation: Option<Arc<ClientCap>>,
}

impl Caps {
    pub(super) fn new(limits: &HttpLimits, clients: Arc<ClientCap>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limits.max_connections)),
            most: limits.max_connections,
            clients,
            last_refusal_log: None,
        }
    }

    /// Lets `stream` in, or answers it 503 and closes it.
    pub(super) fn admit(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Option<(TcpStream, Admitted)> {
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            if every_ten_seconds(&mut self.last_refusal_log) {
                tracing::warn!(
                    max_connections = self.most,
                    "connection cap reached; refusing new connections with 503 (--max-connections)"
                );
            }
            refuse(stream);
            return None;
        };
        let (slot, probation) = match self.clients.admit(peer.ip()) {
            Admission::Counted(slot) => (slot, None),
            Admission::Probation(slot) => (slot, Some(Arc::clone(&self.clients))),
            Admission::Refused => {
                tracing::warn!(
                    %peer,
                    most = self.clients.most(),
                    "a client is over its connection cap; refusing (--max-connections-per-client)"
                );
                refuse(stream);
                return None;
            }
        };
        let admitted = Admitted {
            _permit: permit,
            _slot: slot,
            probation,
        };
        Some((stream, admitted))
    }
}

/// Whether ten seconds have passed since `last` (then set to now): a
/// warning repeated on every connection would flood the log.
pub(super) fn every_ten_seconds(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < Duration::from_secs(10)) {
        return false;
    }
    *last = Some(now);
    true
}

/// The answer to a request on a connection over its client's cap; the
/// connection closes after it.
pub(super) fn over_cap() -> axum::response::Response {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
