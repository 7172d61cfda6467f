//! Fencing enforcement in PostgreSQL (feature `postgres`).
//!
//! A lock cannot stop a holder that was paused past its lease (a long GC,
//! a stalled VM, a suspended task) from waking up and writing as if it still
//! held the lock. The storage can: every write carries the writer's
//! [`FencingToken`], the storage remembers the largest token it has accepted
//! and refuses any token that is not larger. Two ways to do that here:
//!
//! **A fence row per resource** ([`advance_fence`]), in the same transaction
//! as the protected writes. It works for any set of writes (put all the
//! writes of one tenure in that transaction), and the row lock it takes
//! makes a concurrent stale writer wait and then fail:
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool, guard: stockade_lock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
//! use stockade_lock::postgres::{advance_fence, create_fence_table};
//! create_fence_table(&pool).await?; // once, e.g. in a migration
//! let mut tx = pool.begin().await?;
//! advance_fence(&mut tx, "sale:42:stock", guard.fence()).await?; // refuses a stale token
//! sqlx::query("UPDATE stock SET remaining = remaining - 1 WHERE sale_id = 42")
//!     .execute(&mut *tx)
//!     .await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! **A fence column on the row itself**: the update only matches while the
//! stored fence is smaller than the writer's, and stores the writer's.
//! [`expect_fenced`] turns "no row matched" into [`FenceError::Stale`]:
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool, guard: stockade_lock::LockGuard) -> Result<(), Box<dyn std::error::Error>> {
//! use stockade_lock::postgres::expect_fenced;
//! let token = guard.fence();
//! let result = sqlx::query(
//!     "UPDATE documents SET body = $1, fence = $2 WHERE id = $3 AND fence < $2",
//! )
//! .bind("new body")
//! .bind(token.as_i64())
//! .bind(7_i64)
//! .execute(&pool)
//! .await?;
//! expect_fenced(&result, "documents:7", token)?;
//! # Ok(()) }
//! ```
//!
//! Both refuse a token *equal* to the stored one: strictly greater only. A
//! token is drawn once per acquisition, so an equal token can only be a
//! write that was already admitted (a retry, a duplicate delivery) or, if
//! tokens ever repeated (a counter that lagged after a failover, which the
//! lock's clock floor now prevents), another holder's: neither may pass. A
//! holder that writes several times does so in the one transaction its
//! [`advance_fence`] opened.

use sqlx::PgConnection;
use sqlx::postgres::PgQueryResult;

use crate::FencingToken;

/// The table [`advance_fence`] keeps the largest accepted token per resource in.
pub const FENCE_TABLE_DDL: &str = "CREATE TABLE IF NOT EXISTS stockade_lock_fences (
    resource TEXT PRIMARY KEY,
    fence BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// A write refused by its fence, or a database failure.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The writer's token is not larger than one already accepted: its lock
    /// was lost to a newer holder, or this token was already used. Do not
    /// retry with the same token.
    #[error(
        "stale fencing token {presented} for `{resource}`: token {} was already accepted",
        current.map_or_else(|| "(unknown)".to_owned(), |c| c.to_string())
    )]
    Stale {
        /// The fenced resource.
        resource: String,
        /// The token the write carried.
        presented: FencingToken,
        /// The largest token accepted so far, when known.
        current: Option<i64>,
    },
    /// The database failed.
    #[error("database error while checking a fencing token: {0}")]
    Database(#[from] sqlx::Error),
}

/// Creates the fence table if it does not exist.
pub async fn create_fence_table(executor: impl sqlx::PgExecutor<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(FENCE_TABLE_DDL).execute(executor).await?;
    Ok(())
}

/// Admits a write to `resource` by the holder of `token`, inside the caller's
/// transaction: stores `token` as the resource's fence if it is larger than
/// the stored one, else (smaller or equal) fails with [`FenceError::Stale`]
/// (roll back), changing nothing. The fence
/// row stays locked until the transaction ends, so writes to one resource are
/// applied in token order.
pub async fn advance_fence(
    connection: &mut PgConnection,
    resource: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    let accepted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO stockade_lock_fences (resource, fence) VALUES ($1, $2)
         ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, updated_at = now()
         WHERE stockade_lock_fences.fence < EXCLUDED.fence
         RETURNING fence",
    )
    .bind(resource)
    .bind(token.as_i64())
    .fetch_optional(&mut *connection)
    .await?;
    if accepted.is_some() {
        return Ok(());
    }
    let current: Option<i64> =
        sqlx::query_scalar("SELECT fence FROM stockade_lock_fences WHERE resource = $1")
            .bind(resource)
            .fetch_optional(&mut *connection)
            .await?;
    Err(FenceError::Stale {
        resource: resource.to_owned(),
        presented: token,
        current,
    })
}

/// For the fence-column pattern: a fenced `UPDATE` that matched no row was
/// refused by its fence (or the row does not exist).
pub fn expect_fenced(
    result: &PgQueryResult,
    resource: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    if result.rows_affected() > 0 {
        Ok(())
    } else {
        Err(FenceError::Stale {
            resource: resource.to_owned(),
            presented: token,
            current: None,
        })
    }
}
