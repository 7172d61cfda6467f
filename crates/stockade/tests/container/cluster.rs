//! Three containers of the image on one throwaway Redis and one PostgreSQL
//! database, configured as the multi-instance suite configures its
//! processes (Redis engine, PostgreSQL fallback and store), but through the
//! `STOCKADE_*` variables a deployment sets. It offers what the multi-instance
//! suite's crowd and healing modules ask of their cluster.

use std::time::Duration;

use crate::api::{ADMISSION_SECRET, DRAW_KEY, PAYMENTS_TOKEN, TOKEN};
use crate::history::Answer;
use crate::podman::Container;

/// How many containers share the servers.
pub const INSTANCES: usize = 3;
/// How long a purchase waits for its commit before answering 202.
pub const COMMIT_DEADLINE_MS: u64 = 2_000;
/// How old an uncommitted outbox entry must be before any instance commits
/// it (above the commit deadline).
pub const OUTBOX_GRACE_MS: u64 = 3_000;
/// How long a container may take to answer `/readyz` 200 (the first start
/// runs the migrations).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The containers' base URLs, in instance order. They keep their port
/// across a stop and start.
#[derive(Debug, Clone)]
pub struct Endpoints(Vec<String>);

impl Endpoints {
    /// The base URL of instance `index`.
    pub fn get(&self, index: usize) -> String {
        self.0[index].clone()
    }
}

/// The containers and the HTTP client the test talks to them with.
pub struct Cluster {
    containers: Vec<Container>,
    endpoints: Endpoints,
    client: reqwest::Client,
}

impl Cluster {
    /// Starts three containers of `image` on Redis `redis_url` and the
    /// database `database_url`, and waits until each is ready.
    pub async fn start(image: &str, redis_url: &str, database_url: &str) -> Self {
        let env = [
            ("STOCKADE_ENGINE", "redis".to_owned()),
            ("STOCKADE_FALLBACK", "postgres".to_owned()),
            ("STOCKADE_REDIS_URL", redis_url.to_owned()),
            ("STOCKADE_DATABASE_URL", database_url.to_owned()),
            ("STOCKADE_ADMIN_TOKEN", TOKEN.to_owned()),
            ("STOCKADE_PAYMENTS_TOKEN", PAYMENTS_TOKEN.to_owned()),
            ("STOCKADE_ADMISSION_SECRET", ADMISSION_SECRET.to_owned()),
            ("STOCKADE_DRAW_KEY", DRAW_KEY.to_owned()),
            // Every buyer of the crowd comes from this one address.
            ("STOCKADE_MAX_CONNECTIONS_PER_CLIENT", "1000000".to_owned()),
            (
                "STOCKADE_COMMIT_DEADLINE_MS",
                COMMIT_DEADLINE_MS.to_string(),
            ),
            ("STOCKADE_OUTBOX_GRACE_MS", OUTBOX_GRACE_MS.to_string()),
            // The stop's "every acknowledged order is committed" line.
            ("RUST_LOG", "warn,stockade_server=info".to_owned()),
            ("NO_COLOR", "1".to_owned()),
        ];
        let client = crate::api::client();
        let mut containers = Vec::new();
        for index in 0..INSTANCES {
            let name = format!("stockade-test-{}-{index}", std::process::id());
            containers.push(Container::run(image, &name, &env).await);
        }
        for container in &containers {
            if let Err(e) = container.wait_ready(&client, READY_TIMEOUT).await {
                panic!("{e}");
            }
            eprintln!("cluster: {} ready at {}", container.name(), container.url());
        }
        let endpoints = Endpoints(containers.iter().map(Container::url).collect());
        Self {
            containers,
            endpoints,
            client,
        }
    }

    /// Container `index`.
    pub fn container(&self, index: usize) -> &Container {
        &self.containers[index]
    }

    /// The containers' URLs.
    pub fn endpoints(&self) -> Endpoints {
        self.endpoints.clone()
    }

    /// The HTTP client.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Starts the stopped container `index` again and waits until it is
    /// ready.
    pub async fn start_again(&self, index: usize) {
        let container = &self.containers[index];
        container.start_again().await;
        if let Err(e) = container.wait_ready(&self.client, READY_TIMEOUT).await {
            panic!("after its restart: {e}");
        }
    }

    /// Asks every instance once; the answers in instance order.
    pub async fn ask_all<F, Fut>(&self, ask: F) -> Vec<Answer>
    where
        F: Fn(reqwest::Client, String) -> Fut,
        Fut: std::future::Future<Output = Answer>,
    {
        let mut answers = Vec::new();
        for index in 0..INSTANCES {
            answers.push(ask(self.client.clone(), self.endpoints.get(index)).await);
        }
        answers
    }

    /// The end of every container's log, for failure reports.
    pub async fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for container in &self.containers {
            out.push_str(&format!(
                "--- {}, last {lines} log lines:\n{}\n",
                container.name(),
                container.logs(lines).await
            ));
        }
        out
    }
}
