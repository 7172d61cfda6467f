//! The exporter's HTTP client: hyper-util on a runtime of its own, over
//! plain HTTP or TLS (rustls, the webpki roots) as the endpoint's scheme
//! says.

use axum::http::{Request, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError};
use std::time::Duration;

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
    /// A client whose exports each take at most `timeout`.
    pub(super) fn new(timeout: Duration) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()?;
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(timeout));
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
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
