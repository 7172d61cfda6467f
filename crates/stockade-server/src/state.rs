//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use pending::PendingReleases;
use stockade_core::{Clock, Engine};

use crate::store::OrderStore;
use crate::writer::CommitQueue;

/// The service's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<dyn Engine>,
    store: OrderStore,
    queue: CommitQueue,
    clock: Arc<dyn Clock>,
    admin_token: String,
    commit_deadline: Duration,
    ready: AtomicBool,
    releases: PendingReleases,
    metrics: PrometheusHandle,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("engine", &self.inner.engine.name())
            .field("store", &self.inner.store.kind())
            .finish_non_exhaustive()
    }
}

/// The parts an [`AppState`] is made of.
pub struct StateParts {
    /// The stock engine.
    pub engine: Arc<dyn Engine>,
    /// The order store.
    pub store: OrderStore,
    /// The group-commit queue in front of the store.
    pub queue: CommitQueue,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The admin bearer token.
    pub admin_token: String,
    /// How long a purchase waits for its commit.
    pub commit_deadline: Duration,
}

impl AppState {
    /// Assembles the state. It starts not ready: recovery must run first.
    pub fn new(parts: StateParts) -> Self {
        Self {
            inner: Arc::new(Inner {
                engine: parts.engine,
                store: parts.store,
                queue: parts.queue,
                clock: parts.clock,
                admin_token: parts.admin_token,
                commit_deadline: parts.commit_deadline,
                ready: AtomicBool::new(false),
                releases: PendingReleases::default(),
                metrics: crate::metrics::prometheus(),
            }),
        }
    }

    /// The stock engine.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.inner.engine
    }
    /// The order store.
    pub fn store(&self) -> &OrderStore {
        &self.inner.store
    }
    /// The group-commit queue.
    pub fn queue(&self) -> &CommitQueue {
        &self.inner.queue
    }
    /// Time.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }
    /// The admin bearer token.
    pub fn admin_token(&self) -> &str {
        &self.inner.admin_token
    }
    /// How long a purchase waits for its commit.
    pub fn commit_deadline(&self) -> Duration {
        self.inner.commit_deadline
    }
    /// Cancelled orders whose items still have to go back to the engine.
    pub fn releases(&self) -> &PendingReleases {
        &self.inner.releases
    }
    /// The metrics registry.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.inner.metrics
    }
    /// Whether the engine agrees with the store and may sell.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }
    /// Opens or closes selling (closed while the engine is rebuilt).
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Release);
    }
}

mod pending {
    use std::sync::Mutex;

    use stockade_core::{OrderId, SaleId};

    /// Cancelled orders whose engine release failed (engine unreachable):
    /// retried by the reconciler until they succeed, so no stock stays held
    /// for an order the store has cancelled.
    #[derive(Debug, Default)]
    pub struct PendingReleases {
        orders: Mutex<Vec<(SaleId, OrderId)>>,
    }

    impl PendingReleases {
        /// Remembers a release to retry.
        pub fn push(&self, sale: SaleId, order: OrderId) {
            self.orders
                .lock()
                .expect("not poisoned")
                .push((sale, order));
        }

        /// Takes every release to retry.
        pub fn take(&self) -> Vec<(SaleId, OrderId)> {
            std::mem::take(&mut *self.orders.lock().expect("not poisoned"))
        }
    }
}

pub use pending::PendingReleases as Releases;
