//! `pg-for-update`: the founding articles' database-lock baseline, run from
//! the client as JPA runs it: a transaction that locks the sale row with
//! `SELECT ... FOR UPDATE`, checks whether the buyer already bought and
//! whether stock is left, decrements, inserts the order and commits. Six
//! round trips (BEGIN, lock, check, update, insert, COMMIT), four of them
//! while holding the row lock that every other buyer of the sale waits for.

use async_trait::async_trait;
use sqlx::PgPool;

use super::pg_schema;
use super::{Answer, Purchaser, SaleSetup, Strategy, StrategyError, StrategyKind, Verification};

const LOCK: &str = "SELECT remaining FROM stockade_bench_sales WHERE id = $1 FOR UPDATE";
const BOUGHT: &str =
    "SELECT EXISTS (SELECT 1 FROM stockade_bench_orders WHERE sale_id = $1 AND user_id = $2)";
const DECREMENT: &str = "UPDATE stockade_bench_sales SET remaining = remaining - 1 WHERE id = $1";
const INSERT: &str =
    "INSERT INTO stockade_bench_orders (sale_id, user_id, quantity) VALUES ($1, $2, 1)";

/// Row lock held across client round trips.
pub struct PgForUpdate {
    url: String,
    pool: PgPool,
    sale: String,
}

impl PgForUpdate {
    /// Connects a pool of `pool_size` connections to the database at `url`.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, StrategyError> {
        Ok(Self {
            url: url.to_owned(),
            pool: pg_schema::connect_pool(url, pool_size).await?,
            sale: String::new(),
        })
    }

    async fn decide(&self, buyer: &str) -> Result<Answer, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let remaining: i32 = sqlx::query_scalar(LOCK)
            .bind(&self.sale)
            .fetch_one(&mut *tx)
            .await?;
        let bought: bool = sqlx::query_scalar(BOUGHT)
            .bind(&self.sale)
            .bind(buyer)
            .fetch_one(&mut *tx)
            .await?;
        if bought {
            tx.rollback().await?;
            return Ok(Answer::AlreadyPurchased);
        }
        if remaining < 1 {
            tx.rollback().await?;
            return Ok(Answer::SoldOut);
        }
        sqlx::query(DECREMENT)
            .bind(&self.sale)
            .execute(&mut *tx)
            .await?;
        sqlx::query(INSERT)
            .bind(&self.sale)
            .bind(buyer)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Answer::Purchased)
    }
}

#[async_trait]
impl Purchaser for PgForUpdate {
    async fn purchase(&self, buyer: &str) -> Answer {
        match self.decide(buyer).await {
            Ok(answer) => answer,
            // The row lock makes the duplicate check exact; the unique index
            // is only a backstop, but if it fires, say what it was.
            Err(error) if pg_schema::is_unique_violation(&error) => Answer::AlreadyPurchased,
            Err(error) => Answer::Failed(error.to_string()),
        }
    }
}

#[async_trait]
impl Strategy for PgForUpdate {
    fn kind(&self) -> StrategyKind {
        StrategyKind::PgForUpdate
    }

    async fn setup(&mut self, sale: &SaleSetup) -> Result<(), StrategyError> {
        pg_schema::create_schema(&self.pool).await?;
        pg_schema::create_sale(&self.pool, &sale.id, sale.stock).await?;
        pg_schema::prepare_everywhere(&self.pool, &[LOCK, BOUGHT, DECREMENT, INSERT]).await?;
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
