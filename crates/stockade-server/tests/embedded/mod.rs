//! One embedded service (memory engine, SQLite) whose settings and clock a
//! test chooses, listening on a free port; and a reader of `/metrics`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stockade_core::{Clock, SystemClock};
use stockade_server::Service;
use stockade_server::config::ServerConfig;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{self, Setup, TOKEN, Timing};

/// A running embedded service.
pub struct Embedded {
    pub url: String,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Embedded {
    /// Starts with the test defaults changed by `tweak`, on `clock`.
    pub async fn start(tweak: impl FnOnce(&mut ServerConfig), clock: Arc<dyn Clock>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = common::config(Setup::Embedded, dir.path(), None, None, Timing::default());
        tweak(&mut config);
        let service = Service::start_with_clock(&config, clock).await.unwrap();
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
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            shutdown: Some(tx),
            task: Some(task),
            _dir: dir,
        }
    }

    /// Starts with the test defaults on the system clock.
    pub async fn default_settings() -> Self {
        Self::start(|_| {}, Arc::new(SystemClock)).await
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
        common::split(request.send().await.unwrap()).await
    }

    /// The samples of `/metrics`.
    pub async fn scrape(&self) -> Scrape {
        let text = self
            .client
            .get(self.at("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        Scrape::parse(&text)
    }

    /// Graceful stop.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed `/metrics` answer.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub text: String,
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = match series.split_once('{') {
                    Some((name, rest)) => {
                        let body = rest.strip_suffix('}').unwrap();
                        let labels = body
                            .split("\",")
                            .filter(|p| !p.is_empty())
                            .map(|pair| {
                                let (k, v) = pair.split_once("=\"").unwrap();
                                (k.to_owned(), v.trim_end_matches('"').to_owned())
                            })
                            .collect();
                        (name.to_owned(), labels)
                    }
                    None => (series.to_owned(), BTreeMap::new()),
                };
                Sample {
                    name,
                    labels,
                    value: value.parse().unwrap(),
                }
            })
            .collect();
        Self {
            text: text.to_owned(),
            samples,
        }
    }

    /// The value of the sample named `name` with exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// Whether any sample is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }

    /// Whether any sample has label `key` = `value`.
    pub fn has_label(&self, key: &str, value: &str) -> bool {
        self.samples
            .iter()
            .any(|s| s.labels.get(key).map(String::as_str) == Some(value))
    }
}
