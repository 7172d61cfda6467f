//! Starting a real `stockade serve` in-process for tests, on the embedded
//! default or on throwaway Redis + PostgreSQL.

#![allow(dead_code)]

mod draw;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stockade_core::{Clock, SystemClock};
use stockade_server::Service;
use stockade_server::config::{RawConfig, ServerConfig};
use stockade_server::state::AppState;
use stockade_test_support::{PostgresServer, RedisServer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const TOKEN: &str = "test-admin-token-0123456789";
/// The draw key every instance of a test on PostgreSQL shares.
pub const DRAW_KEY: &str = "test-draw-key-0123456789abcdef0123456789";

/// A service listening on a free port.
pub struct TestServer {
    pub url: String,
    pub client: reqwest::Client,
    pub data_dir: PathBuf,
    setup: Setup,
    timing: Timing,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
    pub redis: Option<RedisServer>,
    pub postgres: Option<PostgresServer>,
    pub database_url: Option<String>,
    clock: Arc<dyn Clock>,
    state: Option<AppState>,
}

/// Which backends to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// In-memory engine, SQLite store.
    Embedded,
    /// Redis engine, PostgreSQL store.
    RedisPostgres,
    /// Redis engine, PostgreSQL store, `--fallback postgres`.
    RedisPostgresFallback,
    /// `--engine postgres`: the PostgreSQL store decides every purchase.
    Postgres,
}

impl Setup {
    fn engine(self) -> &'static str {
        match self {
            Self::Embedded => "memory",
            Self::RedisPostgres | Self::RedisPostgresFallback => "redis",
            Self::Postgres => "postgres",
        }
    }
}

/// Timing settings a fault test may shorten.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub commit_deadline_ms: u64,
    pub outbox_grace_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            commit_deadline_ms: 3_000,
            outbox_grace_ms: 10_000,
        }
    }
}

/// The test's own settings, given as flags would be (`STOCKADE_*`
/// variables give way to them): a free port, `data_dir`, the setup's
/// engine and backends, the admin token and `timing`.
pub fn settings(
    setup: Setup,
    data_dir: &std::path::Path,
    redis: Option<String>,
    database: Option<String>,
    timing: Timing,
) -> RawConfig {
    let mut raw = RawConfig::default();
    raw.http.listen = Some("127.0.0.1:0".into());
    raw.storage.data_dir = Some(data_dir.to_path_buf());
    raw.storage.engine = Some(setup.engine().into());
    raw.storage.fallback = (setup == Setup::RedisPostgresFallback).then(|| "postgres".into());
    raw.redis.redis_url = redis;
    // Instances sharing a PostgreSQL store share a draw key (the embedded
    // default keeps its own in the data directory).
    raw.access.draw_key = database.is_some().then(|| DRAW_KEY.into());
    raw.storage.database_url = database;
    raw.access.admin_token = Some(TOKEN.into());
    raw.purchases.commit_deadline_ms = Some(timing.commit_deadline_ms);
    raw.purchases.outbox_grace_ms = Some(timing.outbox_grace_ms);
    raw
}

pub fn config(
    setup: Setup,
    data_dir: &std::path::Path,
    redis: Option<String>,
    database: Option<String>,
    timing: Timing,
) -> ServerConfig {
    resolved(settings(setup, data_dir, redis, database, timing), &[])
}

