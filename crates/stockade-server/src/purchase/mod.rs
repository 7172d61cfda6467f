//! The purchase pipeline, the path of docs/design.md, in one place:
//!
//! request → what this instance knows (sold out, not started, ended, an
//! unknown sale: `sale_book::rejections`, answered at once, at no cost to the
//! engine or the store) → the waiting room's door → a place in flight
//! ([`crate::shedding`]) → the sale's route (epoch and authority,
//! `route`) → the engine's gate under that epoch, behind the breaker
//! (`gate`: one atomic step, the order in the outbox) → the writer → the
//! store's verdict on this order (`settle`) → the [`Decision`].
//!
//! A 201 names only a committed order. Past the commit deadline the
//! decision is [`Decision::Pending`]. When the store cannot be reached the
//! order stays in the outbox and the reconciler commits it later
//! ([`PurchaseError::Kept`]). When the store refuses the order, nothing was
//! sold. Sales under the fallback authority, and every sale with
//! `--engine postgres`, are decided by the store itself in one transaction
//! that also commits the order. A replayed idempotency key is answered with
//! the store's verdict on its order (`replay`).
//!
//! The HTTP handler (`crate::api::purchases`) parses the request into an
//! [`Attempt`], calls [`Purchases::decide`] and renders the answer.
//!
//! # Layout
//! - `pipeline`: [`Purchases::decide`], the steps in order.
//! - `route`: the sale's route as this instance knows it, and moves to
//!   the fallback.
//! - `gate`: who decides (the engine or the store) and the engine's call
//!   behind the circuit breaker.
//! - `settle`: the writer, the store's verdict, and what a refused order
//!   means.
//! - `replay`: a replayed key's answer.
//! - `turn`: purchases the engine judges one after another in a given
//!   order, committed together (a draw's winners).
//! - `error`: [`PurchaseError`], why no new order was named.
//! - `answered`: [`Answered`], the label metrics count answers under.

mod answered;
mod error;
mod gate;
mod pipeline;
mod replay;
mod route;
mod settle;
mod turn;

pub use answered::{Answered, Class};
pub use error::PurchaseError;
pub use pipeline::Purchases;

use stockade_core::{Order, Purchase};

use crate::waiting_room::door::AdmissionToken;

/// A purchase as the buyer asked for it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// What to buy, for whom, with which idempotency key.
    pub purchase: Purchase,
    /// Whether the buyer asked for an answer before the commit
    /// (`Prefer: respond-async`).
    pub respond_async: bool,
    /// The waiting room's admission the buyer carries.
    pub admission: AdmissionToken,
}

/// A purchase that named an order.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Bought and committed (201).
    Committed {
        /// The order, `confirmed` or `held`.
        order: Order,
        /// Items left in the sale right after it.
        remaining: u32,
    },
    /// Bought, not committed yet (202 `pending`): the commit deadline
    /// passed, or `early`, the buyer asked for an answer before the commit.
    Pending {
        /// The order.
        order: Order,
        /// Items left in the sale right after it.
        remaining: u32,
        /// Answered early at the buyer's request.
        early: bool,
    },
    /// A replayed key: its order, committed (200) or still being committed
    /// by this instance (202).
    Replayed {
        /// The order.
        order: Order,
        /// Whether the store has it.
        committed: bool,
    },
}

impl Decision {
    /// The order it names.
    pub fn order_id(&self) -> stockade_core::OrderId {
        match self {
            Self::Committed { order, .. }
            | Self::Pending { order, .. }
            | Self::Replayed { order, .. } => order.id,
        }
    }

    /// The label the metrics count it under.
    pub fn answered(&self) -> Answered {
        match self {
            Self::Committed { .. } => Answered::Purchased,
            Self::Pending { .. } => Answered::Pending,
            Self::Replayed { .. } => Answered::Duplicate,
        }
    }
}
