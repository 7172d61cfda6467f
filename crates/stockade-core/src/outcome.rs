//! The closed set of answers an engine gives. Rejections are outcomes, not
//! errors: a sold-out sale is the normal end of a flash sale.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{EngineError, Epoch, OrderId, SaleSpec, SkuId};

/// An engine's answer to a purchase and the instant it judged it at (the
/// window, a tier's reserve). An accepted purchase's order is made at that
/// instant, so the store, which judges the order again when it commits it,
/// judges it at the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The answer.
    pub outcome: PurchaseOutcome,
    /// The instant it was judged at.
    pub at: DateTime<Utc>,
}

/// The answer to a purchase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PurchaseOutcome {
    /// Accepted: the order was recorded and its items reserved.
    Purchased {
        /// The new order.
        order_id: OrderId,
        /// Items left after this purchase, across every SKU.
        remaining: u32,
    },
    /// No stock left at all, in any SKU.
    SoldOut,
    /// An item asked for more than its SKU has left (the first such item,
    /// in the order asked); nothing was taken.
    InsufficientStock {
        /// The SKU that is short.
        sku: SkuId,
        /// Its items left.
        remaining: u32,
    },
    /// The buyer would exceed the per-user limit (`sku` None), or the
    /// per-SKU limit of `sku`.
    LimitExceeded {
        /// How many items the buyer already holds in this sale (of `sku`,
        /// when it is named).
        already: u32,
        /// The SKU whose limit it is, None for the per-user limit.
        sku: Option<SkuId>,
    },
    /// The sale has no SKU of that id.
    UnknownSku {
        /// The SKU asked for.
        sku: SkuId,
    },
    /// The sale has several SKUs and the purchase did not name one.
    SkuRequired,
    /// The idempotency key was used before on this sale: this is the order
    /// it produced. Nothing changed.
    Duplicate {
        /// The original order.
        order_id: OrderId,
    },
    /// The sale's window has not opened.
    NotStarted,
    /// The sale's window has closed.
    Ended,
    /// No sale with that id.
    UnknownSale,
    /// The engine holds the sale under another epoch than the purchase was
    /// made under (or [`Epoch::CLOSED`] while it is being rebuilt): the
    /// caller's view of who decides the sale is out of date. Nothing
    /// changed.
    WrongEpoch {
        /// The epoch the engine holds.
        engine: Epoch,
    },
}

impl PurchaseOutcome {
    /// A short stable name, for metrics labels and reports.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Purchased { .. } => "purchased",
            Self::SoldOut => "sold_out",
            Self::InsufficientStock { .. } => "insufficient_stock",
            Self::LimitExceeded { .. } => "limit_exceeded",
            Self::Duplicate { .. } => "duplicate",
            Self::NotStarted => "not_started",
            Self::Ended => "ended",
            Self::UnknownSale => "unknown_sale",
            Self::WrongEpoch { .. } => "wrong_epoch",
            Self::UnknownSku { .. } => "unknown_sku",
            Self::SkuRequired => "sku_required",
        }
    }
}

/// The answer to releasing an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReleaseOutcome {
    /// The order's items went back to stock and to the buyer's allowance.
    Released {
        /// Items returned.
        quantity: u32,
        /// Items available after the release.
        remaining: u32,
    },
    /// The order had been released before: nothing changed.
    AlreadyReleased,
    /// The engine has no such order in that sale: nothing changed.
    UnknownOrder,
    /// No sale with that id: nothing changed.
    UnknownSale,
    /// The engine holds the sale under another epoch than the release was
    /// made under: nothing changed. If the engine's epoch is newer, it was
    /// rebuilt from a store that already had the order cancelled: nothing
    /// is left to do. If older (or closed), the engine has not been rebuilt
    /// under the release's epoch yet: retry later.
    WrongEpoch {
        /// The epoch the engine holds.
        engine: Epoch,
    },
}

/// The answer to creating a sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CreateOutcome {
    /// The sale is new.
    Created,
    /// A sale with the identical spec already existed: nothing changed.
    AlreadyExists,
}

impl CreateOutcome {
    /// The answer to creating `requested` when a sale with its id exists as
    /// `existing`: `AlreadyExists` if they are identical, a conflict if not.
    pub fn for_existing(requested: &SaleSpec, existing: SaleSpec) -> Result<Self, EngineError> {
        if existing == *requested {
            Ok(Self::AlreadyExists)
        } else {
            Err(EngineError::SaleConflict {
                sale_id: requested.id().clone(),
                existing: Box::new(existing),
            })
        }
    }
}
