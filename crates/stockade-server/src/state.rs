//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
pub use pending::PendingReleases;
use stockade_core::{Clock, Engine};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::breaker::CircuitBreaker;
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
    /// Purchases hold it shared from the engine call until their commit
    /// answer; recovery holds it exclusively, so a rebuild never races a
    /// purchase.
    selling: RwLock<()>,
    needs_recovery: AtomicBool,
    releases: PendingReleases,
    breaker: CircuitBreaker,
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
    /// Assembles the state. It starts needing recovery.
    pub fn new(parts: StateParts) -> Self {
        Self {
            inner: Arc::new(Inner {
                engine: parts.engine,
                store: parts.store,
                queue: parts.queue,
                clock: parts.clock,
                admin_token: parts.admin_token,
                commit_deadline: parts.commit_deadline,
                selling: RwLock::new(()),
                needs_recovery: AtomicBool::new(true),
                releases: PendingReleases::default(),
                breaker: CircuitBreaker::default(),
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
    /// The circuit breaker in front of the engine's purchases.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.inner.breaker
    }
    /// The metrics registry.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.inner.metrics
    }
    /// Permission to sell, held by a purchase until it has answered; None
    /// while the engine is being (or must be) rebuilt.
    pub fn selling(&self) -> Option<RwLockReadGuard<'_, ()>> {
        if self.inner.needs_recovery.load(Ordering::Acquire) {
            return None;
        }
        self.inner.selling.try_read().ok()
    }
    /// Stops selling and waits for purchases in progress to answer.
    pub async fn pause_selling(&self) -> RwLockWriteGuard<'_, ()> {
        self.inner.selling.write().await
    }
    /// Whether the engine agrees with the store and may sell.
    pub fn is_ready(&self) -> bool {
        !self.needs_recovery() && self.inner.selling.try_read().is_ok()
    }
    /// Whether the engine must be rebuilt before it sells again.
    pub fn needs_recovery(&self) -> bool {
        self.inner.needs_recovery.load(Ordering::Acquire)
    }
    /// Marks the engine as possibly out of line with the store (Redis
    /// restarted, or a sale the store knows is missing): selling stops until
    /// the reconciler has recovered it.
    pub fn request_recovery(&self) {
        self.inner.needs_recovery.store(true, Ordering::Release);
    }
    /// Marks recovery as done.
    pub fn recovered(&self) {
        self.inner.needs_recovery.store(false, Ordering::Release);
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
