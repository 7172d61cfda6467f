//! Traces over https (issue 36, item 6), against an OTLP/HTTP receiver
//! served here over TLS with a certificate the test makes (rcgen): a CA,
//! and a certificate for `127.0.0.1` it signs. `stockade serve` sends to
//! `https://127.0.0.1:PORT`:
//!
//! - with `OTEL_EXPORTER_OTLP_CERTIFICATE` naming the CA's PEM file, the
//!   spans arrive, decoded as OTLP protobuf;
//! - without it the CA is no webpki root: the exporter's handshakes fail
//!   and nothing arrives (the receiver counts the refused handshakes, so
//!   the exporter did try);
//! - with a file that is not there, the service starts, warns naming the
//!   variable, and runs without traces.

use std::io;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use stockade_test_support::ServeProcess;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;

const TOKEN: &str = "traces-tls-test-admin-token-0123";
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long spans may take to arrive (the batch processor exports every
/// 100 ms here).
const EXPORT_WAIT: Duration = Duration::from_secs(15);
/// How long the refused exporter is watched: several export attempts.
const REFUSED_WAIT: Duration = Duration::from_secs(2);

/// What the receiver saw.
#[derive(Debug, Default)]
struct Seen {
    /// Spans decoded from `POST /v1/traces`.
    spans: AtomicUsize,
    /// TLS handshakes that failed.
    refused: AtomicUsize,
}

/// A CA (its certificate as PEM) and a certificate for 127.0.0.1 it signed,
/// with its key.
fn certificates() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "stockade traces test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (ca.pem(), leaf.der().clone(), key)
}

/// Accepts TCP connections and completes their TLS handshake; a failed
/// handshake is counted and the next connection accepted.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    seen: Arc<Seen>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, from)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(tcp).await {
                Ok(tls) => return (tls, from),
                Err(_) => {
                    self.seen.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// An OTLP/HTTP receiver over TLS on a random loopback port: its base URL
/// and what it saw.
async fn receiver(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> (String, Arc<Seen>) {
    async fn take(State(seen): State<Arc<Seen>>, body: Bytes) -> Vec<u8> {
        let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        seen.spans.fetch_add(spans, Ordering::Relaxed);
        // An empty ExportTraceServiceResponse: everything accepted.
        Vec::new()
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let seen = Arc::new(Seen::default());
    let listener = TlsListener {
        tcp: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
        seen: Arc::clone(&seen),
    };
    let url = format!("https://{}", listener.tcp.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/v1/traces", post(take))
        .with_state(Arc::clone(&seen));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// `stockade serve` with none of the developer's `STOCKADE_*`, `OTEL_*` or
/// `RUST_LOG` variables, exporting to `collector` every 100 ms, plus `env`.
fn serve(data_dir: &std::path::Path, collector: &str, env: &[(&str, &str)]) -> ServeProcess {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
    for (name, _) in std::env::vars() {
        if name.starts_with("STOCKADE_") || name.starts_with("OTEL_") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("STOCKADE_ADMIN_TOKEN", TOKEN)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .envs(env.iter().copied());
    ServeProcess::start(command, &data_dir.with_extension("log"), START_TIMEOUT)
        .unwrap_or_else(|e| panic!("stockade serve did not start: {e}"))
}

/// A few requests, each a `request` span.
async fn traffic(url: &str) {
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let answer = client
            .get(format!("{url}/v1/sales/none"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_https_collector_whose_ca_the_certificate_variable_names() {
    let (ca, cert, key) = certificates();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("collector-ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();

    // Trusted through the standard variable: the spans arrive.
    let (collector, seen) = receiver(cert.clone(), key.clone_key()).await;
    let server = serve(
        &dir.path().join("trusted"),
        &collector,
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca_file.to_str().unwrap())],
    );
    traffic(server.url()).await;
    let deadline = Instant::now() + EXPORT_WAIT;
    while seen.spans.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop();
    let log = std::fs::read_to_string(dir.path().join("trusted.log")).unwrap();
    assert!(
        seen.spans.load(Ordering::Relaxed) > 0,
        "no span reached the https collector in {} s ({} handshakes refused); log:\n{log}",
        EXPORT_WAIT.as_secs(),
        seen.refused.load(Ordering::Relaxed)
    );
    assert!(
        log.contains(&format!("traces: OTLP/HTTP to {collector}")),
        "{log}"
    );

    // Not trusted (the CA is no webpki root): the handshakes fail, nothing arrives.
    let (collector, seen) = receiver(cert, key).await;
    let server = serve(&dir.path().join("untrusted"), &collector, &[]);
    traffic(server.url()).await;
    let deadline = Instant::now() + EXPORT_WAIT;
    while seen.refused.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(REFUSED_WAIT).await;
    server.stop();
    assert!(
        seen.refused.load(Ordering::Relaxed) > 0,
        "the exporter never tried the untrusted collector"
    );
    assert_eq!(
        seen.spans.load(Ordering::Relaxed),
        0,
        "spans reached a collector whose certificate nobody trusts"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_file_that_is_not_there_is_a_warning_and_the_service_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-ca.pem");
    let server = serve(
        &dir.path().join("data"),
        "https://127.0.0.1:9",
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", missing.to_str().unwrap())],
    );
    traffic(server.url()).await;
    server.stop();
    let log = std::fs::read_to_string(dir.path().join("data.log")).unwrap();
    assert!(
        log.contains("traces are off")
            && log.contains("OTEL_EXPORTER_OTLP_CERTIFICATE")
            && log.contains("cannot read"),
        "the warning names the variable and the file:\n{log}"
    );
}
