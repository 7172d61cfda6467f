//! The exporter's HTTP client: hyper-util on a runtime of its own, over
//! plain HTTP or TLS (rustls) as the endpoint's scheme says. TLS trusts
//! the webpki roots and the certificates of the PEM file the standard
//! `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` or `OTEL_EXPORTER_OTLP_CERTIFICATE`
//! names (a collector with a private CA).

use axum::http::{Request, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// How long one export may take before it is given up (the OTLP default;
/// `OTEL_EXPORTER_OTLP_TIMEOUT` changes it, see [`super::export_timeout`]).
pub(super) const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest collector answer read (it is a small protobuf message).
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// The exporter's HTTP client: hyper's, on a one-thread runtime of its own
/// (the batch processor calls it from its own thread, outside any
/// runtime).
pub(super) struct ExportClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportClient").finish_non_exhaustive()
    }
}

impl ExportClient {
    /// A client whose exports each take at most `timeout`, over TLS with
    /// `tls` ([`tls_config`]).
    pub(super) fn new(timeout: Duration, tls: rustls::ClientConfig) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()?;
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(timeout));
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
            runtime: Some(runtime),
        })
    }
}

/// The standard variables naming a PEM file of CA certificates the
/// exporter trusts, the traces' own first.
const CERTIFICATE_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
];

/// The exporter's TLS settings: ring, the webpki roots, and every
/// certificate of the file the first set of [`CERTIFICATE_VARIABLES`]
/// names (read with `env`). An error names the variable and says what is
/// wrong with its file.
pub(super) fn tls_config(
    env: impl Fn(&str) -> Option<String>,
) -> Result<rustls::ClientConfig, (String, String)> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let named = CERTIFICATE_VARIABLES.into_iter().find_map(|name| {
        env(name)
            .map(|path| path.trim().to_owned())
            .filter(|path| !path.is_empty())
            .map(|path| (name, path))
    });
    if let Some((name, path)) = named {
        let bad = |reason: String| (name.to_owned(), reason);
        for cert in certificates(Path::new(&path)).map_err(bad)? {
            roots
                .add(cert)
                .map_err(|e| bad(format!("{path}: a certificate rustls refuses: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ("TLS".to_owned(), e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The certificates of a PEM file: at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{shown} is not a PEM file of certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(certs)
}

impl Drop for ExportClient {
    fn drop(&mut self) {
        // Dropped wherever the exporter ends, possibly inside a runtime,
        // where a blocking shutdown would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let Some(runtime) = &self.runtime else {
            return Err("the exporter has stopped".into());
        };
        let client = self.client.clone();
        let timeout = self.timeout;
        let sent = runtime.spawn(async move {
            tokio::time::timeout(timeout, async move {
                let response = client.request(request.map(Full::new)).await?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_ANSWER_BYTES)
                    .collect()
                    .await?
                    .to_bytes();
                Ok::<_, HttpError>(Response::from_parts(parts, body))
            })
            .await
            .map_err(|_| HttpError::from("the collector did not answer in time"))?
        });
        sent.await?
    }
}
