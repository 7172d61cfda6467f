//! Stockade's stock engines apart from the order store: two
//! implementations of [`stockade_core::Engine`], the step that decides
//! atomically whether a buyer gets an item. Both keep their own stock
//! ([`Durability::Outbox`]): an accepted order waits in the engine's outbox
//! until the store commits it, and a lost engine is rebuilt from the store.
//!
//! | engine | state lives in | atomic step | use it for |
//! | --- | --- | --- | --- |
//! | [`MemoryEngine`] | this process | per-sale atomics and sharded maps | the embedded default, tests |
//! | [`RedisEngine`] | Redis (standalone, Sentinel or Cluster) | one Lua script per operation (a Functions library on Redis 7+, EVALSHA on Redis 6); purchases micro-batched per sale | many service instances, the fast path |
//!
//! The PostgreSQL engine is the order store deciding purchases itself:
//! `stockade_store::StoreEngine` ([`Durability::Committed`]: one
//! transaction holding the sale row lock per purchase, committed before it
//! answers), used by `--engine postgres` and for sales moved to the
//! fallback. It lives with the store, whose tables are its state; the
//! conformance suite (`tests/conformance/`) runs it, on PostgreSQL and on
//! SQLite, beside these two.
//!
//! [`Durability::Outbox`]: stockade_core::Durability::Outbox
//! [`Durability::Committed`]: stockade_core::Durability::Committed
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
//! - `batching`: the micro-batcher ([`Batcher`]) of the Redis engine's
//!   purchases (and of the service's waiting-room joins and polls), and
//!   the span of each batch call, which follows from the span of every
//!   purchase it carried ([`link_batches_to`] names that span).
//! - `codes`: the numeric answers of the Redis scripts.
//! - [`memory`]: the in-memory engine.
//! - [`redis`]: the Redis engine, its key layout and its scripts (`lua/*.lua`),
//!   and [`redis::library`], how every Stockade script runs on Redis.

mod batching;
mod codes;
pub mod memory;
pub mod redis;

pub use batching::{BatchError, BatchRunner, Batcher, link_batches_to};
pub use memory::MemoryEngine;
pub use redis::{
    Connector, RedisEngine, RedisEngineConfig, RedisTopology, RedisUrlError, ScriptsMode,
};
