//! Several `stockade serve` instances in this process on one throwaway
//! Redis and one throwaway PostgreSQL, each with its own settings and
//! clock: what the rejection and shedding tests need, and a way to count
//! the work that reaches Redis (INFO commandstats) and PostgreSQL
//! (pg_stat_statements).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use stockade_core::{Clock, SystemClock};
use stockade_server::Service;
use stockade_server::config::RawConfig;
use stockade_server::state::AppState;
use stockade_test_support::{PostgresServer, RedisServer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{self, Setup, TOKEN, Timing};

/// One Redis and one PostgreSQL database shared by the instances.
pub struct Backends {
    pub redis: RedisServer,
    pub postgres: PostgresServer,
    pub database_url: String,
}

impl Backends {
    /// Fresh servers. With `count_statements`, PostgreSQL loads
    /// pg_stat_statements, so [`Backends::statements`] can count what the
    /// instances ask of the store.
    pub async fn start(count_statements: bool) -> Self {
        let redis = RedisServer::start().unwrap();
        let mut postgres = PostgresServer::start().unwrap();
        if count_statements {
            let mut admin = sqlx::PgConnection::connect(&postgres.url()).await.unwrap();
            sqlx::query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                .execute(&mut admin)
                .await
                .unwrap();
            admin.close().await.unwrap();
            postgres.stop();
            postgres.start_again().unwrap();
        }
        let database_url = postgres.fresh_database().await.unwrap();
        if count_statements {
            let mut conn = sqlx::PgConnection::connect(&database_url).await.unwrap();
            sqlx::query("CREATE EXTENSION pg_stat_statements")
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
        Self {
            redis,
            postgres,
            database_url,
        }
    }

    /// Commands Redis has executed so far, `INFO` (the tests' own, and the
    /// reconcilers' restart check) left out.
    pub fn redis_commands(&self) -> u64 {
        let stats = self.redis.command(&["INFO", "commandstats"]).unwrap();
        stats
            .lines()
            .filter_map(|line| line.trim().strip_prefix("cmdstat_"))
            .filter(|line| !line.starts_with("info:"))
            .filter_map(|line| {
                let calls = line.split("calls=").nth(1)?;
                calls.split(',').next()?.parse::<u64>().ok()
            })
            .sum()
    }

    /// Statements PostgreSQL has executed in the instances' database so far
    /// (needs `count_statements`).
    pub async fn statements(&self) -> i64 {
        let mut conn = sqlx::PgConnection::connect(&self.database_url)
            .await
            .unwrap();
        let (calls,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND query NOT LIKE '%pg_stat_statements%'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        calls
    }

    /// Calls of one Redis command (lower case, e.g. `xrange`) so far.
    pub fn redis_calls(&self, command: &str) -> u64 {
        self.redis.calls(&[command]).unwrap()
    }

    /// Calls so far of the statements whose text is `LIKE pattern` (needs
    /// `count_statements`).
    pub async fn statements_like(&self, pattern: &str) -> i64 {
        let mut conn = sqlx::PgConnection::connect(&self.database_url)
            .await
            .unwrap();
        let (calls,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND query LIKE $1",
        )
        .bind(pattern)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        calls
    }

    /// The settings of an instance on these backends.
    pub fn settings(&self, data_dir: &std::path::Path) -> RawConfig {
        common::settings(
            Setup::RedisPostgres,
            data_dir,
            Some(self.redis.url()),
            Some(self.database_url.clone()),
            Timing::default(),
        )
    }
}

/// A running instance. Dropping it aborts it (no graceful stop: `state`
/// keeps the commit queue open).
pub struct Instance {
    pub url: String,
    pub client: reqwest::Client,
    pub state: AppState,
    _shutdown: oneshot::Sender<()>,
    task: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Instance {
    /// An instance on `backends` with the system clock and `adjust`ed
    /// settings.
    pub async fn start(backends: &Backends, adjust: impl FnOnce(&mut RawConfig)) -> Self {
        Self::start_with_clock(backends, Arc::new(SystemClock), adjust).await
    }

    /// An instance on `backends` reading time from `clock`.
    pub async fn start_with_clock(
        backends: &Backends,
        clock: Arc<dyn Clock>,
        adjust: impl FnOnce(&mut RawConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = backends.settings(dir.path());
        adjust(&mut settings);
        let config = common::resolved(settings, &[]);
        let service = Service::start_with_clock(&config, clock).await.unwrap();
        let state = service.state().clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            service
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        Self {
            url,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            state,
            _shutdown: tx,
            task: Some(task),
            _dir: dir,
        }
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
        common::split(response).await
    }

    /// A purchase; the answer with its `Retry-After` header, if any.
    pub async fn buy_with_headers(
        &self,
        sale: &str,
        user: &str,
        key: Option<&str>,
    ) -> (u16, Value, Option<String>) {
        let mut request = self
            .client
            .post(self.at(&format!("/v1/sales/{sale}/purchases")))
            .json(&json!({"user_id": user, "quantity": 1}));
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.unwrap();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let (status, body) = common::split(response).await;
        (status, body, retry_after)
    }

    pub async fn buy(&self, sale: &str, user: &str, key: Option<&str>) -> (u16, Value) {
        let (status, body, _) = self.buy_with_headers(sale, user, key).await;
        (status, body)
    }

    pub async fn cancel(&self, order_id: &str) -> (u16, Value) {
        let response = self
            .client
            .post(self.at(&format!("/v1/orders/{order_id}/cancel")))
            .send()
            .await
            .unwrap();
        common::split(response).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        common::split(self.client.get(self.at(path)).send().await.unwrap()).await
    }

    /// Every committed order of a sale (first page of up to 1000).
    pub async fn orders(&self, sale: &str) -> Vec<Value> {
        let response = self
            .client
            .get(self.at(&format!("/v1/sales/{sale}/orders?limit=1000")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let (status, page) = common::split(response).await;
        assert_eq!(status, 200, "{page}");
        page["orders"].as_array().unwrap().clone()
    }

    /// The sum of a metric's series in this process's Prometheus text.
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

    pub async fn metric(&self, name: &str) -> f64 {
        crate::common::metric_sum(&self.metrics_text().await, name)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