/// `settings` resolved over `STOCKADE_*` variables `vars`, as a user sets
/// them (they give way to the test's own settings, as variables give way
/// to flags).
pub fn resolved(settings: RawConfig, vars: &[(&str, &str)]) -> ServerConfig {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env =
        RawConfig::from_env(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            .unwrap();
    ServerConfig::resolve(settings, env, None).unwrap()
}

impl TestServer {
    pub async fn start(setup: Setup) -> Self {
        Self::start_with(setup, Timing::default()).await
    }

    pub async fn start_with(setup: Setup, timing: Timing) -> Self {
        Self::start_adjusted(setup, timing, Arc::new(SystemClock), |_| {}).await
    }

    /// A server reading time from `clock` (a `ManualClock` in tests of
    /// windows and holds).
    pub async fn start_with_clock(setup: Setup, timing: Timing, clock: Arc<dyn Clock>) -> Self {
        Self::start_adjusted(setup, timing, clock, |_| {}).await
    }

    /// A server on `clock` with `adjust`ed settings (identity, rate
    /// limits...); a [`TestServer::restart`] keeps the clock and goes back
    /// to the default settings.
    pub async fn start_adjusted(
        setup: Setup,
        timing: Timing,
        clock: Arc<dyn Clock>,
        adjust: impl FnOnce(&mut RawConfig),
    ) -> Self {
        Self::start_full(setup, timing, clock, &[], adjust).await
    }

    /// A server on `clock` with `STOCKADE_*` variables `vars` (settings
    /// given the way a user gives them) and `adjust`ed settings.
    pub async fn start_with_env(
        setup: Setup,
        clock: Arc<dyn Clock>,
        vars: &[(&str, &str)],
        adjust: impl FnOnce(&mut RawConfig),
    ) -> Self {
        Self::start_full(setup, Timing::default(), clock, vars, adjust).await
    }

    async fn start_full(
        setup: Setup,
        timing: Timing,
        clock: Arc<dyn Clock>,
        vars: &[(&str, &str)],
        adjust: impl FnOnce(&mut RawConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (redis, postgres, database_url) = match setup {
            Setup::Embedded => (None, None, None),
            Setup::RedisPostgres | Setup::RedisPostgresFallback => {
                let redis = RedisServer::start().unwrap();
                let pg = PostgresServer::start().unwrap();
                let url = pg.fresh_database().await.unwrap();
                (Some(redis), Some(pg), Some(url))
            }
            Setup::Postgres => {
                let pg = PostgresServer::start().unwrap();
                let url = pg.fresh_database().await.unwrap();
                (None, Some(pg), Some(url))
            }
        };
        let mut settings = settings(
            setup,
            dir.path(),
            redis.as_ref().map(RedisServer::url),
            database_url.clone(),
            timing,
        );
        adjust(&mut settings);
        let config = resolved(settings, vars);
        let mut server = Self {
            setup,
            timing,
            url: String::new(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            data_dir: dir.path().to_path_buf(),
            shutdown: None,
            task: None,
            _dir: dir,
            redis,
            postgres,
            database_url,
            clock,
            state: None,
        };
        server.launch(config).await;
        server
    }

    /// A second instance beside `first`: its own data directory, the same
    /// store, Redis and clock (instances behind one load balancer).
    pub async fn start_beside(first: &TestServer) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(
            first.setup,
            dir.path(),
            first.redis.as_ref().map(RedisServer::url),
            first.database_url.clone(),
            first.timing,
        );
        let config = resolved(settings, &[]);
        let mut server = Self {
            setup: first.setup,
            timing: first.timing,
            url: String::new(),
            client: first.client.clone(),
            data_dir: dir.path().to_path_buf(),
            shutdown: None,
            task: None,
            _dir: dir,
            redis: None,
            postgres: None,
            database_url: first.database_url.clone(),
            clock: Arc::clone(&first.clock),
            state: None,
        };
        server.launch(config).await;
        server
    }

    async fn launch(&mut self, config: ServerConfig) {
        let service = Service::start_with_clock(&config, Arc::clone(&self.clock))
            .await
            .unwrap();
        self.state = Some(service.state().clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        self.url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel();
        self.shutdown = Some(tx);
        self.task = Some(tokio::spawn(async move {
            service
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        }));
    }

    /// The running service's shared state.
    pub fn state(&self) -> &AppState {
        self.state.as_ref().expect("the server is running")
    }

    /// Graceful stop (in-flight requests finish, the writer flushes).
    pub async fn stop(&mut self) {
        // The state keeps the commit queue open: the writer would not end.
        self.state = None;
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }

    /// Stops and starts again on the same data (same store and Redis).
    pub async fn restart(&mut self) {
        self.stop().await;
        let config = config(
            self.setup,
            &self.data_dir,
            self.redis.as_ref().map(RedisServer::url),
            self.database_url.clone(),
            self.timing,
        );
        self.launch(config).await;
    }

    /// The backends this server runs on.
    pub fn setup(&self) -> Setup {
        self.setup
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    pub async fn create_sale(&self, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.at("/v1/sales"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        split(response).await
    }

    pub async fn buy(
        &self,
        sale: &str,
        user: &str,
        quantity: u32,
        key: Option<&str>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.at(&format!("/v1/sales/{sale}/purchases")))
            .json(&json!({"user_id": user, "quantity": quantity}));
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        split(request.send().await.unwrap()).await
    }

    /// A purchase with any body (SKUs, bundles, bad input).
    pub async fn buy_with(&self, sale: &str, body: Value) -> (u16, Value) {
        let request = self
            .client
            .post(self.at(&format!("/v1/sales/{sale}/purchases")))
            .json(&body);
        split(request.send().await.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        split(self.client.get(self.at(path)).send().await.unwrap()).await
    }

    pub async fn admin_get(&self, path: &str) -> (u16, Value) {
        split(
            self.client
                .get(self.at(path))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Confirms an order as the payment service would (the admin token
    /// stands in for the payments token: both may confirm).
    pub async fn confirm(&self, order_id: impl std::fmt::Display) -> (u16, Value) {
        split(
            self.client
                .post(self.at(&format!("/v1/orders/{order_id}/confirm")))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn post(&self, path: &str) -> (u16, Value) {
        split(self.client.post(self.at(path)).send().await.unwrap()).await
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics_text(&self) -> String {
        self.client
            .get(self.at("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Every committed order of a sale, through the admin API.
    pub async fn all_orders(&self, sale: &str) -> Vec<Value> {
        let mut orders = Vec::new();
        let mut after = String::new();
        loop {
            let query = if after.is_empty() {
                "?limit=1000".to_owned()
            } else {
                format!("?limit=1000&after={after}")
            };
            let (status, page) = self
                .admin_get(&format!("/v1/sales/{sale}/orders{query}"))
                .await;
            assert_eq!(status, 200, "{page}");
            orders.extend(page["orders"].as_array().unwrap().iter().cloned());
            match page["next_after"].as_str() {
                Some(next) => after = next.to_owned(),
                None => return orders,
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The sum of a metric's series (every label set) in Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub async fn split(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}
