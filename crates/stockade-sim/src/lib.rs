//! Stockade's deterministic simulator: the real service, several instances
//! of it, in one process and one thread, with time, randomness, the network
//! and the servers (Redis, the store) simulated, so that any run is
//! replayed exactly from its seed.
//!
//! A seed draws a [`scenario::Scenario`] (the cluster, the sale, the crowd,
//! the faults); [`run::run`] plays it on a paused single-threaded runtime,
//! where the service's own tasks (writer, reconciler, sweepers) run beside
//! the crowd's, and the [`oracle`] judges the end against the promises of
//! the README. Every request and answer goes into an event log whose hash
//! is the same on every replay of the seed.

pub mod agreement;
pub mod batch;
pub mod bundles;
pub mod clock;
pub mod crowd;
pub mod draw_check;
mod draws;
mod entries;
pub mod events;
pub mod faults;
pub mod history;
pub mod housekeeping;
pub mod knobs;
pub mod links;
pub mod metrics;
pub mod oracle;
pub mod os_random;
pub mod outages;
mod partition;
pub mod rebuilds;
pub mod redis;
pub mod refusals;
pub mod release;
pub mod reserves;
pub mod rooms;
pub mod run;
pub mod scenario;
pub mod stock_refusals;
pub mod watchdog;
pub mod world;

pub use run::{Report, run};
pub use scenario::{Scenario, Size};
