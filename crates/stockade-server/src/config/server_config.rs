//! [`ServerConfig`]: the settings of `stockade serve`, checked. Only
//! [`ServerConfig::resolve`] makes one, so every value in it is valid and
//! every combination too (a fallback only with a Redis engine and a
//! PostgreSQL store, the PostgreSQL engine only with a PostgreSQL store).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stockade_core::draw::DrawKey;

use super::purchases::Purchases;
use super::{
    AdminToken, AdmissionSecret, Engine, LogFormat, PaymentsToken, PublicUrl, Sources,
    StoreLocation,
};
use crate::identity::Identity;
use crate::listener::HttpLimits;
use crate::rate_limit::RateLimits;
use crate::writer::WriterConfig;

/// Validated settings of `stockade serve`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub(super) listen: SocketAddr,
    pub(super) public_url: Option<PublicUrl>,
    pub(super) http: HttpLimits,
    pub(super) data_dir: PathBuf,
    pub(super) store: StoreLocation,
    pub(super) engine: Engine,
    pub(super) startup_wait: Duration,
    pub(super) purchases: Purchases,
    pub(super) admin: AdminToken,
    pub(super) payments_token: Option<PaymentsToken>,
    pub(super) admission_secret: AdmissionSecret,
    pub(super) draw_key: Option<DrawKey>,
    pub(super) identity: Option<Identity>,
    pub(super) rate_limits: RateLimits,
    pub(super) log_format: LogFormat,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) dashboard_session_ttl: Duration,
    pub(super) metrics_retention: Duration,
    pub(super) ended_sale_retention: Duration,
    pub(super) sources: Sources,
}

impl ServerConfig {
    /// Address to listen on.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// Where browsers reach the service, if configured.
    pub fn public_url(&self) -> Option<&PublicUrl> {
        self.public_url.as_ref()
    }

    /// Timeouts, the connection caps and the shutdown bound of the HTTP
    /// server.
    pub fn http(&self) -> HttpLimits {
        self.http
    }

    /// Directory of the embedded store and the intake journal.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The order store.
    pub fn store(&self) -> &StoreLocation {
        &self.store
    }

    /// The engine that decides purchases, with its fallback.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// This configuration with the fallback on (sales move to the store's
    /// own engine while Redis is unavailable) whatever the store is: None
    /// unless the engine is Redis.
    ///
    /// For an embedder that runs every instance in one process over one
    /// SQLite file: the simulator (`stockade-sim`). The store is one
    /// implementation over sqlx's Any driver, so its engine decides on
    /// SQLite as on PostgreSQL. `stockade serve` never calls this:
    /// [`ServerConfig::resolve`] still refuses `--fallback postgres`
    /// without a postgres:// store, because instances on several machines
    /// cannot share a SQLite file, and a fallback over a file of each
    /// would sell the stock once per instance.
    pub fn with_fallback_on_a_shared_store(mut self) -> Option<Self> {
        match &mut self.engine {
            Engine::Redis { fallback, .. } => *fallback = Some(super::Fallback::Postgres),
            Engine::Memory | Engine::Postgres => return None,
        }
        Some(self)
    }

    /// How long start waits for an unreachable database or Redis.
    pub fn startup_wait(&self) -> Duration {
        self.startup_wait
    }

    /// How long a purchase waits for its commit before answering 202.
    pub fn commit_deadline(&self) -> Duration {
        self.purchases.commit_deadline
    }

    /// Group-commit batching.
    pub fn writer(&self) -> WriterConfig {
        self.purchases.writer
    }

    /// How old an outbox entry must be before the reconciler commits it.
    pub fn outbox_grace(&self) -> Duration {
        self.purchases.outbox_grace
    }

    /// How long sold-out and unknown-sale knowledge is used without asking
    /// the engine or the store (zero: never); at most one second.
    pub fn rejection_ttl(&self) -> Duration {
        self.purchases.rejection_ttl
    }

    /// The most purchases in flight on this instance, at least one.
    pub fn max_purchases_in_flight(&self) -> usize {
        self.purchases.max_in_flight
    }

    /// The admin token.
    pub fn admin(&self) -> &AdminToken {
        &self.admin
    }

    /// The payment service's token (None: only the admin confirms).
    pub fn payments_token(&self) -> Option<&PaymentsToken> {
        self.payments_token.as_ref()
    }

    /// The key of waiting-room admission tokens.
    pub fn admission_secret(&self) -> &AdmissionSecret {
        &self.admission_secret
    }

    /// The draw key, if one is set (`draw_key`); see
    /// [`crate::draw_key::for_store`] for the default.
    pub fn draw_key(&self) -> Option<&DrawKey> {
        self.draw_key.as_ref()
    }

    /// How buyers prove who they are; None (the default): the service
    /// trusts its caller to name the buyer.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// Per-buyer and per-client rate limits (none by default).
    pub fn rate_limits(&self) -> &RateLimits {
        &self.rate_limits
    }

    /// How log lines are written.
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }

    /// Where `--otlp-endpoint` sends traces: the collector's OTLP/HTTP base
    /// URL, without a trailing slash. None: the setting is not given (the
    /// standard OTEL_* variables may still turn traces on; see
    /// [`crate::telemetry`]).
    pub fn otlp_endpoint(&self) -> Option<&str> {
        self.otlp_endpoint.as_deref()
    }

    /// How long a dashboard login lasts.
    pub fn dashboard_session_ttl(&self) -> Duration {
        self.dashboard_session_ttl
    }

    /// How long an idle series (an ended sale's) stays in `/metrics`.
    pub fn metrics_retention(&self) -> Duration {
        self.metrics_retention
    }

    /// How long after its end a sale's engine state and waiting room stay.
    pub fn ended_sale_retention(&self) -> Duration {
        self.ended_sale_retention
    }

    /// Where each setting came from, to name it in later errors.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }
}
