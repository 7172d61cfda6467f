//! Stockade's stock engines: three implementations of
//! [`stockade_core::Engine`], the step that decides atomically whether a
//! buyer gets an item.
//!
//! | engine | state lives in | atomic step | use it for |
//! | --- | --- | --- | --- |
//! | [`MemoryEngine`] | this process | per-sale atomics and sharded maps | the embedded default, tests |
//! | [`RedisEngine`] | Redis (standalone or Cluster) | one Lua script per operation; purchases micro-batched per sale | many service instances, the fast path |
//! | [`PostgresEngine`] | PostgreSQL | one transaction holding the sale row lock, per batch of purchases | deployments without Redis, the baseline |
//!
//! ```
//! use std::sync::Arc;
//! use stockade_core::{Engine, Purchase, PurchaseOutcome, SaleSpec, SystemClock};
//! use stockade_engine::MemoryEngine;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let engine = MemoryEngine::new(Arc::new(SystemClock));
//! engine.create_sale(&SaleSpec::builder("drop-1", 2)?.build()?).await?;
//! let outcome = engine.purchase(&Purchase::new("drop-1", "alice", 1)?).await?;
//! assert!(matches!(outcome, PurchaseOutcome::Purchased { remaining: 1, .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! # Layout
//! - `batching`: the micro-batcher the Redis and PostgreSQL engines share,
//!   and the span of each batch call, which follows from the span of every
//!   purchase it carried ([`link_batches_to`] names that span).
//! - [`memory`]: the in-memory engine.
//! - [`redis`]: the Redis engine, its key layout and its scripts (`lua/*.lua`).
//! - [`postgres`]: the PostgreSQL engine and its migrations
//!   (`migrations/postgres/`).

mod batching;
mod codes;
pub mod memory;
pub mod postgres;
pub mod redis;

pub use batching::link_batches_to;
pub use memory::MemoryEngine;
pub use postgres::PostgresEngine;
pub use redis::{RedisEngine, RedisEngineConfig, RedisTopology, RedisUrlError};
