//! The simulated cluster: instances of the real service (each on its own
//! clock), the store they share, and the gateway the crowd reaches them
//! through, as a load balancer would.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::Value;
use stockade_server::config::{RawConfig, ServerConfig};

use crate::knobs::Knobs;
use stockade_server::tasks::Tasks;
use stockade_server::writer::WriterConfig;
use stockade_server::{Parts, Service};
use stockade_store::{Calls, Down, OrderStore};
use tower::ServiceExt;

use crate::clock::SimClock;
use crate::links::Links;
use crate::redis::{Primary, SimRedis};
use crate::scenario::Engine;

/// The admin token of every simulated instance.
pub const ADMIN_TOKEN: &str = "sim-admin-token-0123456789abcdef";

/// An answer: status and JSON body (`Null` when it is not JSON).
pub type Answer = (u16, Value);

/// What the crowd reaches the instances through: `None` for an instance
/// that is down (a refused connection) or crashed while the request was
/// in flight (a reset connection).
#[derive(Clone, Default)]
pub struct Gateway {
    slots: Arc<Mutex<Vec<Slot>>>,
}

/// An instance as the gateway sees it.
#[derive(Clone)]
struct Slot {
    router: Option<Router>,
    /// Counts the instance's crashes: a request in flight when it moves
    /// gets no answer.
    crashes: tokio::sync::watch::Sender<u64>,
}

impl Gateway {
    /// Sends `request` to instance `instance`; `None` if it is down or
    /// crashes before it answers.
    pub async fn call(&self, instance: usize, request: Request<Body>) -> Option<Answer> {
        let (router, mut crashes) = {
            let slots = self.slots.lock();
            let slot = slots.get(instance)?;
            (slot.router.clone()?, slot.crashes.subscribe())
        };
        let answer = async {
            let response = router.oneshot(request).await.ok()?;
            let status = response.status().as_u16();
            let bytes = response.into_body().collect().await.ok()?.to_bytes();
            Some((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ))
        };
        tokio::select! {
            biased;
            _ = crashes.changed() => None,
            answer = answer => answer,
        }
    }

    /// How many instances there are (up or down).
    pub fn instances(&self) -> usize {
        self.slots.lock().len()
    }

    fn set(&self, instance: usize, router: Option<Router>) {
        let mut slots = self.slots.lock();
        while slots.len() <= instance {
            slots.push(Slot {
                router: None,
                crashes: tokio::sync::watch::channel(0).0,
            });
        }
        slots[instance].router = router;
    }

    /// Cuts every request in flight to `instance`.
    fn crashed(&self, instance: usize) {
        if let Some(slot) = self.slots.lock().get(instance) {
            slot.crashes.send_modify(|n| *n += 1);
        }
    }
}

/// A request with a JSON body.
pub fn json_request(method: &str, uri: &str, body: &Value, admin: bool) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    if admin {
        request = request.header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"));
    }
    request
        .body(Body::from(body.to_string()))
        .expect("a well-formed request")
}

/// One instance: its settings, its clock, and the service while it runs.
struct Instance {
    config: ServerConfig,
    clock: SimClock,
    /// Its process, while it runs.
    running: Option<Running>,
    /// Its process's tasks.
    tasks: Tasks,
}

/// An instance's running process.
struct Running {
    service: Service,
    /// When it started.
    started: tokio::time::Instant,
}

/// The cluster.
pub struct World {
    instances: Vec<Instance>,
    /// The Redis the instances share, on the Redis engine.
    redis: Option<Primary>,
    store_clock: SimClock,
    /// Each instance's network to Redis and the store.
    links: Links,
    gateway: Gateway,
}

/// Why the world could not be built or an instance not started.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The settings were refused.
    #[error("the simulated instance's settings: {0}")]
    Config(String),
    /// The service did not start.
    #[error("instance {0} did not start: {1}")]
    Start(usize, String),
}

impl World {
    /// Instances on the embedded default (memory engine, SQLite store) in
    /// `dir`, one per clock; none started yet.
    pub fn new(
        dir: &std::path::Path,
        engine: Engine,
        clocks: Vec<SimClock>,
        store_clock: SimClock,
        knobs: Option<Knobs>,
    ) -> Result<Self, WorldError> {
        let redis = (engine == Engine::Redis)
            .then(|| Primary::new(SimRedis::new("redis-0", Arc::new(store_clock.clone()))));
        let store = store_url(dir);
        let instances = clocks
            .into_iter()
            .enumerate()
            .map(|(i, clock)| {
                Ok(Instance {
                    config: config(&dir.join(format!("instance-{i}")), engine, &store, knobs)?,
                    clock,
                    running: None,
                    tasks: Tasks::default(),
                })
            })
            .collect::<Result<Vec<_>, WorldError>>()?;
        Ok(Self {
            links: Links::new(
                instances.len(),
                redis.as_ref(),
                knobs.map_or(Down::Hangs, |k| k.store_down),
            ),
            instances,
            redis,
            store_clock,
            gateway: Gateway::default(),
        })
    }

    /// The same instances with the fallback on: while Redis is
    /// unavailable, sales move to the shared store's own engine, and back
    /// once Redis is healthy. Only on the Redis engine.
    pub fn with_fallback(mut self) -> Result<Self, WorldError> {
        for instance in &mut self.instances {
            instance.config = instance
                .config
                .clone()
                .with_fallback_on_a_shared_store()
                .ok_or_else(|| WorldError::Config("a fallback needs the Redis engine".into()))?;
        }
        Ok(self)
    }

