//! The running service: how `stockade serve` assembles its parts (store,
//! engine, writer, waiting rooms, limits), recovers, serves and stops.

use backon::{ConstantBuilder, Retryable};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use stockade_core::redact;

use stockade_core::{Clock, Engine, EngineError, SystemClock};
use stockade_engine::{MemoryEngine, RedisEngine, RedisEngineConfig, RedisTopology};
use stockade_lock::{LockError, Locks};
use tokio::net::TcpListener;

use crate::config::{ServerConfig, StoreLocation};
use crate::listener::HttpLimits;
use crate::rate_limit::RateLimiter;
use crate::recovery::RecoveryError;
use crate::startup::{Backend, Unreachable};
use crate::state::{AppState, StateParts};
use crate::writer::CommitQueue;
use stockade_store::{Calls, OrderStore, Outage, StoreEngine, StoreError, StoreOptions};

use crate::api::app;
use crate::{activity, client_cap, journal, listener, recovery, retirement, startup, waiting_room};

/// Why the service could not start or stopped with an error. Messages name
/// what failed, where (host and port, never a password) and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The data directory could not be created.
    #[error(
        "cannot create the data directory {path} ({reason}); choose a writable directory with {setting}"
    )]
    DataDir {
        /// The directory.
        path: String,
        /// The setting it came from, as it was given.
        setting: String,
        /// Why.
        reason: std::io::Error,
    },
    /// The database or Redis does not answer at its host and port.
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    /// The order store could not be opened.
    #[error("cannot open the order store ({location}): {reason}")]
    Store {
        /// `sqlite FILE` or PostgreSQL's `host:port`.
        location: String,
        /// Why, with any password removed.
        reason: String,
    },
    /// The engine could not connect.
    #[error("cannot connect the stock engine: {0}")]
    Engine(String),
    /// The rebuild lock's Redis connection could not be made.
    #[error("cannot connect the rebuild lock to Redis: {0}")]
    Lock(String),
    /// Recovery at start failed.
    #[error("cannot recover the engine from the store: {0}")]
    Recovery(#[from] RecoveryError),
    /// The waiting rooms' Redis connection could not be made.
    #[error("cannot connect the waiting rooms to Redis: {0}")]
    Queue(#[from] waiting_room::QueueError),
    /// The draw key of the data directory could not be read or made.
    #[error("the draw key: {0}")]
    DrawKey(String),
    /// Serving failed.
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
    /// The intake journal of the embedded default could not be opened or
    /// the orders it holds could not be committed.
    #[error(
        "the intake journal {path}: {reason}; it holds orders named to clients, so the service does not start without them (fix the file's directory or the store, then start again)"
    )]
    Journal {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// What a service is assembled from beyond its settings: the parts the
/// simulator gives its own.
#[derive(Debug, Clone)]
pub struct Parts {
    /// The instance's clock: sale windows, holds, the engine.
    pub clock: Arc<dyn Clock>,
    /// The store's clock, when not the database server's (the simulated
    /// database's).
    pub store_clock: Option<Arc<dyn Clock>>,
    /// How calls to the store and to the intake journal meet the runtime.
    pub calls: Calls,
    /// The simulated database's outages.
    pub store_outage: Option<Outage>,
    /// The Redis of `--engine redis`, reached through this instead of its
    /// URL (the simulator's Redis). No rebuild lock then: rebuilds rely on
    /// their epoch fencing, as under Sentinel.
    pub redis: Option<Arc<dyn stockade_engine::redis::Connector>>,
}

/// A started service: store open, engine connected and recovered, writer
/// and reconciler running. Serve it with [`Service::serve`], or drive
/// [`Service::router`] directly in tests.
pub struct Service {
    state: AppState,
    http: HttpLimits,
    writer_task: tokio::task::JoinHandle<()>,
    reconciler: tokio::task::JoinHandle<()>,
    ticker: tokio::task::JoinHandle<()>,
    /// Lets ended sales go (see `retirement`).
    retirer: tokio::task::JoinHandle<()>,
    /// Drops decided orders from the intake journal (memory engine only).
    compactor: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("state", &self.state)
            .finish()
    }
}

