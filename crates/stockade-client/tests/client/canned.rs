//! The client against what the service never sends: no answer at all, and
//! canned answers whose body is not the API's.

use std::time::Duration;

use stockade_api::ErrorCode;

use crate::cases::api_error;
use stockade_client::{Client, ClientError, OrderRef, Purchase};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test]
async fn no_answer_is_a_transport_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = Client::builder(format!("http://127.0.0.1:{port}"))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let error = client.sale("drop").await.unwrap_err();
    assert!(error.is_transport(), "{error:?}");
    assert_eq!(error.status(), None);
    assert_eq!(error.code(), None);
    assert!(error.to_string().starts_with("no answer: "), "{error}");
    let error = client
        .purchase_brief::<OrderRef>("drop", &Purchase::by("ann"))
        .await
        .unwrap_err();
    assert!(error.is_transport(), "{error:?}");
}

/// Serves `answers` in turn, one per connection, each a raw HTTP/1.1
/// status line and headers and a body, and returns the requests it read.
async fn canned(
    answers: Vec<(&'static str, &'static str)>,
) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut requests = Vec::new();
        for (head, body) in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Headers, then the body its Content-Length announces.
            loop {
                let read = socket.read(&mut buffer).await.unwrap();
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                if read == 0 {
                    break;
                }
            }
            requests.push(String::from_utf8_lossy(&request).to_string());
            let answer = format!(
                "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
            socket.shutdown().await.unwrap();
        }
        requests
    });
    (url, task)
}

#[tokio::test]
async fn a_body_that_is_not_the_apis_is_unreadable() {
    let (url, server) = canned(vec![
        ("HTTP/1.1 502 Bad Gateway", "not json!"),
        (
            "HTTP/1.1 200 OK\r\ncontent-type: application/json",
            r#"{"id": 12}"#,
        ),
        (
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 7",
            r#"{"error":{"code":"overloaded","message":"too busy, retry"}}"#,
        ),
        (
            "HTTP/1.1 409 Conflict\r\ncontent-type: application/json",
            r#"{"error":{"code":"sold_out","message":"all gone"}}"#,
        ),
    ])
    .await;
    let client = Client::builder(&url)
        .admin_token("canned-admin")
        .bearer_token("canned-buyer")
        .build()
        .unwrap();
    let error = client.sale("drop").await.unwrap_err();
    match &error {
        ClientError::Unreadable { status, body, .. } => {
            assert_eq!(status.as_u16(), 502);
            assert_eq!(body, "not json!");
        }
        other => panic!("not unreadable: {other:?}"),
    }
    assert_eq!(error.status().map(|s| s.as_u16()), Some(502));
    assert_eq!(error.code(), None);
    // A 2xx body of another shape.
    let error = client.sale("drop").await.unwrap_err();
    assert!(
        matches!(&error, ClientError::Unreadable { status, .. } if status.as_u16() == 200),
        "{error:?}"
    );
    // An error answer: its code, message and Retry-After.
    let error = client
        .purchase("drop", &Purchase::by("ann").idempotency_key("k-1"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&error), (503, ErrorCode::Overloaded));
    assert_eq!(error.retry_after(), Some(7));
    assert_eq!(error.answer().unwrap().error.message, "too busy, retry");
    let brief = client
        .purchase_brief::<OrderRef>("drop", &Purchase::as_caller().respond_async())
        .await
        .unwrap();
    assert_eq!(
        (brief.status.as_u16(), brief.outcome),
        (409, Err(ErrorCode::SoldOut))
    );

    // What was sent: routes, headers and bodies.
    let requests = server.await.unwrap();
    assert!(
        requests[0].starts_with("GET /v1/sales/drop HTTP/1.1\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        !requests[0].to_ascii_lowercase().contains("authorization"),
        "{}",
        requests[0]
    );
    let purchase = requests[2].to_ascii_lowercase();
    assert!(
        purchase.starts_with("post /v1/sales/drop/purchases http/1.1\r\n"),
        "{purchase}"
    );
    assert!(
        purchase.contains("authorization: bearer canned-buyer\r\n"),
        "{purchase}"
    );
    assert!(purchase.contains("idempotency-key: k-1\r\n"), "{purchase}");
    assert!(
        purchase.contains("content-type: application/json\r\n"),
        "{purchase}"
    );
    assert!(
        purchase.ends_with("\r\n\r\n{\"user_id\":\"ann\",\"quantity\":1}"),
        "{purchase}"
    );
    let brief = requests[3].to_ascii_lowercase();
    assert!(brief.contains("prefer: respond-async\r\n"), "{brief}");
    assert!(brief.ends_with("\r\n\r\n{\"quantity\":1}"), "{brief}");
}
