//! `stockade serve`: the HTTP service.
//!
//! A purchase goes through one path (see `docs/consistency.md`): the engine
//! decides it in one atomic step under the sale's epoch and records it in
//! its outbox; the group-commit writer commits it to the order store with
//! many others in one transaction, where the store checks it again; only
//! then does the buyer hear 201. The store is the source of truth and the arbiter: every
//! change of who decides a sale (a rebuild after Redis lost data, a move to
//! the PostgreSQL fallback and back) is a fenced step that advances the
//! sale's epoch, so any number of instances can run on one Redis and one
//! PostgreSQL. See `docs/consistency.md`.
//!
//! ```no_run
//! use stockade_server::config::{RawConfig, ServerConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ServerConfig::resolve(RawConfig::default(), RawConfig::from_env(|k| std::env::var(k).ok())?, None)?;
//! let listener = tokio::net::TcpListener::bind(config.listen()).await?;
//! stockade_server::run(listener, config, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! The data flows one way: request ([`api`]) → purchase pipeline
//! ([`purchase`]) → engine gate → outbox → writer ([`writer`]) → store
//! (`stockade_store`) → answer. The request and answer bodies and the error
//! codes are the `stockade_api` crate's; the purchase rule is
//! `stockade_core::rule`.
//!
//! - [`api`]: the router and handlers: they parse, call the domain, and
//!   render (messages live here); the OpenAPI document.
//! - [`purchase`]: the purchase pipeline, `Purchases::decide`, with its
//!   typed result and refusals.
//! - `service`: how `stockade serve` assembles its parts, recovers, serves
//!   and stops ([`Service`], [`run`]).
//! - [`config`]: the settings of `stockade serve`, each declared once as a
//!   field of a group struct (flag, variable, file key, default, help: the
//!   `--help` text and the README's table come from it), layered flags over
//!   variables over the file over defaults and checked into a
//!   [`config::ServerConfig`].
//! - [`state`]: the running service's parts, each state machine a field.
//! - [`listener`]: the HTTP server: connection cap, header-read and idle
//!   timeouts, bounded shutdown; [`client_cap`]: connections per client.
//! - [`startup`]: reaching the database and Redis at start.
//! - [`sale_book`]: what this instance knows of each sale, one entry per
//!   sale: its route (epoch and authority), its rebuild, the rejections
//!   answered without asking the engine or the store (window, sold out,
//!   unknown sale), its waiting room.
//! - [`shedding`]: the bound on purchases in flight (503 `overloaded`).
//! - [`rate_limit`]: per-buyer and per-client GCRA limits (429), in
//!   process or shared through Redis.
//! - [`writer`]: the group-commit writer; [`in_flight`]: the orders it is
//!   committing, which lookups answer `pending` and long polls wait on.
//! - [`breaker`]: the circuit breaker in front of the engine.
//! - [`holds`]: the sweeper that expires unpaid holds.
//! - [`draws`]: the draw of draw sales, made by one instance under a
//!   lease, and the roll-down of its lapsed holds.
//! - [`recovery`]: fenced rebuilds, the move to the fallback (decided from
//!   every instance's view of the engine) and back, the reconciler.
//! - [`releases`]: the background applier of the releases the engine owes.
//! - [`journal`]: the embedded default's intake journal, where orders named
//!   before their commit survive the process.
//! - [`retirement`]: ended sales' engine state and waiting rooms let go
//!   after `--ended-sale-retention-s`.
//! - [`snapshot`]: what a sale looks like now (engine or store numbers).
//! - [`waiting_room`]: queues, admission tokens and their ticker.
//! - [`identity`]: the verifier of buyers' JWTs; [`secrets`]: bearer
//!   tokens and their constant-time comparison.
//! - [`metrics`]: the Prometheus series; [`telemetry`]: OpenTelemetry
//!   traces (`--otlp-endpoint`).
//! - [`activity`]: each sale's recent traffic, for the live dashboard.
//! - [`sessions`], [`login_attempts`]: the dashboard's logins.

pub mod activity;
pub mod api;
pub mod breaker;
pub mod client_cap;
pub mod config;
pub mod draw_key;
pub mod draws;
pub mod holds;
pub mod identity;
pub mod in_flight;
pub mod journal;
pub mod listener;
pub mod login_attempts;
pub mod metrics;
pub mod purchase;
pub mod rate_limit;
pub mod recovery;
pub mod releases;
pub mod retirement;
pub mod sale_book;
pub mod secrets;
mod service;
pub mod sessions;
pub mod shedding;
pub mod snapshot;
pub mod startup;
pub mod state;
pub mod telemetry;
pub mod waiting_room;
pub mod writer;

pub use api::app;
pub use service::{Parts, ServeError, Service, run};
