//! `pg-conditional`: no explicit lock. One statement decrements the stock
//! only if an item is left (`UPDATE ... WHERE remaining >= 1`) and inserts
//! the order in the same CTE; the unique index on (sale, buyer) refuses a
//! second order, which rolls the whole statement back, decrement included.
//! One round trip and one implicit transaction per purchase; the row is
//! still locked by the update, but only for the statement and its commit.

use async_trait::async_trait;
use sqlx::PgPool;

use super::pg_schema;
use super::{Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification};

const PURCHASE: &str = "\
WITH taken AS (
    UPDATE stockade_bench_sales SET remaining = remaining - 1
     WHERE id = $1 AND remaining >= 1
    RETURNING id
)
INSERT INTO stockade_bench_orders (sale_id, user_id, quantity)
SELECT taken.id, $2, 1 FROM taken
RETURNING id";

/// One conditional update plus the order insert.
pub struct PgConditional {
    url: String,
    pool: PgPool,
    sale: String,
}

impl PgConditional {
    /// Connects a pool of `pool_size` connections to the database at `url`.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StrategyError> {
        Ok(Self {
            url: url.to_owned(),
            pool: pg_schema::connect_pool(url, pool_size).await?,
            sale: String::new(),
        })
    }
}

#[async_trait]
impl Purchaser for PgConditional {
    async fn purchase(&self, buyer: &str) -> Answer {
        let order: Result<Option<i64>, _> = sqlx::query_scalar(PURCHASE)
            .bind(&self.sale)
            .bind(buyer)
            .fetch_optional(&self.pool)
            .await;
        match order {
            Ok(Some(_)) => Answer::Purchased,
            Ok(None) => Answer::SoldOut,
            Err(error) if pg_schema::is_unique_violation(&error) => Answer::AlreadyPurchased,
            Err(error) => Answer::Failed(error.to_string()),
        }
    }
}

#[async_trait]
impl Strategy for PgConditional {
    fn kind(&self) -> StrategyKind {
        StrategyKind::PgConditional
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        pg_schema::create_schema(&self.pool).await?;
        pg_schema::create_sale(&self.pool, &sale.id, sale.stock).await?;
        pg_schema::prepare_everywhere(&self.pool, &[PURCHASE]).await?;
        self.sale = sale.id.clone();
        Ok(())
    }

    async fn settle(&self) -> Result<(), StrategyError> {
        pg_schema::flush_statistics(&self.pool).await
    }

    async fn finish(&self) {
        self.pool.close().await;
    }

    async fn verify(&self) -> Result<Verification, StrategyError> {
        pg_schema::verify(&self.url, &self.sale).await
    }
}
