//! Load generation and measurement for Stockade.
//!
//! - [`compare::run`] is `stockade bench`: every way of selling stock the
//!   founding articles describe, and Stockade's own engines, side by side
//!   on the same servers, each from a clean state, with latency
//!   percentiles, the work each made Redis and PostgreSQL do, and the same
//!   correctness check.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stockade_bench::compare::{self, BenchConfig, DEFAULT_POOL_SIZE, Quiet};
//! use stockade_bench::scenario::{Overrides, Scenario, Workload};
//! use stockade_bench::servers::Servers;
//! use stockade_bench::strategy::StrategyKind;
//!
//! # async fn bench() -> Result<(), Box<dyn std::error::Error>> {
//! let config = BenchConfig {
//!     workload: Workload::new(Some(Scenario::Seed100), &Overrides::default())?,
//!     strategies: StrategyKind::ALL.to_vec(),
//!     pool_size: DEFAULT_POOL_SIZE,
//! };
//! // Throwaway redis-server and PostgreSQL, since no URL is given.
//! let servers = Servers::prepare(config.needs_redis(), config.needs_postgres(), None, None).await?;
//! let report = compare::run(&config, &servers, Arc::new(Quiet)).await;
//! println!("{}", report.to_markdown());
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`latency`]: the HDR histogram of answer times.
//! - [`scenario`]: the named scenarios and `--duration`'s parser.
//!   - `scenario::workload`: the adjustments and the validated
//!     [`scenario::Workload`].
//! - [`strategy`]: the [`strategy::Strategy`] interface and the eight
//!   strategies (the articles' Lua script in `lua/`, the PostgreSQL
//!   strategies' tables in `sql/`).
//! - [`servers`]: the servers of a comparison, and a clean state for each
//!   strategy.
//! - [`driver`]: sends a workload at a strategy and tallies the answers.
//! - [`timeline`]: second-by-second throughput and latency of timed runs.
//! - [`counters`]: the servers' work during a run, from their own statistics.
//!   - `counters::commandstats`: Redis commands, their time, Redis's CPU time.
//!   - `counters::transactions`: PostgreSQL transactions.
//! - [`check`]: the correctness check.
//! - [`compare`]: `stockade bench`, the strategies one after another.
//! - [`report`]: each strategy's result, and the report as JSON.
//!   - `report::ratios`: the ratios between strategies the targets use.
//!   - `report::markdown`: the report as Markdown, numbers for people.
//! - [`chart`]: results as an SVG chart.
//! - [`lock`]: the lock benchmark (`stockade-lock` against `rslock`).
//! - [`draw_bench`]: `stockade bench draw`, close → published of a large
//!   draw on a running `stockade serve`.
//! - [`draw_sale`]: `stockade demo --draw`, a draw sale entered over HTTP
//!   and its draw checked as an auditor would.
//! - [`http_load`]: `stockade load`, the same crowd and checks over HTTP
//!   against a running `stockade serve`.
//! - [`http_bench`]: `stockade bench http`, `stockade serve` against a bare
//!   axum handler, committed purchases and sold-out rejections: phases and
//!   servers.
//!   - `http_bench::results`: the phases' results as a table or JSON.
//!   - `http_bench::checks`: the answers and the service checked after a
//!     phase.
//!   - `http_bench::baseline`: the bare axum handler.

pub mod chart;
pub mod check;
pub mod compare;
pub mod counters;
pub mod draw_bench;
pub mod draw_sale;
pub mod driver;
pub mod hold_sale;
pub mod http_bench;
pub mod http_load;
pub mod latency;
pub mod report;
pub mod scenario;
pub mod servers;
pub mod shards;
pub mod strategy;
pub mod timeline;

/// `stockade bench lock`: the lock library against `rslock` (hand-off
/// latency, throughput, Redis commands per acquisition), re-exported so the
/// binary reaches every benchmark through this crate.
pub use stockade_lock_bench as lock;