impl Service {
    /// Opens the store and the engine and recovers the engine from the store.
    pub async fn start(config: &ServerConfig) -> Result<Self, ServeError> {
        Self::start_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`Service::start`] on another clock (a test's manual clock): the
    /// engine, the store and the sale windows all read this one.
    pub async fn start_with_clock(
        config: &ServerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ServeError> {
        Self::start_with(
            config,
            Parts {
                clock,
                store_clock: None,
                calls: Calls::Async,
                store_outage: None,
                redis: None,
            },
        )
        .await
    }

    /// [`Service::start`] assembled from other [`Parts`] (the simulator's).
    pub async fn start_with(config: &ServerConfig, parts: Parts) -> Result<Self, ServeError> {
        let Parts {
            clock,
            store_clock,
            calls,
            store_outage,
            redis: connector,
        } = parts;
        let store_options = StoreOptions {
            clock: store_clock,
            calls,
            outage: store_outage,
        };
        if let StoreLocation::Sqlite(path) = config.store()
            && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|reason| ServeError::DataDir {
                path: dir.display().to_string(),
                setting: config
                    .sources()
                    .name(if config.sources().is_set("database_url") {
                        "database_url"
                    } else {
                        "data_dir"
                    }),
                reason,
            })?;
        }
        crate::metrics::install(config.metrics_retention());
        let store = open_store(
            config.store(),
            &config.sources().name("database_url"),
            config.startup_wait(),
            store_options,
        )
        .await?;
        let (engine, redis, locks): (Arc<dyn Engine>, _, _) = match config.engine() {
            crate::config::Engine::Redis {
                url,
                prefix,
                scripts,
                ..
            } => {
                let setting = config.sources().name("redis_url");
                let shown = |error: &dyn std::error::Error| {
                    format!(
                        "Redis at {}: {}",
                        redact::endpoint(url),
                        redact::scrub(&error.to_string(), url)
                    )
                };
                let redis_config = match &connector {
                    Some(connector) => RedisEngineConfig::connected(Arc::clone(connector)),
                    None => RedisEngineConfig::from_url(url)
                        .map_err(|e| ServeError::Engine(format!("{setting}: {e}")))?,
                }
                .key_prefix(prefix.engine())
                .scripts(*scripts);
                // A single server is waited for at start; Sentinel and
                // Cluster URLs name several nodes, left to the driver.
                if connector.is_none()
                    && let RedisTopology::Standalone { url } = &redis_config.topology
                {
                    startup::reach(Backend::Redis, url, &setting, config.startup_wait()).await?;
                }
                let redis = Arc::new(
                    RedisEngine::connect(&redis_config, Arc::clone(&clock))
                        .await
                        .map_err(|e: EngineError| ServeError::Engine(shown(&e)))?,
                );
                // The rebuild lock lives on a single Redis server. Under
                // Sentinel or Cluster there is none to pin it to, and
                // rebuilds rely on their epoch fencing alone, which keeps
                // them safe when two instances rebuild one sale at once
                // (docs/consistency.md); the lock only saves duplicate work.
                let locks = match &redis_config.topology {
                    _ if connector.is_some() => None,
                    RedisTopology::Standalone { url } => Some(
                        Locks::builder()
                            .node(url)
                            .key_prefix(prefix.locks())
                            .connect()
                            .await
                            .map_err(|e: LockError| ServeError::Lock(shown(&e)))?,
                    ),
                    RedisTopology::Sentinel { .. } | RedisTopology::Cluster { .. } => None,
                };
                (redis.clone(), Some((redis, prefix)), locks)
            }
            crate::config::Engine::Memory => {
                (Arc::new(MemoryEngine::new(Arc::clone(&clock))), None, None)
            }
            // The store decides every purchase itself.
            crate::config::Engine::Postgres => (
                Arc::new(StoreEngine::new(store.clone(), Arc::clone(&clock))),
                None,
                None,
            ),
        };
        // Read before recovery, so a restart during it is noticed.
        let run_id = match &redis {
            Some((redis, _)) => redis.server_run_id().await.ok(),
            None => None,
        };
        // Queues live where the stock does: in Redis when several instances
        // share it, in this process otherwise (including --engine postgres,
        // whose waiting rooms are therefore per instance).
        let queues: Arc<dyn waiting_room::QueueBackend> = match &redis {
            Some((redis, prefix)) => Arc::new(waiting_room::redis::RedisQueues::new(
                redis.connection(),
                &prefix.waiting_rooms(),
            )),
            None => Arc::new(waiting_room::memory::MemoryQueues::new()),
        };
        if config.admission_secret().generated
            && matches!(config.engine(), crate::config::Engine::Redis { .. })
        {
            tracing::warn!(
                "STOCKADE_ADMISSION_SECRET is not set: admission tokens from this instance will be refused by the others; set the same secret on every instance"
            );
        }
        let draw_key = crate::draw_key::for_store(config).map_err(ServeError::DrawKey)?;
        if draw_key.is_none() {
            tracing::warn!(
                "STOCKADE_DRAW_KEY is not set: draw sales are refused on this PostgreSQL store; set the same key on every instance to create them"
            );
        }
        let activity = Arc::new(activity::Board::default());
        let (queue, writer_task) = CommitQueue::start(
            store.clone(),
            engine.clone(),
            config.writer(),
            Arc::clone(&activity),
        );
        // Limits are shared through the engine's Redis when there is one.
        let limits = config.rate_limits().clone();
        let rate_limiter = match &redis {
            Some((redis, prefix)) => RateLimiter::shared(
                limits,
                redis.connection(),
                prefix.rate_limits(),
                Arc::clone(&clock),
            ),
            None => RateLimiter::local(limits, Arc::clone(&clock)),
        };
        // The memory engine's outbox dies with the process: orders named
        // before their commit are journalled to disk (see `journal`).
        let journal = match config.engine() {
            crate::config::Engine::Memory => {
                Some(open_journal(config.data_dir(), &store, calls).await?)
            }
            _ => None,
        };
        let state = AppState::new(StateParts {
            journal: journal.clone(),
            engine,
            fallback: config.engine().fallback().is_some(),
            locks,
            store,
            queue,
            clock,
            admin_token: config.admin().token.expose().clone(),
            payments_token: config.payments_token().map(|t| t.as_str().to_owned()),
            draw_key,
            secure_cookies: config.public_url().is_some_and(|u| u.is_https()),
            commit_deadline: config.commit_deadline(),
            rejection_ttl: config.rejection_ttl(),
            max_purchases_in_flight: config.max_purchases_in_flight(),
            identity: config.identity().cloned(),
            rate_limiter,
            dashboard_session_ttl: config.dashboard_session_ttl(),
            waiting_rooms: waiting_room::WaitingRooms::new(
                queues,
                config.admission_secret().key.expose(),
            ),
            activity,
        });
        recover_at_start(&state).await?;
        state.mark_started();
        let reconciler = crate::tasks::spawn(recovery::reconcile_forever(
            state.clone(),
            redis.map(|(redis, _)| redis),
            run_id,
            config.outbox_grace(),
        ));
        let ticker = crate::tasks::spawn(waiting_room::ticker::run_forever(state.clone()));
        let retirer = crate::tasks::spawn(retirement::retire_forever(
            state.clone(),
            config.ended_sale_retention(),
        ));
        let compactor = journal.map(|journal| {
            crate::tasks::spawn(journal::compact_forever(journal, state.store().clone()))
        });
        Ok(Self {
            retirer,
            compactor,
            state,
            http: config.http(),
            writer_task,
            reconciler,
            ticker,
        })
    }

