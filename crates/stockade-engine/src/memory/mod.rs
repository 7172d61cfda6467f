//! The in-memory engine: the embedded default.
//!
//! Each sale is a `SaleBook` of its own, so purchases of different sales
//! never contend. Within a sale there is no mutex on the purchase path:
//! stock is an atomic counter taken with compare-and-swap (never below
//! zero), buyers' holdings and idempotency keys live in sharded maps whose
//! per-entry locks serialise only requests of the same buyer or key.
//!
//! Lock order, to stay deadlock-free: idempotency key entry, then buyer
//! entry; an order entry is never held together with a buyer entry by a
//! purchase (releases take order, then buyer).

mod book;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use stockade_core::{
    Clock, CreateOutcome, Engine, EngineError, Epoch, Judged, Order, OrderId, Purchase,
    PurchaseOutcome, RebuildPlan, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, UserId,
};

use book::SaleBook;

/// Sales held in this process's memory. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct MemoryEngine {
    sales: DashMap<SaleId, Arc<SaleBook>>,
    clock: Arc<dyn Clock>,
}

impl MemoryEngine {
    /// An empty engine reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            sales: DashMap::new(),
            clock,
        }
    }

    fn book(&self, sale: &SaleId) -> Option<Arc<SaleBook>> {
        self.sales.get(sale).map(|entry| Arc::clone(entry.value()))
    }
}

#[async_trait]
impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        let book = match self.sales.entry(spec.id().clone()) {
            dashmap::Entry::Vacant(vacant) => {
                vacant.insert(Arc::new(SaleBook::new(spec.clone())));
                return Ok(CreateOutcome::Created);
            }
            dashmap::Entry::Occupied(occupied) => Arc::clone(occupied.get()),
        };
        CreateOutcome::for_existing(spec, book.spec())
    }

    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        Ok(self.purchase_at(purchase, self.clock.now()).await?.outcome)
    }

    async fn purchase_at(
        &self,
        purchase: &Purchase,
        now: DateTime<Utc>,
    ) -> Result<Judged, EngineError> {
        let outcome = match self.book(purchase.sale_id()) {
            Some(book) => book.purchase(purchase, now),
            None => PurchaseOutcome::UnknownSale,
        };
        Ok(Judged { outcome, at: now })
    }

    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError> {
        Ok(match self.book(sale) {
            Some(book) => book.release(order, epoch),
            None => ReleaseOutcome::UnknownSale,
        })
    }

    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        Ok(self.book(sale).map(|book| book.held_epoch()))
    }

    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        Ok(self.book(sale).map(|book| book.close()))
    }

    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        Ok(self.book(sale).map(|book| book.snapshot(self.clock.now())))
    }

    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        Ok(self.book(sale).map_or(0, |book| book.held_by(user)))
    }

    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        Ok(self
            .book(sale)
            .map(|book| book.outbox())
            .unwrap_or_default())
    }

    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError> {
        if let Some(book) = self.book(sale) {
            book.acknowledge(orders);
        }
        Ok(())
    }

    async fn rebuild(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError> {
        let plan = RebuildPlan::new(spec, orders)?;
        let book = Arc::clone(
            self.sales
                .entry(spec.id().clone())
                .or_insert_with(|| Arc::new(SaleBook::new(spec.clone())))
                .value(),
        );
        book.replace(spec.clone(), epoch, plan)?;
        Ok(book.snapshot(self.clock.now()))
    }

    async fn retire(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), EngineError> {
        // No timers here: whoever retires sales calls again when it is due.
        if after.is_zero() {
            self.sales.remove(sale);
        }
        Ok(())
    }
}
