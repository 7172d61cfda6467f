//! Load generation and measurement for Stockade.
//!
//! [`flash_sale::run`] simulates a flash sale: a crowd of buyers with
//! distinct ids hits one sale at the same instant, every answer is timed,
//! and the result is checked against the invariants (no oversell, no buyer
//! served twice, stock that adds up).
//!
//! ```no_run
//! use stockade_bench::backend::{Backend, EngineKind};
//! use stockade_bench::flash_sale::{self, FlashSale};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = Backend::connect(EngineKind::Memory, None, None).await?;
//! let report = flash_sale::run(backend.engine(), &FlashSale::new(10_000, 1_000)?, || {}).await?;
//! assert_eq!(report.purchased, 1_000);
//! println!("{}", report.to_table());
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`backend`]: choosing an engine, and starting throwaway Redis or
//!   PostgreSQL servers when none is named.
//! - [`flash_sale`]: the simulated sale and its [`flash_sale::FlashSaleReport`].
//! - [`latency`]: the HDR histogram of answer times.

pub mod backend;
pub mod flash_sale;
pub mod latency;
