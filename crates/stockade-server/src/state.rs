//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use stockade_core::draw::DrawKey;
use stockade_core::{Clock, Durability, Engine};
use stockade_lock::Locks;

use crate::activity::Board;
use crate::breaker::CircuitBreaker;
use crate::identity::Identity;
use crate::journal::IntakeJournal;
use crate::rate_limit::RateLimiter;
use crate::sale_book::SaleBook;
use crate::sessions::Sessions;
use crate::shedding::Shedder;
use crate::waiting_room::WaitingRooms;
use crate::writer::CommitQueue;
use stockade_store::{OrderStore, StoreEngine};

/// The service's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<dyn Engine>,
    store_engine: Arc<dyn Engine>,
    fallback: bool,
    store: OrderStore,
    queue: CommitQueue,
    clock: Arc<dyn Clock>,
    admin_token: String,
    payments_token: Option<String>,
    draw_key: Option<DrawKey>,
    secure_cookies: bool,
    commit_deadline: Duration,
    locks: Option<Locks>,
    book: SaleBook,
    shedder: Shedder,
    started: AtomicBool,
    stopping: AtomicBool,
    breaker: CircuitBreaker,
    metrics: PrometheusHandle,
    identity: Option<Identity>,
    rate_limiter: RateLimiter,
    sessions: Sessions,
    waiting_rooms: WaitingRooms,
    journal: Option<IntakeJournal>,
    activity: Arc<Board>,
    releases_owed: tokio::sync::Notify,
    releases_settled: tokio::sync::broadcast::Sender<stockade_core::SaleId>,
    draws_woken: crate::draws::Woken,
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
    /// The stock engine of the sales' primary authority: memory, Redis,
    /// or the store itself ([`StoreEngine`], `--engine postgres`).
    pub engine: Arc<dyn Engine>,
    /// Whether sales move to the store while the engine is unavailable.
    pub fallback: bool,
    /// The lock that lets one instance at a time rebuild a sale (None for
    /// the in-memory engine: one process only).
    pub locks: Option<Locks>,
    /// The order store.
    pub store: OrderStore,
    /// The group-commit queue in front of the store.
    pub queue: CommitQueue,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The admin bearer token.
    pub admin_token: String,
    /// The payment service's bearer token (None: only the admin confirms).
    pub payments_token: Option<String>,
    /// The key draw seeds follow from ([`crate::draw_key`]; None: draw
    /// sales are refused).
    pub draw_key: Option<DrawKey>,
    /// Whether browsers reach the service over https (`--public-url`):
    /// the session cookie is then `Secure`.
    pub secure_cookies: bool,
    /// How long a purchase waits for its commit.
    pub commit_deadline: Duration,
    /// How long sold-out and unknown-sale knowledge is used (zero: never).
    pub rejection_ttl: Duration,
    /// The most purchases in flight at once.
    pub max_purchases_in_flight: usize,
    /// How buyers prove who they are (None: the caller is trusted).
    pub identity: Option<Identity>,
    /// The per-buyer and per-client limits.
    pub rate_limiter: RateLimiter,
    /// How long a dashboard login lasts.
    pub dashboard_session_ttl: Duration,
    /// The waiting rooms (their queue backend and token signer).
    pub waiting_rooms: WaitingRooms,
    /// Where orders named before their commit are kept on disk, for an
    /// engine whose outbox dies with the process (memory); None otherwise.
    pub journal: Option<IntakeJournal>,
    /// Recent purchases by sale and recent commits (the dashboard's),
    /// shared with the writer.
    pub activity: Arc<Board>,
}

impl AppState {
    /// Assembles the state. It is not ready until start-up recovery is done.
    pub fn new(parts: StateParts) -> Self {
        let sessions = Sessions::new(&parts.admin_token, parts.dashboard_session_ttl);
        Self {
            inner: Arc::new(Inner {
                // One store engine (one queue in front of the pool) when
                // the store is the primary engine too.
                store_engine: match parts.engine.durability() {
                    Durability::Committed => Arc::clone(&parts.engine),
                    Durability::Outbox => Arc::new(StoreEngine::new(
                        parts.store.clone(),
                        Arc::clone(&parts.clock),
                    )),
                },
                engine: parts.engine,
                fallback: parts.fallback,
                store: parts.store,
                queue: parts.queue,
                clock: parts.clock,
                admin_token: parts.admin_token,
                payments_token: parts.payments_token,
                draw_key: parts.draw_key,
                secure_cookies: parts.secure_cookies,
                commit_deadline: parts.commit_deadline,
                locks: parts.locks,
                book: SaleBook::new(parts.rejection_ttl),
                shedder: Shedder::new(parts.max_purchases_in_flight),
                started: AtomicBool::new(false),
                stopping: AtomicBool::new(false),
                breaker: CircuitBreaker::default(),
                metrics: crate::metrics::prometheus(),
                identity: parts.identity,
                rate_limiter: parts.rate_limiter,
                sessions,
                waiting_rooms: parts.waiting_rooms,
                journal: parts.journal,
                activity: parts.activity,
                releases_owed: tokio::sync::Notify::new(),
                releases_settled: tokio::sync::broadcast::channel(1_024).0,
                draws_woken: crate::draws::Woken::default(),
            }),
        }
    }

