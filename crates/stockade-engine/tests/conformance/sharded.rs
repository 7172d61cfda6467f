//! The Redis engine with every sale that can be split spread over three
//! shards: the whole suite run against the sharded paths (a purchase
//! pulling stock from its shard's siblings, releases on every shard,
//! outboxes per shard, rebuilds splitting the orders by buyer).
//!
//! [`Sharded`] gives the engine each spec split over the shards (a sale of
//! several SKUs, with tiers, or of fewer items than shards stays whole) and
//! shows the scenario its specs as it made them.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use stockade_core::{
    CreateOutcome, Durability, Engine, EngineError, Epoch, Judged, Order, OrderId, Purchase,
    PurchaseOutcome, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, UserId,
};

/// Shards per sale.
pub const SHARDS: u16 = 3;

/// `inner` with every spec that can be split over [`SHARDS`] shards.
pub struct Sharded {
    pub inner: Arc<dyn Engine>,
}

fn split(spec: &SaleSpec) -> SaleSpec {
    spec.resharded(SHARDS).unwrap_or_else(|_| spec.clone())
}

impl Sharded {
    /// A sharded sale's purchase reports what its buyer's shard has left (a
    /// lower bound of the sale's stock, see `sharded_sales.rs`); the
    /// scenarios count the whole sale's, read right after.
    async fn whole(
        &self,
        purchase: &Purchase,
        outcome: PurchaseOutcome,
    ) -> Result<PurchaseOutcome, EngineError> {
        let PurchaseOutcome::Purchased { order_id, .. } = outcome else {
            return Ok(outcome);
        };
        let snapshot = self.inner.snapshot(purchase.sale_id()).await?;
        Ok(PurchaseOutcome::Purchased {
            order_id,
            remaining: snapshot.map_or(0, |s| s.remaining),
        })
    }
}

#[async_trait]
impl Engine for Sharded {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        match self.inner.create_sale(&split(spec)).await {
            // A conflict names the spec as stored: show it whole.
            Err(EngineError::SaleConflict { sale_id, existing }) => {
                Err(EngineError::SaleConflict {
                    sale_id,
                    existing: Box::new(existing.resharded(1).unwrap_or(*existing)),
                })
            }
            other => other,
        }
    }
    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        let outcome = self.inner.purchase(purchase).await?;
        self.whole(purchase, outcome).await
    }
    async fn purchase_at(
        &self,
        purchase: &Purchase,
        now: DateTime<Utc>,
    ) -> Result<Judged, EngineError> {
        let judged = self.inner.purchase_at(purchase, now).await?;
        Ok(Judged {
            outcome: self.whole(purchase, judged.outcome).await?,
            at: judged.at,
        })
    }
    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError> {
        self.inner.release(sale, order, epoch).await
    }
    async fn release_many(
        &self,
        sale: &SaleId,
        releases: &[(OrderId, Epoch)],
    ) -> Result<Vec<ReleaseOutcome>, EngineError> {
        self.inner.release_many(sale, releases).await
    }
    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        self.inner.epoch(sale).await
    }
    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        self.inner.close(sale).await
    }
    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        let snapshot = self.inner.snapshot(sale).await?;
        Ok(snapshot.map(|mut snapshot| {
            assert!(
                snapshot.spec.shards() == SHARDS || snapshot.spec.resharded(SHARDS).is_err(),
                "a sale that can be split is: {:?}",
                snapshot.spec
            );
            snapshot.spec = snapshot.spec.resharded(1).expect("one shard always fits");
            snapshot
        }))
    }
    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        self.inner.purchased_by(sale, user).await
    }
    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        self.inner.outbox(sale).await
    }
    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError> {
        self.inner.acknowledge(sale, orders).await
    }
    async fn rebuild(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError> {
        let mut snapshot = self.inner.rebuild(&split(spec), epoch, orders).await?;
        snapshot.spec = spec.clone();
        Ok(snapshot)
    }
    async fn retire(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), EngineError> {
        self.inner.retire(sale, after).await
    }
}
