//! The service under the faults of docs/design.md: Redis restarted with its data
//! lost mid-sale, PostgreSQL (the store) stopped mid-sale, a rebuild while
//! another instance still holds orders it named.

mod acknowledged;
mod engine_vs_store;
mod fallback;
mod helpers;
mod rebuild_waits;
mod redis_failures;
