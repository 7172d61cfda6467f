//! The store's one error type.

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or timed out: retry later.
    #[error("order store unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else: a bug, a misconfiguration, or corrupt data.
    #[error("order store failed: {0}")]
    Failed(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_) => Self::Unavailable(error),
            sqlx::Error::Database(ref db)
                if db.code().is_some_and(|c| {
                    // PostgreSQL shutting down / not accepting; SQLite busy.
                    ["57P01", "57P02", "57P03", "53300", "5", "517"].contains(&c.as_ref())
                }) =>
            {
                Self::Unavailable(error)
            }
            other => Self::Failed(other.to_string()),
        }
    }
}
