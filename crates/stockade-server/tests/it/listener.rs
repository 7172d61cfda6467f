//! The HTTP server under hostile clients (issue 12, item 7), in-process on
//! raw sockets: slow request heads are cut at the header-read timeout, idle
//! keep-alive connections at the idle timeout (and not at the header one),
//! connections over the cap are answered 503 at once, and a shutdown ends
//! within its bound whatever half-sent requests are open.

use std::time::{Duration, Instant};

use stockade_server::Service;
use stockade_server::config::{RawConfig, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TOKEN: &str = "listener-test-admin-token-01";

/// A service on a free port with these settings.
struct Server {
    address: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

async fn serve(settings: &[(&str, &str)]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = RawConfig::from_pairs(settings).unwrap();
    settings.http.listen = Some("127.0.0.1:0".into());
    settings.storage.data_dir = Some(dir.path().to_path_buf());
    settings.access.admin_token = Some(TOKEN.into());
    let config = ServerConfig::resolve(settings, RawConfig::default(), None).unwrap();
    let service = Service::start(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        service
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Server {
        address,
        stop: Some(stop),
        task,
        _dir: dir,
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n";

/// Connects and sends the head of a JSON `POST` announcing `length` bytes
/// of body (`extra` is more header lines, each ending in CRLF).
async fn post_head(
    address: std::net::SocketAddr,
    path: &str,
    length: usize,
    extra: &str,
) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: test\r\n{extra}\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Reads one whole response (headers and a Content-Length body).
async fn read_response(stream: &mut TcpStream) -> String {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(
            n > 0,
            "closed mid-response: {:?}",
            String::from_utf8_lossy(&buffer)
        );
        buffer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buffer).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
    }
}

/// Waits until the server closes `stream` (read returns 0 or an error),
/// writing `trickle` every 100 ms meanwhile; returns how long it took.
async fn time_until_closed(stream: &mut TcpStream, trickle: Option<&[u8]>) -> Duration {
    let started = Instant::now();
    let mut chunk = [0u8; 1024];
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server kept the connection open for 30 s"
        );
        if let Some(bytes) = trickle
            && stream.write_all(bytes).await.is_err()
        {
            return started.elapsed();
        }
        let read = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut chunk)).await;
        // Closed (0 bytes, or an error such as a reset); a timeout goes on.
        if let Ok(Ok(0) | Err(_)) = read {
            return started.elapsed();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_head_is_cut_at_the_header_read_timeout() {
    let server = serve(&[("header_read_timeout_ms", "500")]).await;
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream
        .write_all(b"POST /v1/sales/s/purchases HTTP/1.1\r\nhost: test\r\n")
        .await
        .unwrap();
    // One header line every 100 ms: the head never completes.
    let took = time_until_closed(&mut stream, Some(b"x-slow: 1\r\n")).await;
    assert!(
        took >= Duration::from_millis(400),
        "closed after {took:?}, before the timeout"
    );
    // A client that sends nothing at all is cut the same way.
    let mut silent = TcpStream::connect(server.address).await.unwrap();
    let took = time_until_closed(&mut silent, None).await;
    assert!(took >= Duration::from_millis(400), "closed after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_body_is_cut_like_a_slow_head() {
    let server = serve(&[("header_read_timeout_ms", "500")]).await;
    let mut stream = post_head(server.address, "/v1/sales/s/purchases", 4_000, "").await;
    stream.write_all(b"{").await.unwrap();
    // One byte every 100 ms: the body never completes.
    let took = time_until_closed(&mut stream, Some(b" ")).await;
    assert!(
        took >= Duration::from_millis(400),
        "closed after {took:?}, before the timeout"
    );
    // A request whose body arrives in time is answered as usual.
    let body = br#"{"user_id":"on-time"}"#;
    let mut stream = post_head(server.address, "/v1/sales/nope/purchases", body.len(), "").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stream.write_all(body).await.unwrap();
    let answer = read_response(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("unknown_sale"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_lasts_the_idle_timeout_not_the_header_one() {
    let server = serve(&[
        ("header_read_timeout_ms", "300"),
        ("idle_timeout_ms", "2000"),
    ])
    .await;
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut stream).await.starts_with("HTTP/1.1 200"));
    // Idle for longer than the header timeout: still open.
    tokio::time::sleep(Duration::from_millis(900)).await;
    stream.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut stream).await.starts_with("HTTP/1.1 200"));
    // Then closed once idle for the idle timeout.
    let took = time_until_closed(&mut stream, None).await;
    assert!(
        took >= Duration::from_millis(1_500),
        "closed after {took:?}, before the idle timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_answered_503_at_once() {
    let server = serve(&[
        ("max_connections", "8"),
        ("header_read_timeout_ms", "60000"),
    ])
    .await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        stream.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut stream).await.starts_with("HTTP/1.1 200"));
        held.push(stream);
    }
    let mut extra = TcpStream::connect(server.address).await.unwrap();
    let started = Instant::now();
    let answer = read_response(&mut extra).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("too_many_connections"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused only after {:?}",
        started.elapsed()
    );
    // The held connections still work.
    held[0].write_all(HEALTHZ).await.unwrap();
    assert!(
        read_response(&mut held[0])
            .await
            .starts_with("HTTP/1.1 200")
    );
    // One closes: a new client gets in.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        stream.write_all(HEALTHZ).await.unwrap();
        let answer = read_response(&mut stream).await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_its_bound_whatever_half_sent_requests_are_open() {
    let mut server = serve(&[
        ("commit_deadline_ms", "500"),
        ("shutdown_timeout_ms", "3000"),
        ("header_read_timeout_ms", "60000"),
    ])
    .await;
    // A sale, and a purchase being received when the shutdown begins.
    let sale = br#"{"id":"s","stock":10}"#;
    let authorization = format!("authorization: Bearer {TOKEN}\r\n");
    let mut admin = post_head(server.address, "/v1/sales", sale.len(), &authorization).await;
    admin.write_all(sale).await.unwrap();
    assert!(read_response(&mut admin).await.starts_with("HTTP/1.1 201"));
    drop(admin);
    let purchase = br#"{"user_id":"late-buyer"}"#;
    let mut in_flight =
        post_head(server.address, "/v1/sales/s/purchases", purchase.len(), "").await;
    in_flight.write_all(&purchase[..10]).await.unwrap();
    // Half a head.
    let mut half_head = TcpStream::connect(server.address).await.unwrap();
    half_head
        .write_all(b"POST /v1/sales/s/purchases HTTP/1.1\r\nhost: test\r\n")
        .await
        .unwrap();
    // A whole head and a tenth of the body it announces.
    let mut half_body = post_head(server.address, "/v1/sales/s/purchases", 100, "").await;
    half_body.write_all(br#"{"user_id""#).await.unwrap();
    // An idle keep-alive connection.
    let mut idle = TcpStream::connect(server.address).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut idle).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    server.stop.take().unwrap().send(()).unwrap();
    // Nothing in flight on these two: closed at once, not at the bound.
    assert!(time_until_closed(&mut idle, None).await < Duration::from_millis(2_000));
    assert!(time_until_closed(&mut half_head, None).await < Duration::from_millis(2_000));
    // The purchase in flight is answered, and its connection then closed.
    in_flight.write_all(&purchase[10..]).await.unwrap();
    let answer = read_response(&mut in_flight).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(answer.contains("late-buyer"), "{answer}");
    tokio::time::timeout(Duration::from_secs(10), server.task)
        .await
        .expect("the shutdown did not end within 10 s")
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2_500),
        "the request being received was not given the shutdown timeout: {took:?}"
    );
    // The half-sent body's connection was closed by the bound.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), half_body.read_to_end(&mut rest)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_not_idle_while_it_streams() {
    use axum::body::{Body, Bytes};
    use stockade_server::listener::{HttpLimits, serve};

    // Ten chunks, 200 ms apart: two seconds of streaming under a 500 ms
    // idle timeout.
    let router = axum::Router::new().route(
        "/stream",
        axum::routing::get(|| async {
            let chunks = futures::stream::unfold(0u32, |i| async move {
                if i == 10 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                Some((
                    Ok::<_, std::io::Error>(Bytes::from(format!("chunk {i}\n"))),
                    i + 1,
                ))
            });
            Body::from_stream(chunks)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let limits = HttpLimits {
        header_read_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(500),
        max_connections: 16,
        max_connections_per_client: 16,
        shutdown_timeout: Duration::from_secs(2),
    };
    let clients = stockade_server::client_cap::ClientCap::new(16, Default::default(), "t".into());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, router, limits, clients, async {
        let _ = stopped.await;
    }));
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /stream HTTP/1.1\r\nhost: test\r\n\r\n")
        .await
        .unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    while !String::from_utf8_lossy(&received).contains("chunk 9\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("the stream stalled")
            .unwrap();
        assert!(
            n > 0,
            "cut mid-stream: {:?}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&chunk[..n]);
    }
    // Once it has ended, the connection is idle and closed on time.
    let took = time_until_closed(&mut stream, None).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}
