//! The store as a stock engine: [`StoreEngine`] decides purchases in the
//! store itself, so `--engine postgres` and a sale moved to the fallback
//! go through the same [`Engine`] contract as memory and Redis.
//!
//! It is [`Durability::Committed`]: a purchase it accepts is committed
//! before it answers (see [`OrderStore::purchase`]), so its outbox is
//! always empty and acknowledging does nothing. A release is the store's
//! own cancel, idempotent like every engine's. The store is the source of
//! truth: there is nothing to close or rebuild, and asking is an error.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use stockade_core::{
    Clock, CreateOutcome, Durability, Engine, EngineError, Epoch, Judged, Order, OrderId, Purchase,
    PurchaseOutcome, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, UserId,
};
use tokio::sync::Semaphore;

use crate::arbiter::read_holdings;
use crate::releases::Cancel;
use crate::{OrderStore, SaveSale, StoreError, StoreKind};

/// The order store deciding purchases itself, as an [`Engine`].
#[derive(Debug, Clone)]
pub struct StoreEngine {
    store: OrderStore,
    clock: Arc<dyn Clock>,
    /// One permit per connection of the store's pool, for purchases: see
    /// [`StoreEngine::purchase_at`].
    purchasing: Arc<Semaphore>,
}

impl StoreEngine {
    /// The engine over `store`, reading time from `clock`.
    pub fn new(store: OrderStore, clock: Arc<dyn Clock>) -> Self {
        let connections = store.pool.options().get_max_connections() as usize;
        Self {
            store,
            clock,
            purchasing: Arc::new(Semaphore::new(connections.max(1))),
        }
    }

    /// The store it decides in.
    pub fn store(&self) -> &OrderStore {
        &self.store
    }
}

impl From<StoreError> for EngineError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => Self::Unavailable(Box::new(error)),
            StoreError::Failed(_) => Self::backend(error),
        }
    }
}

/// The store's own error inside an error of [`StoreEngine`], so that it is
/// answered as the store's (`store_unavailable`, not the engine's); any
/// other error comes back as it was.
pub fn store_error(error: EngineError) -> Result<StoreError, EngineError> {
    match error {
        EngineError::Unavailable(source) => source
            .downcast::<StoreError>()
            .map(|store| *store)
            .map_err(EngineError::Unavailable),
        EngineError::Backend(source) => source
            .downcast::<StoreError>()
            .map(|store| *store)
            .map_err(EngineError::Backend),
        other => Err(other),
    }
}

/// The answer to `close` and `rebuild`, which only an engine apart from
/// the store has a use for.
fn nothing_to_rebuild(sale: &SaleId) -> EngineError {
    EngineError::backend(format!(
        "sale {sale} is decided in the order store, the source of truth: there is nothing to close or rebuild"
    ))
}

#[async_trait]
impl Engine for StoreEngine {
    fn name(&self) -> &'static str {
        match self.store.kind() {
            StoreKind::Postgres => "postgres",
            StoreKind::Sqlite => "sqlite",
        }
    }

    fn durability(&self) -> Durability {
        Durability::Committed
    }

    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        match self.store.save_sale(spec, self.clock.now()).await? {
            SaveSale::Created => Ok(CreateOutcome::Created),
            SaveSale::Exists => Ok(CreateOutcome::AlreadyExists),
            SaveSale::Conflict(existing) => Err(EngineError::SaleConflict {
                sale_id: spec.id().clone(),
                existing,
            }),
        }
    }

    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        Ok(self.purchase_at(purchase, self.clock.now()).await?.outcome)
    }

    /// A crowd queues for a permit, one per connection of the store's
    /// pool, rather than for the pool itself: a pool acquire that times out
    /// while its connection is being checked or opened drops that
    /// connection, so thousands of buyers outlasting the pool's acquire
    /// timeout thrash it (10,000 buyers at once: some thirty times slower,
    /// and tens of thousands of `Unavailable` answers). The wait for a
    /// permit has the pool's acquire timeout and ends as a pool timeout
    /// would, so an unreachable or saturated store answers as before.
    async fn purchase_at(
        &self,
        purchase: &Purchase,
        now: DateTime<Utc>,
    ) -> Result<Judged, EngineError> {
        let wait = self.store.pool.options().get_acquire_timeout();
        let Ok(permit) = tokio::time::timeout(wait, self.purchasing.acquire()).await else {
            return Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut).into());
        };
        let _permit = permit.map_err(EngineError::backend)?;
        let outcome = self
            .store
            .purchase(purchase, OrderId::generate(), now)
            .await?;
        Ok(Judged { outcome, at: now })
    }

    /// Cancels the order in the store. The epoch is checked against the
    /// sale's before the cancel, not under its lock: the store's epoch only
    /// moves when the sale's authority moves, and a release the store owes
    /// nobody cannot be applied twice whatever the epoch.
    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError> {
        let Some(state) = self.store.sale_state(sale).await? else {
            return Ok(ReleaseOutcome::UnknownSale);
        };
        if state.epoch != epoch {
            return Ok(ReleaseOutcome::WrongEpoch {
                engine: state.epoch,
            });
        }
        match self.store.order(order).await? {
            Some(found) if &found.sale_id == sale => {}
            _ => return Ok(ReleaseOutcome::UnknownOrder),
        }
        let cancelled = self.store.cancel(order, self.clock.now(), false).await?;
        Ok(match cancelled {
            Cancel::Cancelled { order, .. } => ReleaseOutcome::Released {
                quantity: order.quantity,
                remaining: self
                    .store
                    .sale_state(sale)
                    .await?
                    .map_or(0, |state| state.remaining()),
            },
            Cancel::AlreadyCancelled(_) => ReleaseOutcome::AlreadyReleased,
            Cancel::Unknown => ReleaseOutcome::UnknownOrder,
        })
    }

    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        Ok(self.store.sale_state(sale).await?.map(|state| state.epoch))
    }

    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        Err(nothing_to_rebuild(sale))
    }

    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        let now = self.clock.now();
        Ok(self.store.sale_state(sale).await?.map(|state| {
            let remaining = state.sku_remaining();
            SaleSnapshot::at(state.spec, &remaining, now)
        }))
    }

    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        let mut conn = self.store.pool.acquire().await.map_err(StoreError::from)?;
        let held = read_holdings(&mut conn, sale, &[user]).await?;
        Ok(held.get(user).map_or(0, |held| held.total))
    }

    /// Always empty: every order it accepted is committed.
    async fn outbox(&self, _sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        Ok(Vec::new())
    }

    /// Nothing to remove: the outbox is always empty.
    async fn acknowledge(&self, _sale: &SaleId, _orders: &[OrderId]) -> Result<(), EngineError> {
        Ok(())
    }

    async fn rebuild(
        &self,
        spec: &SaleSpec,
        _epoch: Epoch,
        _orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError> {
        Err(nothing_to_rebuild(spec.id()))
    }

    /// The store keeps every sale's orders: nothing to let go.
    async fn retire(&self, _sale: &SaleId, _after: Duration) -> Result<(), EngineError> {
        Ok(())
    }
}
