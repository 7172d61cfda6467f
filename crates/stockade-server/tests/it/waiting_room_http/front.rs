//! The deployment under test: the embedded default or two instances on
//! Redis, and the requests a buyer sends through it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Setup, TOKEN, TestServer};
use crate::instances::{Backends, Instance};

const SECRET: &str = "shared-admission-secret-0123456789abcdef";

/// One or more instances of one deployment; requests go round-robin.
pub(crate) struct Front {
    urls: Vec<String>,
    pub(crate) client: reqwest::Client,
    _embedded: Option<TestServer>,
    _instances: Vec<Instance>,
    _backends: Option<Backends>,
}

impl Front {
    pub(crate) async fn embedded() -> Self {
        let server = TestServer::start(Setup::Embedded).await;
        Self {
            urls: vec![server.url.clone()],
            client: client(),
            _embedded: Some(server),
            _instances: Vec::new(),
            _backends: None,
        }
    }

    /// Two instances on one Redis and one PostgreSQL, with one admission secret.
    pub(crate) async fn two_on_redis() -> Self {
        let backends = Backends::start(false).await;
        let mut instances = Vec::new();
        for _ in 0..2 {
            instances.push(
                Instance::start(&backends, |config| {
                    config.access.admission_secret = Some(SECRET.into());
                })
                .await,
            );
        }
        Self {
            urls: instances.iter().map(|i| i.url.clone()).collect(),
            client: client(),
            _embedded: None,
            _instances: instances,
            _backends: Some(backends),
        }
    }

    pub(crate) fn at(&self, n: usize, path: &str) -> String {
        format!("{}{path}", self.urls[n % self.urls.len()])
    }

    pub(crate) async fn create_sale(&self, body: Value) -> (u16, Value) {
        let request = self
            .client
            .post(self.at(0, "/v1/sales"))
            .bearer_auth(TOKEN)
            .json(&body);
        common::split(request.send().await.unwrap()).await
    }

    pub(crate) async fn join(&self, n: usize, sale: &str, user: &str) -> (u16, Value) {
        let request = self
            .client
            .post(self.at(n, &format!("/v1/sales/{sale}/queue")))
            .json(&json!({ "user_id": user }));
        common::split(request.send().await.unwrap()).await
    }

    pub(crate) async fn poll(&self, n: usize, ticket: &str) -> (u16, Value) {
        let request = self.client.get(self.at(n, &format!("/v1/queue/{ticket}")));
        common::split(request.send().await.unwrap()).await
    }

    pub(crate) async fn get(&self, n: usize, path: &str) -> (u16, Value) {
        common::split(self.client.get(self.at(n, path)).send().await.unwrap()).await
    }

    pub(crate) async fn buy(
        &self,
        n: usize,
        sale: &str,
        user: &str,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.at(n, &format!("/v1/sales/{sale}/purchases")))
            .json(&json!({ "user_id": user, "quantity": 1 }));
        if let Some(token) = token {
            request = request.header("Admission-Token", token);
        }
        common::split(request.send().await.unwrap()).await
    }

    /// [`Front::buy`] as a careful client does it: a 503 (the sale being
    /// rebuilt on an instance that just learned of it, say) is retried
    /// after a pause, with the same admission, for up to 20 s.
    pub(crate) async fn buy_retrying(
        &self,
        n: usize,
        sale: &str,
        user: &str,
        token: Option<&str>,
    ) -> (u16, Value) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answer = self.buy(n, sale, user, token).await;
            if answer.0 != 503 || Instant::now() > deadline {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls until the ticket is admitted; its admission token.
    pub(crate) async fn admitted(&self, ticket: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        for n in 0.. {
            let (status, body) = self.poll(n, ticket).await;
            assert_eq!(status, 200, "{body}");
            if body["status"] == "admitted" {
                return body["admission_token"].as_str().unwrap().to_owned();
            }
            assert_eq!(body["status"], "waiting", "{body}");
            assert!(Instant::now() < deadline, "never admitted: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(128)
        .build()
        .unwrap()
}

pub(crate) fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}
