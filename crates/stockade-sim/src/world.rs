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
use stockade_server::{Parts, Service};
use stockade_store::{Calls, OrderStore};
use tower::ServiceExt;

use crate::clock::SimClock;

/// The admin token of every simulated instance.
pub const ADMIN_TOKEN: &str = "sim-admin-token-0123456789abcdef";

/// An answer: status and JSON body (`Null` when it is not JSON).
pub type Answer = (u16, Value);

/// What the crowd reaches the instances through: `None` for an instance
/// that is down (a refused connection).
#[derive(Clone, Default)]
pub struct Gateway {
    routers: Arc<Mutex<Vec<Option<Router>>>>,
}

impl Gateway {
    /// Sends `request` to instance `instance`; `None` if it is down.
    pub async fn call(&self, instance: usize, request: Request<Body>) -> Option<Answer> {
        let router = self.routers.lock().get(instance).cloned().flatten()?;
        let response = router.oneshot(request).await.ok()?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.ok()?.to_bytes();
        Some((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// How many instances there are (up or down).
    pub fn instances(&self) -> usize {
        self.routers.lock().len()
    }

    fn set(&self, instance: usize, router: Option<Router>) {
        let mut routers = self.routers.lock();
        if routers.len() <= instance {
            routers.resize(instance + 1, None);
        }
        routers[instance] = router;
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
    service: Option<Service>,
}

/// The cluster.
pub struct World {
    instances: Vec<Instance>,
    store_clock: SimClock,
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
        clocks: Vec<SimClock>,
        store_clock: SimClock,
    ) -> Result<Self, WorldError> {
        let instances = clocks
            .into_iter()
            .enumerate()
            .map(|(i, clock)| {
                Ok(Instance {
                    config: config(&dir.join(format!("instance-{i}")))?,
                    clock,
                    service: None,
                })
            })
            .collect::<Result<_, WorldError>>()?;
        Ok(Self {
            instances,
            store_clock,
            gateway: Gateway::default(),
        })
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
        let parts = Parts {
            clock: Arc::new(instance.clock.clone()),
            store_clock: Some(Arc::new(self.store_clock.clone())),
            calls: Calls::Inline,
        };
        let service = Service::start_with(&instance.config, parts)
            .await
            .map_err(|e| WorldError::Start(i, e.to_string()))?;
        self.gateway.set(i, Some(service.router()));
        instance.service = Some(service);
        Ok(())
    }

    /// Takes instance `i` out of the gateway and stops it as a deploy
    /// does: the requests in flight are answered, the writer drains.
    pub async fn stop(&mut self, i: usize) {
        self.gateway.set(i, None);
        if let Some(service) = self.instances[i].service.take() {
            service.stop().await;
        }
    }

    /// The store, through the first running instance.
    pub fn store(&self) -> Option<OrderStore> {
        self.instances
            .iter()
            .find_map(|i| i.service.as_ref())
            .map(|s| s.state().store().clone())
    }

    /// Stops every instance.
    pub async fn stop_all(&mut self) {
        for i in 0..self.instances.len() {
            self.stop(i).await;
        }
    }
}

/// The settings of an instance of the embedded default in `data_dir`.
fn config(data_dir: &std::path::Path) -> Result<ServerConfig, WorldError> {
    let mut raw = RawConfig::default();
    raw.http.listen = Some("127.0.0.1:0".into());
    raw.storage.data_dir = Some(data_dir.to_path_buf());
    raw.storage.engine = Some("memory".into());
    raw.access.admin_token = Some(ADMIN_TOKEN.into());
    let env = RawConfig::from_env(|_| None).map_err(|e| WorldError::Config(e.to_string()))?;
    ServerConfig::resolve(raw, env, None).map_err(|e| WorldError::Config(e.to_string()))
}
