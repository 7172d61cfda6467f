//! The connection caps' answers: a connection over the global cap is
//! answered `503` with `Retry-After: 1` and closed unread; a request on a
//! connection over its client's cap ([`crate::client_cap`]) gets the same
//! status and the connection is closed after it.

use tokio::net::TcpStream;

/// The answer to a connection over the cap.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 94\r\n\
\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"too many open connections; retry shortly\"}}";

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
pub(super) fn refuse(stream: TcpStream) {
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