    /// The shared state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The router over this service's state.
    pub fn router(&self) -> axum::Router {
        app(self.state.clone())
    }

    /// Serves on `listener` until `shutdown` completes, then answers the
    /// requests in flight (closing every connection after the shutdown
    /// timeout, whatever its client does) and flushes the writer.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let clients = client_cap::ClientCap::new(
            self.http.max_connections_per_client,
            self.state.rate_limiter().limits().trusted_proxies.clone(),
            self.state.admin_token().to_owned(),
        );
        let served = listener::serve(listener, self.router(), self.http, clients, shutdown).await;
        self.stop().await;
        Ok(served?)
    }

    /// Stops the reconciler and lets the writer commit what is queued.
    /// Returns once every order is committed, so drop every router from
    /// [`Service::router`] first: each keeps the commit queue open.
    pub async fn stop(self) {
        let Self {
            state,
            writer_task,
            reconciler,
            ticker,
            compactor,
            retirer,
            ..
        } = self;
        state.mark_stopping();
        retirer.abort();
        let _ = retirer.await;
        if let Some(compactor) = compactor {
            compactor.abort();
        }
        let journal = state.journal().cloned();
        let store = state.store().clone();
        reconciler.abort();
        ticker.abort();
        let _ = ticker.await;
        // Wait until the aborted task has dropped its copy of the state.
        let _ = reconciler.await;
        // The last handle on the queue goes with the state: the writer then
        // drains and ends.
        drop(state);
        let _ = writer_task.await;
        let left = match &journal {
            Some(journal) => journal.compact(&store).await.unwrap_or(journal.len()),
            None => 0,
        };
        if left == 0 {
            tracing::info!("stopped: every acknowledged order is committed");
        } else if let Some(journal) = journal {
            tracing::warn!(orders = left, journal = %journal.path().display(),
                "stopped with orders named to clients that the store has not taken yet: they are kept in the intake journal and committed at the next start");
        }
    }
}

