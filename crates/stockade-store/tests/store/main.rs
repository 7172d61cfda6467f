//! The order store as the arbiter, on SQLite and on PostgreSQL: every order
//! of a batch gets its own verdict, a bad one never blocks the others, and
//! whatever an engine decided the store never holds an oversold sale, a
//! buyer over the limit, a key used twice, or an order of a stale epoch.

mod authority;
mod batch;
mod helpers;
mod releases;
mod verdicts;
