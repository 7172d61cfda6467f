//! OpenTelemetry traces of `stockade serve` (issue 22, item 5), against a
//! real OTLP/HTTP receiver started here: an HTTP server taking
//! `POST /v1/traces`, decoding the protobuf bodies with `opentelemetry-proto`.
//!
//! One purchase's trace reaches from the caller's `traceparent` to the
//! commit: the request span continues the caller's trace, the purchase
//! pipeline is its child, and the Redis engine's batch and the writer's
//! store commit (each its own root span, serving many requests) link to the
//! request's span. Sale and order ids are attributes; JSON log lines carry
//! the trace and span ids. With no endpoint, nothing is exported.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};
use stockade_test_support::{RedisServer, ServeProcess};

const TOKEN: &str = "traces-test-admin-token-0123";
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long spans may take to reach the receiver (the batch processor
/// exports every 100 ms here).
const EXPORT_WAIT: Duration = Duration::from_secs(20);

/// A span as received, with the service that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

/// The spans the receiver took, in arrival order.
type Spans = Arc<Mutex<Vec<Received>>>;

/// An OTLP/HTTP receiver on a random loopback port: its base URL and what
/// it received.
async fn receiver() -> (String, Spans) {
    async fn take(State(spans): State<Spans>, body: Bytes) -> Vec<u8> {
        let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
        let mut spans = spans.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| text(kv.value.as_ref()))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Received {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
        // An empty ExportTraceServiceResponse: everything accepted.
        Vec::new()
    }
    let spans = Spans::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(take))
        .with_state(Arc::clone(&spans));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, spans)
}

