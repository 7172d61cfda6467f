//! Why a purchase named no new order: the pipeline's typed refusals. The
//! API renders each with its message ([`crate::api::purchases`]); here each
//! knows only its [`ErrorCode`].

use stockade_api::ErrorCode;
use stockade_core::{EngineError, OrderId, PurchaseOutcome, SaleId, ValidationError};
use stockade_store::StoreError;

use crate::waiting_room::door::AdmissionError;

/// Why a purchase named no new order.
#[derive(Debug)]
pub enum PurchaseError {
    /// The request is invalid.
    Invalid(ValidationError),
    /// The sale refused it (sold out, too few left, over the buyer's limit,
    /// not started, ended): the engine's, the store's or this instance's
    /// own answer, the same in each case.
    Refused {
        /// The sale.
        sale: SaleId,
        /// The refusal.
        outcome: PurchaseOutcome,
        /// Items asked for.
        quantity: u32,
    },
    /// There is no such sale.
    UnknownSale(SaleId),
    /// The waiting room turned the buyer away.
    Admission(AdmissionError),
    /// Every place in flight is taken (`--max-purchases-in-flight`).
    Overloaded {
        /// The bound.
        limit: usize,
    },
    /// The sale's engine is being rebuilt: nothing was sold.
    Rebuilding,
    /// The store refused the engine's order of an unkeyed purchase (the
    /// sale moved on, or the engine was out of line): nothing was sold, a
    /// plain retry will do.
    StoreRefused,
    /// The order a key names was refused by the store: nothing was sold.
    OrderFailed(OrderId),
    /// The key was used for another purchase.
    KeyReused,
    /// The engine is unreachable and the sale cannot move to a fallback.
    EngineUnavailable,
    /// The engine failed.
    Engine(EngineError),
    /// The store failed before anything was sold.
    Store(StoreError),
    /// The store cannot be reached; the order is kept (in the engine's
    /// outbox) and committed later.
    Kept(OrderId),
    /// The order could not be made durable before being named (the intake
    /// journal failed); a keyed retry finds it if it commits.
    NotDurable,
    /// A replayed key's order is not committed yet; retry with the key.
    ReplayNotCommitted,
    /// Not made: a purchase before it in a run decided in order (a draw's)
    /// failed before the engine judged it; the run is tried again.
    RunStopped,
    /// A defect: an outcome taken for a refusal that is none.
    Internal(String),
}

impl PurchaseError {
    /// The code the API answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Invalid(_) => ErrorCode::InvalidRequest,
            Self::Refused { outcome, .. } => refusal_code(outcome),
            Self::UnknownSale(_) => ErrorCode::UnknownSale,
            Self::Admission(error) => error.code(),
            Self::Overloaded { .. } => ErrorCode::Overloaded,
            Self::Rebuilding | Self::StoreRefused => ErrorCode::Rebuilding,
            Self::RunStopped => ErrorCode::Overloaded,
            Self::OrderFailed(_) => ErrorCode::OrderFailed,
            Self::KeyReused => ErrorCode::IdempotencyKeyReused,
            Self::EngineUnavailable => ErrorCode::EngineUnavailable,
            Self::Engine(error) if error.is_retryable() => ErrorCode::EngineUnavailable,
            Self::Engine(_) => ErrorCode::Internal,
            Self::Store(StoreError::Unavailable(_)) => ErrorCode::StoreUnavailable,
            Self::Store(StoreError::Failed(_)) => ErrorCode::Internal,
            Self::Kept(_) | Self::NotDurable | Self::ReplayNotCommitted => {
                ErrorCode::StoreUnavailable
            }
            Self::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The refusal `outcome` of a purchase of `quantity` items of `sale`.
    pub fn refused(sale: &SaleId, quantity: u32, outcome: PurchaseOutcome) -> Self {
        match outcome {
            PurchaseOutcome::SoldOut
            | PurchaseOutcome::InsufficientStock { .. }
            | PurchaseOutcome::LimitExceeded { .. }
            | PurchaseOutcome::NotStarted
            | PurchaseOutcome::Ended
            | PurchaseOutcome::UnknownSku { .. }
            | PurchaseOutcome::SkuRequired => Self::Refused {
                sale: sale.clone(),
                outcome,
                quantity,
            },
            PurchaseOutcome::UnknownSale => Self::UnknownSale(sale.clone()),
            PurchaseOutcome::Purchased { .. }
            | PurchaseOutcome::Duplicate { .. }
            | PurchaseOutcome::WrongEpoch { .. } => {
                Self::Internal(format!("{} is not a refusal", outcome.label()))
            }
        }
    }

    /// Whether the answer names an order the buyer has (kept, committed
    /// later): what spends a waiting-room admission, like a sale.
    pub fn names_an_order(&self) -> bool {
        matches!(self, Self::Kept(_))
    }

    /// The order the answer names (kept, or refused by the store), if any.
    pub fn order_id(&self) -> Option<OrderId> {
        match self {
            Self::Kept(id) | Self::OrderFailed(id) => Some(*id),
            _ => None,
        }
    }
}

/// The code of a refusal by the sale.
fn refusal_code(outcome: &PurchaseOutcome) -> ErrorCode {
    match outcome {
        PurchaseOutcome::SoldOut => ErrorCode::SoldOut,
        PurchaseOutcome::InsufficientStock { .. } => ErrorCode::InsufficientStock,
        PurchaseOutcome::LimitExceeded { .. } => ErrorCode::LimitExceeded,
        PurchaseOutcome::NotStarted => ErrorCode::NotStarted,
        PurchaseOutcome::Ended => ErrorCode::Ended,
        PurchaseOutcome::UnknownSku { .. } => ErrorCode::UnknownSku,
        PurchaseOutcome::SkuRequired => ErrorCode::SkuRequired,
        // Not refusals of the sale: never built as one (see
        // `PurchaseError::refused`).
        PurchaseOutcome::UnknownSale
        | PurchaseOutcome::Purchased { .. }
        | PurchaseOutcome::Duplicate { .. }
        | PurchaseOutcome::WrongEpoch { .. } => ErrorCode::Internal,
    }
}

impl From<ValidationError> for PurchaseError {
    fn from(error: ValidationError) -> Self {
        Self::Invalid(error)
    }
}

impl From<EngineError> for PurchaseError {
    /// The store engine's failures are the store's.
    fn from(error: EngineError) -> Self {
        match stockade_store::engine::store_error(error) {
            Ok(store) => Self::Store(store),
            Err(error) => Self::Engine(error),
        }
    }
}

impl From<StoreError> for PurchaseError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl From<crate::shedding::Overloaded> for PurchaseError {
    fn from(overloaded: crate::shedding::Overloaded) -> Self {
        Self::Overloaded {
            limit: overloaded.limit,
        }
    }
}

impl From<AdmissionError> for PurchaseError {
    fn from(error: AdmissionError) -> Self {
        Self::Admission(error)
    }
}
