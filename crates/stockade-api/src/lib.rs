//! Stockade's HTTP contract, shared by the service that answers it and the
//! programs that call it (the bench, `stockade load`, the tests): the
//! request and response bodies, the closed set of error codes with the
//! status each is answered with, and the statuses of orders and queue
//! tickets. The service's OpenAPI document is generated from these types,
//! so a client written against them matches the service by construction.
//!
//! # Layout
//! - [`error_code`]: [`ErrorCode`], every code the API answers, its HTTP
//!   status and its `Retry-After`.
//! - [`error`]: [`ErrorBody`], the shape of every non-2xx answer.
//! - [`sale`]: [`CreateSale`], [`Sale`] and its [`WaitingRoom`].
//! - [`order`]: [`PurchaseRequest`], [`OrderBody`] (and [`OrderView`], the
//!   same JSON borrowed from an order), [`OrderPage`] and the
//!   client's [`OrderStatus`].
//! - [`queue`]: [`JoinQueue`], [`QueueTicket`] and its [`TicketStatus`].
//! - [`draw`]: [`Allocation`], [`EntryRequest`], [`EntryBody`] and the
//!   published [`DrawBody`].
//!
//! The typed HTTP client of these routes is the crate `stockade-client`:
//! a crate of its own, so the service links no HTTP client through this
//! one and builds it with the same features whoever else uses it.

pub mod draw;
pub mod error;
pub mod error_code;
pub mod order;
pub mod queue;
pub mod sale;

pub use draw::{Allocation, DrawBody, DrawTerms, DrawnEntry, EntryBody, EntryRequest};
pub use error::{ErrorBody, ErrorDetail};
pub use error_code::ErrorCode;
pub use order::{ItemBody, OrderBody, OrderPage, OrderStatus, OrderView, PurchaseRequest};
pub use queue::{JoinQueue, QueueTicket, TicketStatus};
pub use sale::{CreateSale, Sale, SkuStock, SkuView, Tier, WaitingRoom};
