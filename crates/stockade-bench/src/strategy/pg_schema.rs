//! What the PostgreSQL strategies share: the bench's tables
//! (`sql/bench_schema.sql`), a warm connection pool that PostgreSQL can
//! tell apart from everyone else's (its `application_name`, which the
//! order store's pool gets from its URL), and the step that makes
//! PostgreSQL's transaction counters current.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};

use super::{StrategyError, Verification};

/// The bench's tables, created if missing.
const SCHEMA: &str = include_str!("../../sql/bench_schema.sql");

/// How long a request may wait for a pooled connection. Long: in a burst,
/// thousands of requests queue for the pool, and the queueing is part of
/// what is measured, not an error.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(600);

/// The `application_name` of every connection a strategy opens, so the
/// bench can wait for exactly its own sessions to end.
pub static APPLICATION_NAME: LazyLock<String> =
    LazyLock::new(|| format!("stockade-bench-{}", std::process::id()));

/// `url` with the bench's [`APPLICATION_NAME`], for a pool the bench does
/// not open itself (the order store's), unless it names one already.
pub fn with_application_name(url: &str) -> String {
    if url.contains("application_name=") {
        return url.to_owned();
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={}", *APPLICATION_NAME)
}

/// Opens a pool of `size` connections to `url`, all connected on return.
pub async fn connect_pool(url: &str, size: u32) -> Result<PgPool, StrategyError> {
    let options: PgConnectOptions = url.parse()?;
    // No `min_connections`: its background top-up could open connections
    // while the pool is being closed, and their transactions would then
    // escape the count. The pool is filled by hand below instead.
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // A warm service does not ping before every query.
        .test_before_acquire(false)
        .connect_with(options.application_name(&APPLICATION_NAME))
        .await?;
    let mut held = Vec::with_capacity(size as usize);
    for _ in 0..size {
        held.push(pool.acquire().await?);
    }
    Ok(pool)
}

/// Creates the bench's tables if they are missing.
pub async fn create_schema(pool: &PgPool) -> Result<(), StrategyError> {
    sqlx::raw_sql(SCHEMA).execute(pool).await?;
    Ok(())
}

/// Inserts a sale row with all its stock.
pub async fn create_sale(pool: &PgPool, id: &str, stock: u32) -> Result<(), StrategyError> {
    let stock = i32::try_from(stock).map_err(|_| StrategyError::Other("stock too large".into()))?;
    sqlx::query("INSERT INTO stockade_bench_sales (id, total, remaining) VALUES ($1, $2, $2)")
        .bind(id)
        .bind(stock)
        .execute(pool)
        .await?;
    Ok(())
}

/// Prepares `statements` on every connection of the pool, as a warm service
/// has them, so that the run's first requests do not pay for it.
pub async fn prepare_everywhere(pool: &PgPool, statements: &[&str]) -> Result<(), StrategyError> {
    let mut held = Vec::new();
    for _ in 0..pool.size() {
        held.push(pool.acquire().await?);
    }
    for conn in &mut held {
        for statement in statements {
            sqlx::Executor::prepare(&mut **conn, statement).await?;
        }
    }
    Ok(())
}

/// Makes every pooled session report its transactions to the statistics
/// system now (PostgreSQL 15+; sessions otherwise report up to seconds
/// later), so that counters read next include everything done so far.
pub async fn flush_statistics(pool: &PgPool) -> Result<(), StrategyError> {
    let mut held = Vec::new();
    for _ in 0..pool.size() {
        held.push(pool.acquire().await?);
    }
    for conn in &mut held {
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&mut **conn)
            .await?;
    }
    Ok(())
}

/// Stock left and orders recorded for the sale, over a fresh connection.
pub async fn verify(url: &str, sale: &str) -> Result<Verification, StrategyError> {
    let mut conn = PgConnection::connect(url).await?;
    let remaining: i32 =
        sqlx::query_scalar("SELECT remaining FROM stockade_bench_sales WHERE id = $1")
            .bind(sale)
            .fetch_one(&mut conn)
            .await?;
    let orders: i64 =
        sqlx::query_scalar("SELECT count(*) FROM stockade_bench_orders WHERE sale_id = $1")
            .bind(sale)
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    Ok(Verification {
        remaining: i64::from(remaining),
        recorded_orders: Some(orders.max(0) as u64),
        lowest_stock_seen: None,
    })
}

/// Whether a database error is a unique-constraint violation.
pub fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_name_joins_the_url() {
        let name = APPLICATION_NAME.as_str();
        assert_eq!(
            with_application_name("postgres://u@h/db"),
            format!("postgres://u@h/db?application_name={name}")
        );
        assert_eq!(
            with_application_name("postgres://u@h/db?sslmode=disable"),
            format!("postgres://u@h/db?sslmode=disable&application_name={name}")
        );
        let named = "postgres://u@h/db?application_name=mine";
        assert_eq!(with_application_name(named), named);
    }
}