fn text(value: Option<&AnyValue>) -> Option<String> {
    match value?.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// A span's attributes, as text.
fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|kv| Some((kv.key.clone(), text(kv.value.as_ref())?)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `stockade serve` with none of the developer's `STOCKADE_*`, `OTEL_*` or
/// `RUST_LOG` variables, plus `args` and `env`.
fn serve(data_dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> ServeProcess {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stockade"));
    for (name, _) in std::env::vars() {
        if name.starts_with("STOCKADE_") || name.starts_with("OTEL_") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env("STOCKADE_ADMIN_TOKEN", TOKEN)
        .envs(env.iter().copied());
    ServeProcess::start(command, &data_dir.with_extension("log"), START_TIMEOUT)
        .unwrap_or_else(|e| panic!("stockade serve did not start: {e}"))
}

async fn create_sale(client: &reqwest::Client, url: &str, id: &str, stock: u64) {
    let response = client
        .post(format!("{url}/v1/sales"))
        .bearer_auth(TOKEN)
        .json(&json!({"id": id, "stock": stock}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
}

/// Buys one item for `buyer` as a caller whose span is `parent` in trace
/// `trace`; returns the status and body.
async fn buy(
    client: &reqwest::Client,
    url: &str,
    sale: &str,
    buyer: &str,
    trace: &str,
    parent: &str,
) -> (u16, Value) {
    let response = client
        .post(format!("{url}/v1/sales/{sale}/purchases"))
        .header("traceparent", format!("00-{trace}-{parent}-01"))
        .json(&json!({"user_id": buyer}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits until `done` holds for the spans received, or panics with them.
async fn spans_until(
    spans: &Spans,
    what: &str,
    done: impl Fn(&[Received]) -> bool,
) -> Vec<Received> {
    let deadline = Instant::now() + EXPORT_WAIT;
    loop {
        let now = spans.lock().unwrap().clone();
        if done(&now) {
            return now;
        }
        if Instant::now() > deadline {
            let names: Vec<String> = now
                .iter()
                .map(|r| {
                    format!(
                        "{} trace {} span {} parent {} links {:?}",
                        r.span.name,
                        hex(&r.span.trace_id),
                        hex(&r.span.span_id),
                        hex(&r.span.parent_span_id),
                        r.span
                            .links
                            .iter()
                            .map(|l| format!("{}/{}", hex(&l.trace_id), hex(&l.span_id)))
                            .collect::<Vec<_>>()
                    )
                })
                .collect();
            panic!("{what}: not received within {EXPORT_WAIT:?}; received {names:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `span` links to the span `span_id` of trace `trace`.
fn links_to(span: &Span, trace: &[u8], span_id: &[u8]) -> bool {
    span.links
        .iter()
        .any(|link| link.trace_id == trace && link.span_id == span_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_purchase_is_traced_from_the_callers_request_through_the_batches_to_the_commit() {
    let (collector, spans) = receiver().await;
    let redis = RedisServer::start().expect("redis-server (apt-get install redis-server)");
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &[
            "--engine",
            "redis",
            "--redis-url",
            &redis.url(),
            "--otlp-endpoint",
            &collector,
            "--log-format",
            "json",
        ],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            // Logs and traces are filtered apart: warn-only logs still
            // export every span; tower-http's DEBUG answer line shows the
            // ids a JSON log line carries.
            ("RUST_LOG", "warn,tower_http=debug"),
        ],
    );
    let url = server.url().to_owned();
    let client = reqwest::Client::new();
    create_sale(&client, &url, "traced", 100).await;

    // A crowd of callers at once, each in a trace of its own, so the
    // engine's micro-batches and the writer's commits carry several
    // requests; the first one is followed.
    let callers: Vec<(String, String)> = (0..16u32)
        .map(|i| {
            (
                format!("4bf92f3577b34da6a3ce929d0e0e{i:04x}"),
                format!("00f067aa0ba9{i:04x}"),
            )
        })
        .collect();
    let answers =
        futures::future::join_all(callers.iter().enumerate().map(|(i, (trace, parent))| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                buy(
                    &client,
                    &url,
                    "traced",
                    &format!("buyer-{i}"),
                    trace,
                    parent,
                )
                .await
            }
        }))
        .await;
    for (status, body) in &answers {
        assert_eq!(*status, 201, "{body}");
    }
    let (trace, parent) = &callers[0];
    let order_id = answers[0].1["order_id"].as_str().unwrap().to_owned();
    let trace_id = (0..16)
        .map(|i| u8::from_str_radix(&trace[2 * i..2 * i + 2], 16).unwrap())
        .collect::<Vec<u8>>();

    // The request's span, then the batches linked to it.
    let request_of = |received: &[Received]| {
        received
            .iter()
            .find(|r| r.span.trace_id == trace_id && r.span.name.starts_with("POST "))
            .map(|r| r.span.clone())
    };
    let received = spans_until(&spans, "the followed request's span", |r| {
        request_of(r).is_some()
    })
    .await;
    let request = request_of(&received).unwrap();
    let received = spans_until(
        &spans,
        "an engine batch and a store commit linked to the request",
        |r| {
            let linked = |name: &str| {
                r.iter()
                    .any(|s| s.span.name == name && links_to(&s.span, &trace_id, &request.span_id))
            };
            linked("purchase.lua") && linked("store commit")
        },
    )
    .await;

    // The request: the caller's trace and parent, a server span, the answer.
    assert_eq!(
        hex(&request.parent_span_id),
        *parent,
        "the caller's span is the parent"
    );
    assert_eq!(request.name, "POST /v1/sales/{id}/purchases");
    assert_eq!(request.kind, SpanKind::Server as i32);
    let attrs = attributes(&request);
    assert_eq!(attrs["http.response.status_code"], "201", "{attrs:?}");
    assert_eq!(attrs["http.route"], "/v1/sales/{id}/purchases", "{attrs:?}");
    assert_eq!(attrs["sale_id"], "traced", "{attrs:?}");
    assert_eq!(attrs["order_id"], order_id, "{attrs:?}");
    assert!(
        received.iter().all(|r| r.service == "stockade"),
        "OTEL_SERVICE_NAME defaults to stockade"
    );

    // The pipeline: a child of the request, with its steps under it.
    let in_trace: Vec<&Span> = received
        .iter()
        .map(|r| &r.span)
        .filter(|s| s.trace_id == trace_id)
        .collect();
    let pipeline = in_trace
        .iter()
        .find(|s| s.name == "purchase")
        .expect("the purchase pipeline's span");
    assert_eq!(
        pipeline.parent_span_id, request.span_id,
        "the pipeline is the request's child"
    );
    let attrs = attributes(pipeline);
    assert_eq!(attrs["sale_id"], "traced", "{attrs:?}");
    assert_eq!(attrs["order_id"], order_id, "{attrs:?}");
    assert_eq!(attrs["answered"], "purchased", "{attrs:?}");
    for step in ["route", "gate", "settle"] {
        let span = in_trace
            .iter()
            .find(|s| s.name == step)
            .unwrap_or_else(|| panic!("no {step} span in the trace"));
        assert_eq!(
            span.parent_span_id, pipeline.span_id,
            "{step} is a step of the pipeline"
        );
    }
    let gate = in_trace.iter().find(|s| s.name == "gate").unwrap();
    assert_eq!(attributes(gate)["decider"], "redis");
    assert_eq!(attributes(gate)["outcome"], "purchased");
    let settle = in_trace.iter().find(|s| s.name == "settle").unwrap();
    assert_eq!(attributes(settle)["order_id"], order_id);
    assert_eq!(attributes(settle)["verdict"], "committed");

    // The engine's batch and the store's commit: root spans of their own,
    // linked to the request's span (and, in a crowd, to others').
    for name in ["purchase.lua", "store commit"] {
        let batch = received
            .iter()
            .map(|r| &r.span)
            .find(|s| s.name == name && links_to(s, &trace_id, &request.span_id))
            .unwrap();
        assert!(batch.parent_span_id.is_empty(), "{name} is a root span");
        assert_ne!(batch.trace_id, trace_id, "{name} has its own trace");
        assert_eq!(attributes(batch)["sale_id"], "traced", "{name}");
    }
    // One link per purchase, across however many batches the crowd made.
    let links = |r: &[Received]| -> usize {
        r.iter()
            .filter(|r| r.span.name == "purchase.lua")
            .map(|r| r.span.links.len())
            .sum()
    };
    spans_until(&spans, "a link from a batch to every purchase", |r| {
        links(r) == callers.len()
    })
    .await;
    assert_eq!(
        attributes(
            received
                .iter()
                .map(|r| &r.span)
                .find(|s| s.name == "purchase.lua" && links_to(s, &trace_id, &request.span_id))
                .unwrap()
        )["engine"],
        "redis"
    );

    // A JSON log line written inside the request carries its ids.
    server.stop();
    let log = std::fs::read_to_string(dir.path().with_extension("log")).unwrap();
    let line: Value = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["trace_id"] == trace.as_str())
        .unwrap_or_else(|| panic!("no JSON log line carries trace {trace}:\n{log}"));
    assert_eq!(line["span_id"], hex(&request.span_id), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_variables_turn_traces_on_and_a_stop_exports_what_is_queued() {
    let (collector, spans) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
            ("OTEL_SERVICE_NAME", "shop-stockade"),
            // Nothing is exported on schedule during the test: what arrives
            // comes from the flush at SIGTERM.
            ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
        ],
    );
    let client = reqwest::Client::new();
    create_sale(&client, server.url(), "plain", 5).await;
    // No traceparent: the request starts a trace of its own.
    let response = client
        .post(format!("{}/v1/sales/plain/purchases", server.url()))
        .json(&json!({"user_id": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        spans.lock().unwrap().is_empty(),
        "exported before the schedule or the stop"
    );
    // SIGTERM, waiting for the exit (the flush happens before it).
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap();
    let received = spans.lock().unwrap().clone();
    let request = received
        .iter()
        .find(|r| r.span.name == "POST /v1/sales/{id}/purchases")
        .expect("the purchase's request span, exported at the stop");
    assert_eq!(request.service, "shop-stockade");
    assert!(request.span.parent_span_id.is_empty(), "a trace of its own");
    // The memory engine decides without a batch; the writer still commits
    // in one, linked to the request.
    assert!(
        received.iter().any(|s| {
            s.span.name == "store commit"
                && links_to(&s.span, &request.span.trace_id, &request.span.span_id)
        }),
        "the store commit linked to the request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_endpoint_nothing_is_exported_and_purchases_go_on() {
    let (collector, spans) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    // The receiver listens, but nothing names it: no setting, no variable.
    let _ = collector;
    let server = serve(
        dir.path(),
        &["--log-format", "json"],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let client = reqwest::Client::new();
    create_sale(&client, server.url(), "quiet", 5).await;
    let (status, body) = buy(
        &client,
        server.url(),
        "quiet",
        "bob",
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    .await;
    assert_eq!(status, 201, "{body}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.stop();
    assert!(
        spans.lock().unwrap().is_empty(),
        "nothing is exported without an endpoint"
    );
    let log = std::fs::read_to_string(dir.path().with_extension("log")).unwrap();
    assert!(
        !log.contains("trace_id"),
        "no trace ids in the logs:\n{log}"
    );
    assert!(!log.contains("traces:"), "no traces announced:\n{log}");
}

/// Issue 36, item 6: traces never stop the service. A standard variable
/// the exporter cannot use is a warning at start, and the service runs and
/// sells without traces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_exporter_setting_is_a_warning_and_the_service_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--log-format", "json"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://collector:4317")],
    );
    let client = reqwest::Client::new();
    create_sale(&client, server.url(), "untraced", 5).await;
    let (status, body) = buy(
        &client,
        server.url(),
        "untraced",
        "bob",
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    .await;
    assert_eq!(status, 201, "{body}");
    server.stop();
    let log = std::fs::read_to_string(dir.path().with_extension("log")).unwrap();
    assert!(
        log.contains("traces are off") && log.contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "the warning names the variable:\n{log}"
    );
    assert!(!log.contains("traces: OTLP"), "no traces announced:\n{log}");
}
