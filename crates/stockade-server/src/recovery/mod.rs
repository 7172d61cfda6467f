//! Keeping the engine in line with the store, the source of truth, through
//! fenced changes of authority (see `docs/consistency.md`).
//!
//! - [`rebuild_sale`]: the one way an engine's state for a sale is
//!   replaced. Under the sale's rebuild lock (so one instance at a time
//!   does it): close the sale in the engine, commit what its outbox holds
//!   (other instances' in-flight orders are committed, not dropped),
//!   wait until no live instance's writer holds an order of the sale (an
//!   engine that lost its data lost their outbox entries: the writer's
//!   copy is the only one), advance the sale's epoch in the store, rebuild the engine from the
//!   store under the new epoch in bounded chunks, apply the releases the
//!   engine owes.
//! - [`move_to_fallback`]: the sale moves to the store's own decisions
//!   (`--fallback postgres`) by advancing its epoch, once no instance has
//!   reached the engine for [`FALLBACK_QUIET`] and no live instance still
//!   holds orders the engine accepted on their way to the store; orders
//!   the engine decided under the old epoch still commit until the rebuild
//!   back drains them.
//! - [`reconcile_forever`]: every second, on the sales that are open:
//!   commit outbox entries nobody is committing any more, rebuild when Redis restarted or its stock drifted from the
//!   store's, and move fallback sales back once Redis is healthy.
//!
//! # Layout
//! - `rebuild`: [`rebuild_sale`] and [`request_rebuild`].
//! - `drain`: the rebuild's wait for the writers of every live instance.
//! - `fallback`: [`move_to_fallback`].
//! - `reconcile`: [`recover_at_start`] and [`reconcile_forever`].

mod drain;
mod fallback;
mod rebuild;
mod reconcile;

pub use fallback::{FALLBACK_LIVE, FALLBACK_QUIET, FallbackMove, move_to_fallback};
pub use rebuild::{rebuild_sale, request_rebuild};
pub use reconcile::{reconcile_forever, recover_at_start};

use stockade_core::{EngineError, Epoch, SaleId};
use stockade_lock::LockError;
use stockade_store::StoreError;

/// Why a recovery step failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The rebuild lock could not be taken (Redis unreachable, or another
    /// instance held it the whole time).
    #[error("the rebuild lock: {0}")]
    Lock(#[from] LockError),
    /// The sale's epoch moved while this instance was rebuilding it.
    #[error("sale {0} moved to another epoch meanwhile; retrying")]
    Raced(SaleId),
    /// Live instances still hold orders of the sale that the engine
    /// accepted and the store has not decided: advancing the epoch now
    /// would void them.
    #[error(
        "instances {instances:?} still have accepted orders of sale {sale} on their way to the store; the rebuild waits for them and retries"
    )]
    Committing {
        /// The sale being rebuilt.
        sale: SaleId,
        /// The instances holding orders (or that have not reported since
        /// the sale was closed).
        instances: Vec<String>,
    },
}

impl RecoveryError {
    /// Whether it says the engine (or the lock on the same Redis) could not
    /// be reached.
    pub fn means_unreachable(&self) -> bool {
        match self {
            Self::Engine(error) => error.is_retryable(),
            Self::Lock(_) => true,
            Self::Store(_) | Self::Raced(_) | Self::Committing { .. } => false,
        }
    }
}

/// What [`rebuild_sale`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// The engine was rebuilt under this epoch.
    Rebuilt(Epoch),
    /// Someone else had already brought the engine in line.
    InLine,
    /// A newer rebuild by another instance took over.
    Superseded,
    /// There is nothing to rebuild (no such sale, or no engine).
    Nothing,
}