    /// The stock engine of the sales' primary authority.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.inner.engine
    }
    /// The store deciding purchases itself: the engine of sales moved to
    /// the fallback (and, with `--engine postgres`, the primary's too).
    pub fn store_engine(&self) -> &Arc<dyn Engine> {
        &self.inner.store_engine
    }
    /// Whether the primary engine keeps its stock apart from the store
    /// ([`Durability::Outbox`]: memory, Redis): its accepted orders go
    /// through the writer and its outbox, cancels owe it releases, and it
    /// is rebuilt from the store when lost or out of line. False with
    /// `--engine postgres`, where the store decides and commits at once.
    pub fn engine_apart(&self) -> bool {
        self.inner.engine.durability() == Durability::Outbox
    }
    /// Whether sales move to the store while the engine is unavailable.
    pub fn has_fallback(&self) -> bool {
        self.inner.fallback
    }
    /// The rebuild lock client (Redis deployments).
    pub fn locks(&self) -> Option<&Locks> {
        self.inner.locks.as_ref()
    }
    /// What this instance knows of each sale: route, rebuilds, free
    /// rejections, waiting room.
    pub fn book(&self) -> &SaleBook {
        &self.inner.book
    }
    /// The bound on purchases in flight.
    pub fn shedder(&self) -> &Shedder {
        &self.inner.shedder
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
    /// The circuit breaker in front of the engine's purchases.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.inner.breaker
    }
    /// How buyers prove who they are; None while identity is off.
    pub fn identity(&self) -> Option<&Identity> {
        self.inner.identity.as_ref()
    }
    /// The per-buyer and per-client rate limits.
    pub fn rate_limiter(&self) -> &RateLimiter {
        &self.inner.rate_limiter
    }
    /// The metrics registry.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.inner.metrics
    }
    /// The key draw seeds follow from (None: draw sales are refused).
    pub fn draw_key(&self) -> Option<&DrawKey> {
        self.inner.draw_key.as_ref()
    }
    /// The payment service's bearer token, if one is configured.
    pub fn payments_token(&self) -> Option<&str> {
        self.inner.payments_token.as_deref()
    }
    /// Whether the session cookie is `Secure` (an https `--public-url`).
    pub fn secure_cookies(&self) -> bool {
        self.inner.secure_cookies
    }
    /// The dashboard's login sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// The waiting rooms.
    pub fn waiting_rooms(&self) -> &WaitingRooms {
        &self.inner.waiting_rooms
    }
    /// Recent purchases by sale and recent commits: what the dashboard
    /// draws.
    pub fn activity(&self) -> &Board {
        &self.inner.activity
    }
    /// The intake journal (memory engine only).
    pub fn journal(&self) -> Option<&IntakeJournal> {
        self.inner.journal.as_ref()
    }

    /// Signalled when the store records releases the engine owes: wakes
    /// the release applier ([`crate::releases`]).
    pub fn releases_owed(&self) -> &tokio::sync::Notify {
        &self.inner.releases_owed
    }

    /// Announces each sale whose owed releases the applier has just
    /// applied (a cancel waits for its own, briefly).
    pub fn releases_settled(&self) -> &tokio::sync::broadcast::Sender<stockade_core::SaleId> {
        &self.inner.releases_settled
    }
    /// Stock came back to `sale` (a cancel, a release, a rebuild): this
    /// instance stops answering sold_out at once, the sale's waiting room
    /// reopens and admits more, and a draw of the sale rolls down.
    pub fn stock_returned(&self, sale: &stockade_core::SaleId) {
        if self.inner.book.stock_returned(sale) {
            self.inner.waiting_rooms.wake();
        }
        self.inner.draws_woken.wake(sale);
    }
    /// The sales whose draws may roll down or settle now.
    pub fn draws_woken(&self) -> &crate::draws::Woken {
        &self.inner.draws_woken
    }
    /// Start-up recovery is done: the service may answer ready.
    pub fn mark_started(&self) {
        self.inner.started.store(true, Ordering::Release);
    }
    /// The service is stopping: background rebuilds give up, so that the
    /// state (and with it the commit queue) can be dropped.
    pub fn mark_stopping(&self) {
        self.inner.stopping.store(true, Ordering::Release);
    }
    /// Whether the service is stopping.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::Acquire)
    }
    /// Whether start-up recovery is done.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }
}
