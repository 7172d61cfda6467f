//! `stockade-memory`, `stockade-redis`, `stockade-postgres`: Stockade's own
//! engines, driven through the [`Engine`] contract exactly as the service
//! drives them (one purchase call per request, per-user limit 1). On
//! PostgreSQL the engine is the order store deciding itself
//! ([`StoreEngine`], as `--engine postgres` runs it): each purchase is
//! committed in the store's own tables before it is answered.

use std::sync::Arc;

use async_trait::async_trait;
use stockade_core::{
    Engine, OrderStatus, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock,
};
use stockade_engine::redis::SaleKeys;

use crate::scenario::skus;
use stockade_engine::{MemoryEngine, RedisEngine, RedisEngineConfig};
use stockade_store::{OrderStore, StoreEngine};

use super::{
    Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification, pg_schema,
};

/// Purchases made on a separate sale before the run, so that scripts are
/// loaded and statements prepared on the connections the run will use.
const WARM_UP_PURCHASES: u32 = 64;
/// The most orders read back from an engine's outbox to check them (the
/// Redis engine's outbox is counted on the server instead, at any size).
const MAX_OUTBOX_READ: u32 = 200_000;
/// The Redis engine's key prefix in the bench.
const ENGINE_PREFIX: &str = "stockade-bench:engine:";
/// Orders read back from the store per page, to check them.
const ORDERS_PAGE: u32 = 10_000;

/// One of Stockade's engines.
pub struct EngineStrategy {
    kind: StrategyKind,
    engine: Arc<dyn Engine>,
    /// The store engine's database, to read the sale back from.
    postgres: Option<String>,
    /// The store engine's store, closed once the run is over.
    store: Option<OrderStore>,
    /// The Redis engine's server, to count its outbox stream.
    redis_url: Option<String>,
    sale: Option<SaleId>,
    /// SKUs of the sale ([`skus`]).
    skus: u32,
}

impl EngineStrategy {
    /// The in-memory engine.
    pub fn memory() -> Self {
        Self {
            kind: StrategyKind::StockadeMemory,
            engine: Arc::new(MemoryEngine::new(Arc::new(SystemClock))),
            postgres: None,
            store: None,
            redis_url: None,
            sale: None,
            skus: 1,
        }
    }

    /// The Redis engine on `url` (one shared multiplexed connection, as the
    /// engine always runs), its keys under the bench's prefix.
    pub async fn redis(url: &str) -> Result<Self, StrategyError> {
        let config = RedisEngineConfig::new(url).key_prefix(ENGINE_PREFIX);
        let engine = RedisEngine::connect(&config, Arc::new(SystemClock)).await?;
        Ok(Self {
            kind: StrategyKind::StockadeRedis,
            engine: Arc::new(engine),
            postgres: None,
            store: None,
            redis_url: Some(url.to_owned()),
            sale: None,
            skus: 1,
        })
    }

    /// The order store deciding itself ([`StoreEngine`]) on the database
    /// at `url`, with the store's own pool (16 connections: `--pool-size`
    /// does not apply), its sessions named as the bench's (see
    /// `pg_schema::APPLICATION_NAME`) so the run's transactions are
    /// counted.
    pub async fn postgres(url: &str) -> Result<Self, StrategyError> {
        let store = OrderStore::open(&pg_schema::with_application_name(url)).await?;
        Ok(Self {
            kind: StrategyKind::StockadePostgres,
            engine: Arc::new(StoreEngine::new(store.clone(), Arc::new(SystemClock))),
            postgres: Some(url.to_owned()),
            store: Some(store),
            redis_url: None,
            sale: None,
            skus: 1,
        })
    }

    async fn create(&self, id: &str, stock: u32, skus: u32) -> Result<SaleId, StrategyError> {
        let spec = SaleSpec::with_skus(id, skus::specs(stock, skus))
            .and_then(|builder| builder.build())
            .map_err(|e| StrategyError::Other(format!("sale {id}: {e}")))?;
        self.engine.create_sale(&spec).await?;
        Ok(spec.id().clone())
    }
}

#[async_trait]
impl Purchaser for EngineStrategy {
    async fn purchase(&self, buyer: &str) -> Answer {
        let sale = self.sale.as_ref().expect("setup runs before purchases");
        let purchase = match skus::of_buyer(buyer, self.skus) {
            None => Purchase::new(sale.as_str(), buyer, 1),
            Some(sku) => Purchase::of_sku(sale.as_str(), buyer, sku, 1),
        };
        let purchase = match purchase {
            Ok(purchase) => purchase,
            Err(error) => return Answer::Failed(format!("invalid purchase: {error}")),
        };
        match self.engine.purchase(&purchase).await {
            Ok(PurchaseOutcome::Purchased { .. }) => Answer::Purchased,
            Ok(PurchaseOutcome::SoldOut | PurchaseOutcome::InsufficientStock { .. }) => {
                Answer::SoldOut
            }
            Ok(PurchaseOutcome::LimitExceeded { .. }) => Answer::AlreadyPurchased,
            Ok(other) => Answer::Failed(format!("unexpected answer {}", other.label())),
            Err(error) => Answer::Failed(error.to_string()),
        }
    }
}

