//! The order store as the arbiter, on SQLite and on PostgreSQL: every order
//! of a batch gets its own verdict, a bad one never blocks the others, and
//! whatever an engine decided the store never holds an oversold sale, a
//! buyer over the limit, a key used twice, or an order of a stale epoch.
//! And the store deciding purchases itself ([`stockade_store::StoreEngine`],
//! whose contract the engine conformance suite checks): refused buyers cost
//! no write (`cheap_rejection`), and an outage of its server gives
//! retryable errors and loses nothing (`engine_faults`).

mod authority;
mod batch;
mod cheap_rejection;
mod draw_seal;
mod engine_faults;
mod helpers;
mod plans;
mod releases;
mod skus;
mod verdicts;
