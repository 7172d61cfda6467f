//! `stockade load` against a real `stockade serve`, started in-process on
//! the embedded default (in-memory engine, SQLite store).

use std::sync::Arc;

use stockade_bench::http_load::{self, LoadConfig, LoadError};
use stockade_bench::scenario::{Overrides, Scenario, Workload};
use stockade_server::config::{RawConfig, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const TOKEN: &str = "load-test-admin-token-0123456789";

struct Service {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

async fn serve() -> Service {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = RawConfig::default();
    settings.http.listen = Some("127.0.0.1:0".into());
    settings.storage.data_dir = Some(dir.path().to_path_buf());
    settings.access.admin_token = Some(TOKEN.into());
    let config = ServerConfig::resolve(settings, RawConfig::default(), None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        stockade_server::run(listener, config, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Service {
        url,
        stop: Some(stop),
        task,
        _dir: dir,
    }
}

impl Service {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_over_demand_seed_over_http_sells_exactly_the_stock() {
    let service = serve().await;
    let workload = Workload::new(
        Some(Scenario::Seed150),
        &Overrides {
            concurrency: Some(32),
            ..Overrides::default()
        },
    )
    .unwrap();
    let config = LoadConfig {
        hold_seconds: None,
        url: service.url.clone(),
        admin_token: TOKEN.into(),
        workload,
    };
    let report = http_load::run(&config, Arc::new(|| {})).await.unwrap();
    let r = &report.result;
    assert!(r.ok, "{:?}", r.problems);
    assert_eq!(r.strategy, "http");
    assert_eq!((r.purchased, r.sold_out, r.remaining), (100, 50, Some(0)));
    assert_eq!(report.statuses.get("201"), Some(&100));
    assert_eq!(report.statuses.get("409 sold_out"), Some(&50));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["results"][0]["statuses"]["201"], 100);
    assert_eq!(json["results"][0]["purchased"], 100);
    assert!(report.to_markdown().contains("| 409 sold_out | 50 |"));
    service.stop().await;
}

/// `--hold-seconds`: the sale is created with the hold, so every order of
/// the run is `held` (what the throughput comparison with holds measures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_with_a_hold_makes_held_orders() {
    let service = serve().await;
    let config = LoadConfig {
        hold_seconds: Some(600),
        url: service.url.clone(),
        admin_token: TOKEN.into(),
        workload: Workload::new(Some(Scenario::Seed100), &Overrides::default()).unwrap(),
    };
    let report = http_load::run(&config, Arc::new(|| {})).await.unwrap();
    assert!(report.result.ok, "{:?}", report.result.problems);
    let client = reqwest::Client::new();
    let sale: serde_json::Value = client
        .get(format!("{}/v1/sales/{}", service.url, report.sale))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sale["hold_seconds"], 600, "{sale}");
    let page: serde_json::Value = client
        .get(format!(
            "{}/v1/sales/{}/orders?limit=1000",
            service.url, report.sale
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let orders = page["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 100);
    assert!(orders.iter().all(|o| o["status"] == "held"), "{page}");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_admin_token_is_refused_with_a_hint() {
    let service = serve().await;
    let config = LoadConfig {
        hold_seconds: None,
        url: service.url.clone(),
        admin_token: "not-the-token".into(),
        workload: Workload::new(Some(Scenario::Seed100), &Overrides::default()).unwrap(),
    };
    let error = http_load::run(&config, Arc::new(|| {})).await.unwrap_err();
    assert!(matches!(error, LoadError::Service(_)));
    assert!(error.to_string().contains("--admin-token"), "{error}");
    let bad_url = LoadConfig {
        hold_seconds: None,
        url: "127.0.0.1:8080".into(),
        ..config
    };
    assert!(http_load::run(&bad_url, Arc::new(|| {})).await.is_err());
    service.stop().await;
}
