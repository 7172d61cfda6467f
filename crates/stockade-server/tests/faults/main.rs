//! The service under the faults of DESIGN.md: Redis restarted with its data
//! lost mid-sale, PostgreSQL (the store) stopped mid-sale.

#[path = "../common/mod.rs"]
mod common;

mod acknowledged;
mod engine_vs_store;
mod fallback;
mod helpers;
mod redis_failures;