/// Starts the service and serves on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    Service::start(&config)
        .await?
        .serve(listener, shutdown)
        .await
}

/// Opens the intake journal in `data_dir` and commits what a previous run
/// left in it.
async fn open_journal(
    data_dir: &std::path::Path,
    store: &OrderStore,
    calls: Calls,
) -> Result<journal::IntakeJournal, ServeError> {
    let path = data_dir.join("intake-journal.jsonl");
    let failed = |reason: String| ServeError::Journal {
        path: path.display().to_string(),
        reason,
    };
    std::fs::create_dir_all(data_dir).map_err(|e| failed(e.to_string()))?;
    let (journal, left) =
        journal::IntakeJournal::open(&path, calls).map_err(|e| failed(e.to_string()))?;
    journal::commit_left(&journal, &left, store)
        .await
        .map_err(|e| {
            failed(format!(
                "committing the {} orders it holds: {e}",
                left.len()
            ))
        })?;
    Ok(journal)
}

/// Opens the store. A PostgreSQL server that does not accept connections
/// yet is waited for up to `wait` (an instance restarted while the database
/// is briefly down); any other failure ends the start at once.
async fn open_store(
    location: &StoreLocation,
    setting: &str,
    wait: Duration,
    options: StoreOptions,
) -> Result<OrderStore, ServeError> {
    let url = location.url();
    let shown_location = match location {
        StoreLocation::Postgres(url) => format!("PostgreSQL at {}", redact::endpoint(url)),
        StoreLocation::Sqlite(path) => format!("SQLite at {}", path.display()),
    };
    if let StoreLocation::Postgres(url) = location {
        startup::reach(Backend::Postgres, url, setting, wait).await?;
    }
    let deadline = tokio::time::Instant::now() + wait;
    (|| OrderStore::open_with(&url, options.clone()))
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(500))
                .without_max_times(),
        )
        // Listening but not accepting yet (starting up, shutting down).
        .when(|error| {
            matches!(error, StoreError::Unavailable(_)) && tokio::time::Instant::now() < deadline
        })
        .await
        .map_err(|error| ServeError::Store {
            location: shown_location,
            reason: redact::scrub(&redact::one_line(&error), &url),
        })
}

/// Recovery at start, retried for a while if the store or engine is still
/// coming up.
async fn recover_at_start(state: &AppState) -> Result<(), ServeError> {
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let rebuilt = (|| recovery::recover_at_start(state))
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(500))
                .with_max_times(10),
        )
        .notify(|error, _| {
            let attempts = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            tracing::warn!(%error, attempts, "recovery at start failed; retrying");
        })
        .await?;
    tracing::info!(rebuilt, "engine recovered from the store");
    Ok(())
}
