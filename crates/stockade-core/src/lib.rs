//! Stockade's domain and the stock engine contract.
//!
//! This crate has no I/O. It defines the values every other part of Stockade
//! passes around — validated at construction, so an engine never sees an
//! invalid one — and the [`Engine`] trait that the in-memory and Redis
//! engines (in `stockade-engine`) and the store deciding itself
//! (`stockade-store`'s `StoreEngine`, on PostgreSQL or SQLite) implement.
//!
//! ```
//! use stockade_core::{Purchase, SaleSpec};
//!
//! let sale = SaleSpec::builder("sneaker-drop", 100)?.per_user_limit(2)?.build()?;
//! let purchase = Purchase::new("sneaker-drop", "user-42", 1)?.with_idempotency_key("retry-1")?;
//! assert_eq!(sale.total_stock(), 100);
//! assert_eq!(purchase.quantity(), 1);
//! # Ok::<(), stockade_core::ValidationError>(())
//! ```
//!
//! # Layout
//! - [`sale`]: sale ids, the sale specification, its status and snapshot.
//! - [`sku`]: the separately stocked SKUs of a sale, and the items a
//!   purchase asks for and an order holds.
//! - [`sold`]: what a sale has sold, by SKU and by tier.
//! - [`tier`]: buyer tiers, with stock reserved for them, their own limit
//!   and an earlier start.
//! - [`purchase`]: buyer ids, idempotency keys and the purchase request.
//! - [`order`]: time-ordered order ids and committed orders.
//! - [`outcome`]: the closed set of answers an engine gives.
//! - [`clock`]: injectable time, so windows and holds are testable.
//! - [`engine`]: the [`Engine`] contract, its error type, and each engine's
//!   [`Durability`] (an outbox to commit, or committed when answered).
//! - [`rule`]: the purchase rule (window, then limit, then stock), written
//!   once for the memory engine and the store; the Redis Lua mirrors it.
//! - [`epoch`]: the sale's epoch, which fences a stale engine's decisions.
//! - [`rebuild`]: deriving engine state from the store's orders, checked once.
//! - [`redact`]: the one way a URL may be shown (no credentials).
//! - [`room`]: a sale's waiting room settings.
//! - [`draw`]: the draw of a draw sale, an order of its entries anyone can
//!   recompute from the published seed.
//! - [`validation`]: the error every constructor returns, and the one check
//!   of client-sent identifiers.

pub mod buyer;
pub mod clock;
pub mod draw;
pub mod engine;
pub mod entropy;
pub mod epoch;
pub mod order;
pub mod outcome;
pub mod purchase;
pub mod rebuild;
pub mod redact;
pub mod room;
pub mod rule;
pub mod sale;
pub mod sku;
pub mod sold;
pub mod tier;
pub mod validation;

pub use buyer::UserId;
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{Durability, Engine, EngineError};
pub use epoch::Epoch;
pub use order::{Order, OrderId, OrderStatus};
pub use outcome::{CreateOutcome, Judged, PurchaseOutcome, ReleaseOutcome};
pub use purchase::{IdempotencyKey, Purchase};
pub use rebuild::{PlannedOrder, RebuildPlan};
pub use room::{CloseReason, RoomConfig};
pub use sale::{SaleId, SaleSnapshot, SaleSpec, SaleSpecBuilder, SaleStatus, SkuSnapshot};
pub use sku::{Item, SkuId, SkuSpec, WantedItem};
pub use sold::SoldCounts;
pub use tier::{TierName, TierSpec};
pub use validation::ValidationError;
