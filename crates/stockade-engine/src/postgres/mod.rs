//! The PostgreSQL engine: the "database lock" strategy of the founding
//! articles, made correct and as cheap as it can be. Each purchase is one
//! call of `engine_purchase` (see `migrations/postgres/`): one transaction
//! that locks the sale row with `SELECT ... FOR UPDATE`, checks everything,
//! decrements the stock and inserts the order, in a single round trip, so
//! the row lock is held for microseconds of server time rather than for
//! several client round trips.
//!
//! A buyer who will be turned away (sold out, over the limit, outside the
//! window, a replayed key) is answered from an unlocked snapshot first: no
//! row lock, no transaction id, no WAL flush. Only a purchase that looks
//! possible takes the lock, and every check is repeated under it.
//!
//! Purchases of one sale that queue behind a call in flight are decided
//! together by `engine_purchase_batch` ([`crate::batching`]): the same
//! `engine_purchase` for each, in arrival order, in one transaction, so a
//! crowd's orders share commits instead of paying a WAL flush each.
//!
//! It is the baseline of the benchmarks and a library engine for
//! deployments without Redis.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};
use stockade_core::{
    Clock, CreateOutcome, Engine, EngineError, Epoch, Order, OrderId, Purchase, PurchaseOutcome,
    RebuildPlan, ReleaseOutcome, SaleId, SaleSnapshot, SaleSpec, UserId,
};
use uuid::Uuid;

use crate::batching::{BatchRunner, BatchedPurchase, Batcher, batch_span};
use crate::codes;
use tracing::Instrument as _;

/// At most this many purchases of one sale per `engine_purchase_batch` call.
const MAX_BATCH: usize = 256;

/// The engine's schema migrations (tables `engine_sales`, `engine_orders`
/// and the functions `engine_purchase`, `engine_release`).
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    // Other parts of Stockade keep their own migrations in the same
    // database: do not fail on versions this migrator does not know.
    migrator.set_ignore_missing(true);
    migrator
}

/// Sales held in PostgreSQL.
#[derive(Clone)]
pub struct PostgresEngine {
    pool: PgPool,
    clock: Arc<dyn Clock>,
    purchases: Arc<Batcher<(SaleId, Epoch), BatchedPurchase, PurchaseOutcome>>,
    purchase_function: Arc<PurchaseFunction>,
}

impl std::fmt::Debug for PostgresEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresEngine")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

/// Calls `engine_purchase_batch` for a batch of one sale under one epoch.
struct PurchaseFunction {
    pool: PgPool,
    clock: Arc<dyn Clock>,
}

impl BatchRunner<(SaleId, Epoch), BatchedPurchase, PurchaseOutcome> for PurchaseFunction {
    async fn run(
        &self,
        key: &(SaleId, Epoch),
        purchases: Vec<BatchedPurchase>,
    ) -> Result<Vec<PurchaseOutcome>, EngineError> {
        let span = batch_span(
            "postgres",
            "engine_purchase_batch",
            &key.0,
            key.1,
            &purchases,
        );
        self.call(key, purchases).instrument(span).await
    }
}

impl PurchaseFunction {
    /// One engine_purchase_batch call for the batch.
    async fn call(
        &self,
        (sale, epoch): &(SaleId, Epoch),
        purchases: Vec<BatchedPurchase>,
    ) -> Result<Vec<PurchaseOutcome>, EngineError> {
        let users: Vec<&str> = purchases.iter().map(|p| p.user.as_str()).collect();
        let quantities: Vec<i32> = purchases
            .iter()
            .map(|p| i32::try_from(p.quantity).unwrap_or(i32::MAX))
            .collect();
        let keys: Vec<Option<&str>> = purchases
            .iter()
            .map(|p| p.key.as_ref().map(|k| k.as_str()))
            .collect();
        let orders: Vec<Uuid> = purchases.iter().map(|p| p.order_id.as_uuid()).collect();
        let rows: Vec<(i32, i64, Option<Uuid>)> = sqlx::query_as(
            "SELECT code, value, order_id \
               FROM engine_purchase_batch($1, $2, $3, $4, $5, $6, $7) WITH ORDINALITY \
              ORDER BY ordinality",
        )
        .bind(sale.as_str())
        .bind(epoch.as_i64())
        .bind(self.clock.now())
        .bind(&users)
        .bind(&quantities)
        .bind(&keys)
        .bind(&orders)
        .fetch_all(&self.pool)
        .await
        .map_err(sql_error)?;
        rows.into_iter()
            .zip(&purchases)
            .map(|((code, value, original), purchase)| {
                codes::purchase(
                    code.into(),
                    value,
                    original.map(OrderId::from_uuid),
                    purchase.order_id,
                    "engine_purchase_batch",
                )
            })
            .collect()
    }
}

