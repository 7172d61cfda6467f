//! Failed dashboard logins, kept in the store so that every instance
//! behind a load balancer counts the same failures (the throttle itself
//! is the server's `login_attempts`). Times are the caller's clock, in
//! milliseconds since the Unix epoch.

use super::{OrderStore, StoreError};

impl OrderStore {
    /// Records a failure of `client` at `at_ms`, and forgets every
    /// failure (of any client) from before `forget_before_ms`, so the
    /// table holds one window of failures.
    pub async fn record_login_failure(
        &self,
        client: &str,
        at_ms: i64,
        forget_before_ms: i64,
    ) -> Result<(), StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                sqlx::query("DELETE FROM login_failures WHERE at_ms < $1")
                    .bind(forget_before_ms)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("INSERT INTO login_failures (client, at_ms) VALUES ($1, $2)")
                    .bind(client)
                    .bind(at_ms)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            })
            .await
    }

    /// The times of `client`'s failures after `since_ms`, oldest first,
    /// at most `limit` of the latest.
    pub async fn login_failures(
        &self,
        client: &str,
        since_ms: i64,
        limit: usize,
    ) -> Result<Vec<i64>, StoreError> {
        self.calls
            .run(async {
                let mut times: Vec<i64> = sqlx::query_scalar(
                    "SELECT at_ms FROM login_failures WHERE client = $1 AND at_ms > $2
              ORDER BY at_ms DESC LIMIT $3",
                )
                .bind(client)
                .bind(since_ms)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.pool)
                .await?;
                times.reverse();
                Ok(times)
            })
            .await
    }

    /// Forgets `client`'s failures (it logged in).
    pub async fn clear_login_failures(&self, client: &str) -> Result<(), StoreError> {
        self.calls
            .run(async {
                sqlx::query("DELETE FROM login_failures WHERE client = $1")
                    .bind(client)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            })
            .await
    }
}
