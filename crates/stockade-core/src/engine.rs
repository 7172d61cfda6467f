//! The stock engine contract: the one place that decides, atomically,
//! whether a buyer gets an item.

use async_trait::async_trait;

use chrono::{DateTime, Utc};

use crate::{
    CreateOutcome, Epoch, Judged, Order, OrderId, Purchase, PurchaseOutcome, ReleaseOutcome,
    SaleId, SaleSnapshot, SaleSpec, UserId,
};

/// An engine decides purchases for many sales at once.
///
/// Every method is atomic with respect to every other call on the same sale:
/// a purchase checks the window, the idempotency key, the buyer's limit and
/// the stock, and records the order, in one indivisible step. Implementations
/// must keep the invariants of docs/design.md under any concurrency:
/// no oversell, no buyer over the limit, one order per idempotency key.
///
/// Time comes from the engine's [`crate::Clock`], never from the system
/// directly, so windows are testable.
#[async_trait]
pub trait Engine: Send + Sync + 'static {
    /// A short name for reports: `memory`, `redis`, `postgres`, `sqlite`.
    fn name(&self) -> &'static str;

    /// Whether an accepted purchase still has to be committed to the order
    /// store ([`Durability::Outbox`]: memory, Redis) or is committed already
    /// ([`Durability::Committed`]: the store deciding itself). Everything
    /// the service does around an engine (the writer, the outbox sweep,
    /// releases owed, rebuilds) follows from this answer.
    fn durability(&self) -> Durability {
        Durability::Outbox
    }

    /// Whether this engine can lack an order the store has, because its
    /// state lives in a server that can lose writes (a failover to a
    /// replica behind, a restart without persistence, two primaries for a
    /// moment). A keyed purchase it refuses is then looked up in the
    /// store, which may hold the key's order. An engine in the process,
    /// rebuilt from the store and the intake journal at start, or the
    /// store itself, cannot.
    fn can_lag_the_store(&self) -> bool {
        false
    }

    /// The run id of the server the engine's state lives in (Redis's), which
    /// changes whenever that state may have been lost (a restart, a
    /// failover); `None` for an engine in the process or the store. A
    /// rebuild notes the server it wrote to, so a restart already rebuilt
    /// for is not rebuilt again.
    async fn run_id(&self) -> Result<Option<String>, EngineError> {
        Ok(None)
    }

    /// Creates a sale with all its stock available. Creating the same spec
    /// again is a no-op ([`CreateOutcome::AlreadyExists`]); a different spec
    /// under an existing id is [`EngineError::SaleConflict`].
    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError>;

    /// Decides one purchase, if the engine holds the sale under the
    /// purchase's epoch ([`Purchase::at_epoch`]).
    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError>;

    /// [`Engine::purchase`] judged at `now` (its window, a tier's
    /// reserve), and the instant it was judged at: the caller makes an
    /// accepted purchase's order at that instant, so the store judges the
    /// order as the engine did. An engine that decides purchases in batches
    /// (Redis) judges a whole batch at one reading of its own clock, later
    /// than `now`, and reports that reading.
    async fn purchase_at(
        &self,
        purchase: &Purchase,
        now: DateTime<Utc>,
    ) -> Result<Judged, EngineError>;

    /// Returns an order's items to stock and to its buyer's allowance, and
    /// drops it from the outbox, if the engine holds the sale under `epoch`
    /// (the store's epoch when the release was decided). Releasing the same
    /// order twice changes nothing the second time.
    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError>;

    /// Releases many orders of one sale, each under its own epoch, in one
    /// atomic step where the engine can (one script call on Redis): the
    /// answers, in order, are what [`Engine::release`] would have answered
    /// for each in turn (an order named twice is released once). A failed
    /// call released nothing. The default releases one at a time, which
    /// suits an engine whose release costs no round trip.
    async fn release_many(
        &self,
        sale: &SaleId,
        releases: &[(OrderId, Epoch)],
    ) -> Result<Vec<ReleaseOutcome>, EngineError> {
        let mut outcomes = Vec::with_capacity(releases.len());
        for (order, epoch) in releases {
            outcomes.push(self.release(sale, *order, *epoch).await?);
        }
        Ok(outcomes)
    }

    /// The epoch the engine holds the sale under ([`Epoch::CLOSED`] while
    /// it is being rebuilt), or None for an unknown sale.
    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError>;

    /// Stops the sale from selling until the next [`Engine::rebuild`]: the
    /// engine holds it under [`Epoch::CLOSED`], its outbox stays readable.
    /// Returns the epoch it held (None for an unknown sale). The first step
    /// of a fenced rebuild: after it, the outbox is final and can be
    /// committed before the state is replaced.
    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError>;

    /// The sale's stock and status now, or None if it does not exist.
    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError>;

    /// How many items `user` holds in `sale` (0 for unknown sales or users).
    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError>;

    /// The sale's outbox: orders the engine accepted that have been neither
    /// acknowledged as committed to the store nor released, oldest first.
    /// After a crash, whoever recovers commits these and acknowledges them.
    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError>;

    /// Removes committed orders from the outbox. Unknown or already
    /// acknowledged ids are ignored.
    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError>;

    /// Replaces the engine's state for a sale with what the store says: the
    /// spec, and every committed order (live ones count against stock and
    /// limits; cancelled and expired ones keep their idempotency keys and can
    /// no longer be released), under `epoch`, the store's new epoch for the
    /// sale. Creates the sale if the engine has lost it. The outbox is
    /// emptied: whatever it still held was decided under an older epoch and
    /// can no longer be committed.
    ///
    /// Fenced: a rebuild under an epoch older than one the engine already
    /// holds or is building fails with [`EngineError::Superseded`] and
    /// changes nothing.
    async fn rebuild(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError>;

    /// Lets the engine forget an ended sale `after` from now (zero: at
    /// once): the store keeps its orders, and a sale out of its window
    /// sells nothing, so its engine state only costs memory. On Redis every
    /// key of the sale gets that time to live; the memory engine drops the
    /// sale when called with zero. Calling it again moves the deadline.
    async fn retire(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), EngineError> {
        let _ = (sale, after);
        Ok(())
    }
}