impl PostgresEngine {
    /// Connects with a pool of `max_connections`, and runs the migrations.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(sql_error)?;
        Self::with_pool(pool, clock).await
    }

    /// Uses an existing pool, and runs the migrations.
    pub async fn with_pool(pool: PgPool, clock: Arc<dyn Clock>) -> Result<Self, EngineError> {
        migrator()
            .run(&pool)
            .await
            .map_err(|e| EngineError::backend(format!("running engine migrations: {e}")))?;
        Ok(Self {
            purchase_function: Arc::new(PurchaseFunction {
                pool: pool.clone(),
                clock: Arc::clone(&clock),
            }),
            purchases: Arc::new(Batcher::new(MAX_BATCH)),
            pool,
            clock,
        })
    }

    /// Runs `sql` (one `$1` = the sale id) that returns the sale's epoch
    /// in one row, or no row for an unknown sale.
    async fn sale_epoch(&self, sql: &str, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        let held: Option<(i64,)> = sqlx::query_as(sql)
            .bind(sale.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(sql_error)?;
        held.map(|(epoch,)| codes::epoch(epoch, "engine_sales"))
            .transpose()
    }

    /// The connection pool, for tools that inspect the engine's tables.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Sorts a database error into "retry later" and "will not get better".
fn sql_error(error: sqlx::Error) -> EngineError {
    match error {
        sqlx::Error::PoolTimedOut => EngineError::Timeout(error.to_string()),
        sqlx::Error::Io(_) | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => {
            EngineError::Unavailable(Box::new(error))
        }
        sqlx::Error::Database(ref db)
            if db.code().is_some_and(|c| {
                // 57P01 admin shutdown, 57P03 cannot connect now, 53300 too
                // many connections, 40001/40P01 serialization/deadlock.
                ["57P01", "57P03", "53300", "40001", "40P01"].contains(&c.as_ref())
            }) =>
        {
            EngineError::Unavailable(Box::new(error))
        }
        other => EngineError::Backend(Box::new(other)),
    }
}

fn to_u32(value: i32, what: &str) -> Result<u32, EngineError> {
    codes::count(value.into(), what, "PostgreSQL")
}

fn spec_from_row(row: &sqlx::postgres::PgRow) -> Result<SaleSpec, EngineError> {
    let id: String = row.try_get("id").map_err(sql_error)?;
    let total: i32 = row.try_get("total_stock").map_err(sql_error)?;
    let limit: i32 = row.try_get("per_user_limit").map_err(sql_error)?;
    let starts: Option<DateTime<Utc>> = row.try_get("starts_at").map_err(sql_error)?;
    let ends: Option<DateTime<Utc>> = row.try_get("ends_at").map_err(sql_error)?;
    let hold_ms: Option<i64> = row.try_get("hold_ms").map_err(sql_error)?;
    let corrupt = |e: stockade_core::ValidationError| {
        EngineError::backend(format!("sale {id} in PostgreSQL is invalid: {e}"))
    };
    let mut builder = SaleSpec::builder(id.clone(), to_u32(total, "total_stock")?)
        .and_then(|b| b.per_user_limit(limit.max(0) as u32))
        .map_err(corrupt)?;
    if let Some(start) = starts {
        builder = builder.starts_at(start);
    }
    if let Some(end) = ends {
        builder = builder.ends_at(end);
    }
    if let Some(ms) = hold_ms {
        builder = builder
            .hold(Duration::from_millis(ms.max(0) as u64))
            .map_err(corrupt)?;
    }
    builder.build().map_err(corrupt)
}

const SALE_COLUMNS: &str =
    "id, total_stock, remaining, per_user_limit, starts_at, ends_at, hold_ms";

/// Inserts the sale if it does not exist (returns whether it did).
async fn insert_sale(
    tx: &mut Transaction<'_, Postgres>,
    spec: &SaleSpec,
    remaining: u32,
) -> Result<bool, EngineError> {
    let inserted = sqlx::query(
        "INSERT INTO engine_sales
             (id, total_stock, remaining, per_user_limit, starts_at, ends_at, hold_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(spec.id().as_str())
    .bind(spec.total_stock() as i32)
    .bind(remaining as i32)
    .bind(spec.per_user_limit() as i32)
    .bind(spec.starts_at())
    .bind(spec.ends_at())
    .bind(spec.hold().map(|d| d.as_millis() as i64))
    .execute(&mut **tx)
    .await
    .map_err(sql_error)?;
    Ok(inserted.rows_affected() == 1)
}

#[async_trait]
impl Engine for PostgresEngine {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn create_sale(&self, spec: &SaleSpec) -> Result<CreateOutcome, EngineError> {
        let mut tx = self.pool.begin().await.map_err(sql_error)?;
        if insert_sale(&mut tx, spec, spec.total_stock()).await? {
            tx.commit().await.map_err(sql_error)?;
            return Ok(CreateOutcome::Created);
        }
        let row = sqlx::query(&format!(
            "SELECT {SALE_COLUMNS} FROM engine_sales WHERE id = $1"
        ))
        .bind(spec.id().as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(sql_error)?;
        tx.commit().await.map_err(sql_error)?;
        CreateOutcome::for_existing(spec, spec_from_row(&row)?)
    }

    async fn purchase(&self, purchase: &Purchase) -> Result<PurchaseOutcome, EngineError> {
        self.purchases
            .submit(
                (purchase.sale_id().clone(), purchase.epoch()),
                BatchedPurchase::new(purchase),
                &self.purchase_function,
            )
            .await
    }

    async fn release(
        &self,
        sale: &SaleId,
        order: OrderId,
        epoch: Epoch,
    ) -> Result<ReleaseOutcome, EngineError> {
        let (code, quantity, remaining): (i32, i32, i64) =
            sqlx::query_as("SELECT code, quantity, remaining FROM engine_release($1, $2, $3)")
                .bind(sale.as_str())
                .bind(order.as_uuid())
                .bind(epoch.as_i64())
                .fetch_one(&self.pool)
                .await
                .map_err(sql_error)?;
        codes::release(code.into(), quantity.into(), remaining, "engine_release")
    }

    async fn epoch(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        self.sale_epoch("SELECT epoch FROM engine_sales WHERE id = $1", sale)
            .await
    }

    async fn close(&self, sale: &SaleId) -> Result<Option<Epoch>, EngineError> {
        self.sale_epoch(
            "UPDATE engine_sales s SET epoch = 0
               FROM (SELECT id, epoch FROM engine_sales WHERE id = $1 FOR UPDATE) old
              WHERE s.id = old.id
          RETURNING old.epoch",
            sale,
        )
        .await
    }

    async fn snapshot(&self, sale: &SaleId) -> Result<Option<SaleSnapshot>, EngineError> {
        let row = sqlx::query(&format!(
            "SELECT {SALE_COLUMNS} FROM engine_sales WHERE id = $1"
        ))
        .bind(sale.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(sql_error)?;
        let Some(row) = row else { return Ok(None) };
        let remaining: i32 = row.try_get("remaining").map_err(sql_error)?;
        Ok(Some(SaleSnapshot::at(
            spec_from_row(&row)?,
            to_u32(remaining, "remaining")?,
            self.clock.now(),
        )))
    }

    async fn purchased_by(&self, sale: &SaleId, user: &UserId) -> Result<u32, EngineError> {
        let (held,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(quantity), 0)::bigint FROM engine_orders
              WHERE sale_id = $1 AND user_id = $2 AND live",
        )
        .bind(sale.as_str())
        .bind(user.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(sql_error)?;
        u32::try_from(held).map_err(EngineError::backend)
    }

    async fn outbox(&self, sale: &SaleId) -> Result<Vec<Order>, EngineError> {
        let rows: Vec<(Uuid, String, i32, Option<String>, DateTime<Utc>, i64)> = sqlx::query_as(
            "SELECT id, user_id, quantity, idempotency_key, created_at, epoch FROM engine_orders
              WHERE sale_id = $1 AND live AND NOT acknowledged
              ORDER BY id",
        )
        .bind(sale.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(sql_error)?;
        rows.into_iter()
            .map(|(id, user, quantity, key, created_at, epoch)| {
                let corrupt = |e: stockade_core::ValidationError| {
                    EngineError::backend(format!("order {id} in PostgreSQL is invalid: {e}"))
                };
                Ok(Order {
                    id: OrderId::from_uuid(id),
                    sale_id: sale.clone(),
                    user_id: UserId::new(user).map_err(corrupt)?,
                    quantity: to_u32(quantity, "quantity")?,
                    idempotency_key: key
                        .map(stockade_core::IdempotencyKey::new)
                        .transpose()
                        .map_err(corrupt)?,
                    // The order store gives it the sale's payment hold.
                    status: stockade_core::OrderStatus::Confirmed,
                    created_at,
                    expires_at: None,
                    epoch: codes::epoch(epoch, "engine_orders")?,
                })
            })
            .collect()
    }

    async fn acknowledge(&self, sale: &SaleId, orders: &[OrderId]) -> Result<(), EngineError> {
        let ids: Vec<Uuid> = orders.iter().map(OrderId::as_uuid).collect();
        sqlx::query(
            "UPDATE engine_orders SET acknowledged = true
              WHERE sale_id = $1 AND id = ANY($2) AND NOT acknowledged",
        )
        .bind(sale.as_str())
        .bind(&ids)
        .execute(&self.pool)
        .await
        .map_err(sql_error)?;
        Ok(())
    }

    async fn rebuild(
        &self,
        spec: &SaleSpec,
        epoch: Epoch,
        orders: &[Order],
    ) -> Result<SaleSnapshot, EngineError> {
        let plan = RebuildPlan::new(spec, orders)?;
        let mut tx = self.pool.begin().await.map_err(sql_error)?;
        insert_sale(&mut tx, spec, plan.remaining).await?;
        // Lock the row; refuse a rebuild older than one already run.
        let (newest,): (i64,) =
            sqlx::query_as("SELECT newest FROM engine_sales WHERE id = $1 FOR UPDATE")
                .bind(spec.id().as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(sql_error)?;
        let newest = codes::epoch(newest, "engine_sales")?;
        if newest > epoch {
            return Err(EngineError::Superseded {
                sale_id: spec.id().clone(),
                epoch,
                newer: newest,
            });
        }
        // Then replace spec, stock, epoch and orders together.
        sqlx::query(
            "UPDATE engine_sales SET total_stock = $2, remaining = $3, per_user_limit = $4,
                    starts_at = $5, ends_at = $6, hold_ms = $7, epoch = $8, newest = $8
              WHERE id = $1",
        )
        .bind(spec.id().as_str())
        .bind(spec.total_stock() as i32)
        .bind(plan.remaining as i32)
        .bind(spec.per_user_limit() as i32)
        .bind(spec.starts_at())
        .bind(spec.ends_at())
        .bind(spec.hold().map(|d| d.as_millis() as i64))
        .bind(epoch.as_i64())
        .execute(&mut *tx)
        .await
        .map_err(sql_error)?;
        sqlx::query("DELETE FROM engine_orders WHERE sale_id = $1")
            .bind(spec.id().as_str())
            .execute(&mut *tx)
            .await
            .map_err(sql_error)?;
        let ids: Vec<Uuid> = orders.iter().map(|o| o.id.as_uuid()).collect();
        let users: Vec<&str> = orders.iter().map(|o| o.user_id.as_str()).collect();
        let quantities: Vec<i32> = orders.iter().map(|o| o.quantity as i32).collect();
        let keys: Vec<Option<&str>> = orders
            .iter()
            .map(|o| o.idempotency_key.as_ref().map(|k| k.as_str()))
            .collect();
        let live: Vec<bool> = orders.iter().map(|o| o.status.holds_stock()).collect();
        let created: Vec<DateTime<Utc>> = orders.iter().map(|o| o.created_at).collect();
        sqlx::query(
            "INSERT INTO engine_orders
                    (id, sale_id, user_id, quantity, idempotency_key, live, created_at, acknowledged)
             SELECT id, $1, user_id, quantity, key, live, created_at, true
               FROM unnest($2::uuid[], $3::text[], $4::int[], $5::text[], $6::bool[], $7::timestamptz[])
                    AS t(id, user_id, quantity, key, live, created_at)",
        )
        .bind(spec.id().as_str())
        .bind(&ids)
        .bind(&users)
        .bind(&quantities)
        .bind(&keys)
        .bind(&live)
        .bind(&created)
        .execute(&mut *tx)
        .await
        .map_err(sql_error)?;
        tx.commit().await.map_err(sql_error)?;
        Ok(SaleSnapshot::at(
            spec.clone(),
            plan.remaining,
            self.clock.now(),
        ))
    }
}
