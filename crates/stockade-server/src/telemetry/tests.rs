use super::*;
use axum::http::Request;
use tracing::Span;
use tracing_subscriber::layer::SubscriberExt as _;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn the_setting_wins_over_the_standard_variables() {
    let found = endpoint(
        Some(("http://a:4318", "--otlp-endpoint".to_owned())),
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://b:4318")]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(found.url, "http://a:4318/v1/traces");
    assert_eq!(found.from, "--otlp-endpoint");
}

#[test]
fn the_standard_variables_follow_the_specification() {
    let base = endpoint(
        None,
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://b:4318/")]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(base.url, "http://b:4318/v1/traces");
    let traces = endpoint(
        None,
        env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://b:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"),
        ]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(traces.url, "http://c:4318/custom");
    assert_eq!(traces.from, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
}

#[test]
fn nothing_configured_or_disabled_is_off() {
    assert_eq!(endpoint(None, env(&[])).unwrap(), None);
    assert_eq!(
        endpoint(None, env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])).unwrap(),
        None
    );
    assert_eq!(
        endpoint(
            Some(("http://a:4318", "--otlp-endpoint".to_owned())),
            env(&[("OTEL_SDK_DISABLED", "TRUE")])
        )
        .unwrap(),
        None
    );
}

#[test]
fn a_bad_standard_variable_is_named() {
    let error = endpoint(
        None,
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://collector:4317")]),
    )
    .unwrap_err();
    assert_eq!(error.setting, "OTEL_EXPORTER_OTLP_ENDPOINT");
    assert!(error.reason.contains("https://"), "{error}");
}

#[test]
fn an_https_endpoint_as_platforms_inject_it_is_used() {
    let found = endpoint(
        None,
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com")]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(found.url, "https://otlp.example.com/v1/traces");
    assert!(ExportClient::new(EXPORT_TIMEOUT, export::tls_config(env(&[])).unwrap()).is_ok());
}

/// The CA file of `OTEL_EXPORTER_OTLP_CERTIFICATE` (the traces' own
/// variable first): a file that is not there or holds no certificate is
/// an error naming the variable. (Spans over TLS to a collector with a
/// private CA: `crates/stockade/tests/traces_tls.rs`.)
#[test]
fn the_certificate_variables_name_a_pem_file_of_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    let not_pem = not_pem.to_str().unwrap();
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let (name, why) =
        export::tls_config(env(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", missing)])).unwrap_err();
    assert_eq!(name, "OTEL_EXPORTER_OTLP_CERTIFICATE");
    assert!(
        why.contains("cannot read") && why.contains(missing),
        "{why}"
    );
    let (name, why) = export::tls_config(env(&[
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", missing),
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", not_pem),
    ]))
    .unwrap_err();
    assert_eq!(name, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE");
    assert!(why.contains("holds no PEM certificate"), "{why}");
}

#[test]
fn the_export_timeout_follows_the_standard_variables() {
    assert_eq!(export_timeout(env(&[])), EXPORT_TIMEOUT);
    let ms = std::time::Duration::from_millis;
    assert_eq!(
        export_timeout(env(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")])),
        ms(2_500)
    );
    assert_eq!(
        export_timeout(env(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"),
        ])),
        ms(700)
    );
    assert_eq!(
        export_timeout(env(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")])),
        EXPORT_TIMEOUT
    );
}

#[test]
fn with_the_default_log_filter_the_spans_are_disabled() {
    // The subscriber of `stockade serve` without an endpoint: the log
    // layer alone, at its default filter.
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("info,sqlx=warn")
        .with_writer(std::io::sink)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let request = Request::post("/v1/sales/s/purchases")
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .body(())
            .unwrap();
        let span = request_span(&request);
        assert!(span.is_disabled());
        let _entered = span.enter();
        assert!(Span::current().is_disabled(), "nothing to carry for a link");
    });
    assert!(!is_on());
}

/// Keeps what the SDK exports, for the tests.
#[derive(Debug, Clone, Default)]
struct Kept(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Kept {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// A store batch carries up to 512 orders (the engine's, 256): its span
/// links every one of them, beyond the SDK's default cap of 128.
/// A full store batch at the default `--batch-max`.
const FULL_BATCH: usize = 512;

#[test]
fn a_full_batch_span_links_every_purchase_in_it() {
    let kept = Kept::default();
    let provider = provider_builder()
        .with_simple_exporter(kept.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let purchases: Vec<Span> = (0..FULL_BATCH)
            .map(|_| tracing::info_span!("request"))
            .collect();
        let batch = tracing::info_span!("store commit");
        for purchase in &purchases {
            batch.follows_from(purchase);
        }
        drop(batch);
    });
    let spans = kept.0.lock().unwrap();
    let batch = spans
        .iter()
        .find(|s| s.name == "store commit")
        .expect("the batch span was exported");
    assert_eq!(
        (batch.links.len(), batch.links.dropped_count),
        (FULL_BATCH, 0),
        "links kept and dropped of a batch of {FULL_BATCH}"
    );
}

#[test]
fn only_plain_http_and_https_urls_are_endpoints() {
    assert_eq!(
        check_endpoint("http://collector:4318/").unwrap(),
        "http://collector:4318"
    );
    assert_eq!(
        check_endpoint("http://[::1]:4318").unwrap(),
        "http://[::1]:4318"
    );
    assert_eq!(
        check_endpoint("https://collector:4318/").unwrap(),
        "https://collector:4318"
    );
    for bad in [
        "collector:4318",
        "https://",
        "http://",
        "http://user:pw@collector:4318",
        "http://collector:4318/?x=1",
        "grpc://collector:4317",
    ] {
        assert!(check_endpoint(bad).is_err(), "{bad}");
    }
}