/// What an accepted purchase still needs before it is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The engine keeps its own stock apart from the store: an accepted
    /// order waits in the engine's outbox until the store commits it and
    /// it is acknowledged; a cancel in the store owes the engine a release;
    /// a lost or stale engine is rebuilt from the store.
    Outbox,
    /// The engine is the store itself: an accepted order is committed
    /// before the engine answers. Its outbox is always empty, nothing is
    /// owed to it, and there is nothing to close or rebuild.
    Committed,
}

/// Why an engine call failed. Every variant says whether retrying may help.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `create_sale` for an existing id with a different spec.
    #[error(
        "sale {sale_id} already exists with different parameters; use a new id or the existing ones"
    )]
    SaleConflict {
        /// The sale id.
        sale_id: SaleId,
        /// The spec the sale already has.
        existing: Box<SaleSpec>,
    },
    /// The orders given to `rebuild` do not fit the spec (more items than
    /// stock, a buyer over the limit, or an order of another sale).
    #[error("cannot rebuild sale {sale_id}: {reason}")]
    InconsistentRebuild {
        /// The sale id.
        sale_id: SaleId,
        /// What does not fit.
        reason: String,
    },
    /// A rebuild under `epoch` lost to one under a newer epoch (another
    /// instance rebuilt the sale meanwhile). Nothing changed.
    #[error("the rebuild of sale {sale_id} under epoch {epoch} was superseded by epoch {newer}")]
    Superseded {
        /// The sale id.
        sale_id: SaleId,
        /// The epoch of the rebuild that lost.
        epoch: Epoch,
        /// The newer epoch the engine holds or is building.
        newer: Epoch,
    },
    /// The backend (Redis, PostgreSQL) cannot be reached or refused the
    /// connection. Retry later, or fall back to another engine.
    #[error("stock engine backend unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The backend did not answer in time. The call may or may not have
    /// taken effect: retry with the same idempotency key.
    #[error("stock engine backend timed out: {0}")]
    Timeout(String),
    /// The backend answered something the engine does not understand, or
    /// failed in a way retrying will not fix. A bug or a misconfiguration.
    #[error("stock engine backend failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl EngineError {
    /// Whether the same call may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::Timeout(_))
    }

    /// Wraps any error as [`EngineError::Backend`].
    pub fn backend(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Backend(error.into())
    }
}