#[async_trait]
impl Strategy for EngineStrategy {
    fn kind(&self) -> StrategyKind {
        self.kind
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        let warm_up = self
            .create(&format!("{}-warmup", sale.id), WARM_UP_PURCHASES, 1)
            .await?;
        let purchases = (0..WARM_UP_PURCHASES).map(|n| {
            let engine = Arc::clone(&self.engine);
            let purchase = Purchase::new(warm_up.as_str(), format!("warm-up-{n}"), 1);
            async move {
                let purchase =
                    purchase.map_err(|e| StrategyError::Other(format!("warm-up: {e}")))?;
                engine.purchase(&purchase).await?;
                Ok::<_, StrategyError>(())
            }
        });
        let handles: Vec<_> = purchases.map(tokio::spawn).collect();
        for handle in handles {
            handle
                .await
                .map_err(|e| StrategyError::Other(format!("warm-up task: {e}")))??;
        }
        self.skus = sale.skus;
        self.sale = Some(self.create(&sale.id, sale.stock, sale.skus).await?);
        Ok(())
    }

    /// The store's sessions report the set-up's transactions now.
    async fn settle(&self) -> Result<(), StrategyError> {
        if let Some(store) = &self.store {
            store.flush_statistics().await?;
        }
        Ok(())
    }

    /// Closes the store's pool: its sessions end and report the run's
    /// transactions at once (`verify` reads through a new pool).
    async fn finish(&self) {
        if let Some(store) = &self.store {
            store.close().await;
        }
    }

    async fn verify(&self) -> Result<Verification, StrategyError> {
        let sale = self.sale.as_ref().expect("setup runs before verify");
        // The run's sessions are ended by now: read the store through a
        // new pool.
        let store = match &self.postgres {
            Some(url) => Some(OrderStore::open(url).await?),
            None => None,
        };
        let engine: Arc<dyn Engine> = match &store {
            Some(store) => Arc::new(StoreEngine::new(store.clone(), Arc::new(SystemClock))),
            None => Arc::clone(&self.engine),
        };
        let snapshot = engine
            .snapshot(sale)
            .await?
            .ok_or_else(|| StrategyError::Other(format!("the sale {sale} vanished")))?;
        // An account independent of the stock counter: on Redis, every
        // accepted order has a record in the sale's orders hash (and one of
        // the outbox's per-batch entries; nothing acknowledges them during
        // a bench); the store holds every order it accepted; the memory
        // engine's outbox holds them all.
        let recorded_orders = if let Some(url) = &self.redis_url {
            let keys = SaleKeys::new(ENGINE_PREFIX, sale);
            let mut conn = redis::Client::open(url.as_str())?
                .get_multiplexed_async_connection()
                .await?;
            let records: u64 = redis::cmd("HLEN")
                .arg(&keys.orders)
                .query_async(&mut conn)
                .await?;
            Some(records)
        } else if let Some(store) = &store {
            Some(live_items_in_store(store, sale).await?)
        } else if snapshot.sold <= MAX_OUTBOX_READ {
            let outbox = engine.outbox(sale).await?;
            Some(outbox.iter().map(|order| u64::from(order.quantity)).sum())
        } else {
            // Too many to read back at once: the stock counter is checked,
            // the order record is not.
            None
        };
        Ok(Verification {
            remaining: i64::from(snapshot.remaining),
            recorded_orders,
            lowest_stock_seen: None,
        })
    }
}

/// Items of the sale's live (confirmed or held) orders in the store.
async fn live_items_in_store(store: &OrderStore, sale: &SaleId) -> Result<u64, StrategyError> {
    let mut items = 0;
    let mut after = None;
    loop {
        let page = store.orders_of_sale(sale, after, ORDERS_PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(items);
        };
        after = Some(last.id);
        items += page
            .iter()
            .filter(|order| matches!(order.status, OrderStatus::Confirmed | OrderStatus::Held))
            .map(|order| u64::from(order.quantity))
            .sum::<u64>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::redis_keys::PREFIX;

    #[test]
    fn the_engines_keys_are_under_the_bench_prefix() {
        // A run on a named Redis removes exactly the keys under PREFIX.
        assert!(ENGINE_PREFIX.starts_with(PREFIX));
    }
}