    /// What the crowd calls.
    pub fn gateway(&self) -> Gateway {
        self.gateway.clone()
    }

    /// Instance `i`'s clock.
    pub fn clock(&self, i: usize) -> &SimClock {
        &self.instances[i].clock
    }

    /// Starts instance `i` (recovery included) and opens it to the crowd.
    pub async fn start(&mut self, i: usize) -> Result<(), WorldError> {
        let instance = &mut self.instances[i];
        if instance.running.is_some() {
            return Ok(());
        }
        let parts = Parts {
            clock: Arc::new(instance.clock.clone()),
            store_clock: Some(Arc::new(self.store_clock.clone())),
            calls: Calls::Inline,
            store_outage: Some(self.links.store(i)),
            redis: self
                .links
                .redis(i)
                .map(|link| Arc::new(link) as Arc<dyn stockade_engine::redis::Connector>),
        };
        instance.tasks = Tasks::default();
        let service = instance
            .tasks
            .scope(Service::start_with(&instance.config, parts))
            .await
            .map_err(|e| WorldError::Start(i, e.to_string()))?;
        self.gateway.set(i, Some(service.router()));
        instance.running = Some(Running {
            service,
            started: tokio::time::Instant::now(),
        });
        Ok(())
    }

    /// Takes instance `i` out of the gateway and stops it as a deploy
    /// does: the requests in flight are answered, the writer drains.
    pub async fn stop(&mut self, i: usize) {
        self.gateway.set(i, None);
        if let Some(running) = self.instances[i].running.take() {
            running.service.stop().await;
        }
    }

    /// Kills instance `i`: its tasks end where they are, requests in flight
    /// get no answer, nothing is drained; what it wrote to disk (the store,
    /// its intake journal) stays.
    pub fn crash(&mut self, i: usize) {
        self.gateway.set(i, None);
        self.gateway.crashed(i);
        self.instances[i].tasks.abort_all();
        drop(self.instances[i].running.take());
    }

    /// The switches on each instance's network to Redis and the store.
    pub fn links(&self) -> Links {
        self.links.clone()
    }

    /// The Redis the instances share, if they sell through Redis.
    pub fn redis(&self) -> Option<&Primary> {
        self.redis.as_ref()
    }

    /// Whether instance `i` is running.
    pub fn is_running(&self, i: usize) -> bool {
        self.instances[i].running.is_some()
    }

    /// How long the longest-running of the running instances has run.
    pub fn longest_running(&self) -> Option<std::time::Duration> {
        self.instances
            .iter()
            .filter_map(|i| i.running.as_ref())
            .map(|running| running.started.elapsed())
            .max()
    }

    /// The instances' `--batch-max`.
    pub fn batch_max(&self) -> usize {
        self.instances
            .first()
            .map_or(WriterConfig::default().max_batch, |i| {
                i.config.writer().max_batch
            })
    }

    /// The store, through the first running instance.
    pub fn store(&self) -> Option<OrderStore> {
        self.instances
            .iter()
            .find_map(|i| i.running.as_ref())
            .map(|r| r.service.state().store().clone())
    }

    /// Stops every instance.
    pub async fn stop_all(&mut self) {
        for i in 0..self.instances.len() {
            self.stop(i).await;
        }
    }
}

/// The URL of the store the instances share on the Redis engine, for a
/// world in `dir`.
pub fn store_url(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("store.db").display())
}

/// The deployment's admission secret (at least 32 characters).
const ADMISSION_SECRET: &str = "the-simulated-deployment-admission-secret";

/// The deployment's draw key (at least 32 characters).
const DRAW_KEY: &str = "the-simulated-deployment-draw-key-0001";

/// The settings of an instance with its data in `data_dir`: the embedded
/// default, or the Redis engine (the simulator's Redis, whatever the URL)
/// with the SQLite store `store` every instance shares.
fn config(
    data_dir: &std::path::Path,
    engine: Engine,
    store: &str,
    knobs: Option<Knobs>,
) -> Result<ServerConfig, WorldError> {
    let mut raw = RawConfig::default();
    raw.http.listen = Some("127.0.0.1:0".into());
    raw.storage.data_dir = Some(data_dir.to_path_buf());
    match engine {
        Engine::Memory => raw.storage.engine = Some("memory".into()),
        Engine::Redis => {
            raw.storage.engine = Some("redis".into());
            raw.redis.redis_url = Some("redis://simulated:6379".into());
            raw.storage.database_url = Some(store.to_owned());
        }
    }
    raw.access.admin_token = Some(ADMIN_TOKEN.into());
    // One key for every instance: any of them may make the draw.
    raw.access.draw_key = Some(DRAW_KEY.into());
    // One secret for every instance: a ticket or an admission made by one
    // is good at the others.
    raw.access.admission_secret = Some(ADMISSION_SECRET.into());
    if let Some(knobs) = knobs {
        knobs.apply(&mut raw);
    }
    let env = RawConfig::from_env(|_| None).map_err(|e| WorldError::Config(e.to_string()))?;
    ServerConfig::resolve(raw, env, None).map_err(|e| WorldError::Config(e.to_string()))
}
