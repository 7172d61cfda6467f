//! PostgreSQL's transactions from `pg_stat_database`, read by a monitor
//! that keeps its own statements out of the count.

use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, Row};

use crate::strategy::StrategyError;
use crate::strategy::pg_schema::APPLICATION_NAME;

/// How long to wait for the strategy's sessions to end after the run
/// before ending them (an sqlx pool that is closed can, rarely, leave a
/// session or two open).
const SESSIONS_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for them in all.
const SESSIONS_END_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the bench's database is, and where to watch it from.
#[derive(Debug, Clone)]
pub struct DatabaseTarget {
    /// The database the strategy uses.
    pub url: String,
    /// Another database on the same server to read counters from, if known.
    pub monitor_url: Option<String>,
}

/// A reading of the bench database's transaction counter.
#[derive(Debug, Clone, Copy)]
pub struct TransactionReading {
    transactions: u64,
    /// The monitor's own statements before this reading.
    own_before: u64,
}

/// Reads PostgreSQL's transaction counters for one database.
pub struct PgMonitor {
    conn: PgConnection,
    database: String,
    /// Whether the monitor sits in the bench's database (its own
    /// transactions are then counted there, and subtracted).
    same_database: bool,
    /// Whether this session may force its statistics out at once.
    can_flush: bool,
    own_statements: u64,
}

impl PgMonitor {
    /// Connects to `target.monitor_url` if it can, else to the bench's
    /// database itself.
    pub async fn connect(target: &DatabaseTarget) -> Result<Self, StrategyError> {
        let options: PgConnectOptions = target.url.parse()?;
        let database = options
            .get_database()
            .map(str::to_owned)
            // PostgreSQL's default database is named after the user.
            .unwrap_or_else(|| options.get_username().to_owned());
        let elsewhere = match &target.monitor_url {
            Some(url) => PgConnection::connect(url).await.ok(),
            None => None,
        };
        let (conn, same_database) = match elsewhere {
            Some(conn) => (conn, false),
            None => (PgConnection::connect(&target.url).await?, true),
        };
        let mut monitor = Self {
            conn,
            database,
            same_database,
            can_flush: true,
            own_statements: 0,
        };
        if same_database {
            // Find out whether this role may force its statistics out; a
            // refusal is remembered and the reading becomes approximate.
            monitor.own_statements += 1;
            monitor.can_flush = sqlx::raw_sql("SELECT pg_stat_force_next_flush()")
                .execute(&mut monitor.conn)
                .await
                .is_ok();
        }
        Ok(monitor)
    }

    /// Whether readings are exact (false when the monitor shares the bench
    /// database and cannot force its own statistics out).
    pub fn exact(&self) -> bool {
        !self.same_database || self.can_flush
    }

    /// Committed plus rolled-back transactions of the bench database so far.
    pub async fn read(&mut self) -> Result<TransactionReading, StrategyError> {
        Ok(self.sample(false).await?.0)
    }

    /// Waits until every session the strategies opened on the bench
    /// database has ended (an ending session reports its statistics), then
    /// reads. The flag is false if some sessions were still open after the
    /// timeout.
    pub async fn read_when_sessions_end(
        &mut self,
    ) -> Result<(TransactionReading, bool), StrategyError> {
        let started = Instant::now();
        let mut terminated = false;
        loop {
            // Past the grace period, end the sessions left over: a session
            // ended by pg_terminate_backend still reports its statistics.
            let terminate = !terminated && started.elapsed() > SESSIONS_GRACE;
            terminated |= terminate;
            let (reading, sessions) = self.sample(terminate).await?;
            if sessions == 0 {
                return Ok((reading, true));
            }
            if started.elapsed() > SESSIONS_END_TIMEOUT {
                return Ok((reading, false));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// One statement, in the simple query protocol (exactly one
    /// transaction, no prepare step that would count as another), that
    /// reads the transaction counter and the strategy's open sessions. In
    /// the bench's own database it also forces its statistics out, so it
    /// is counted at once. (Separate statements for the two did not always
    /// report at once: keep it one.)
    async fn sample(
        &mut self,
        terminate: bool,
    ) -> Result<(TransactionReading, i64), StrategyError> {
        let database = quote_literal(&self.database);
        let application = quote_literal(&APPLICATION_NAME);
        let flush = if self.same_database && self.can_flush {
            " FROM (SELECT pg_stat_force_next_flush()) AS flushed"
        } else {
            ""
        };
        let sessions = format!(
            "FROM pg_stat_activity WHERE datname = {database} AND application_name = {application}"
        );
        let end_sessions = if terminate {
            format!(", (SELECT count(pg_terminate_backend(pid)) {sessions})")
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT (SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database \
                     WHERE datname = {database}), \
                    (SELECT count(*) {sessions}){end_sessions}{flush}"
        );
        let own_before = self.own_statements;
        self.own_statements += 1;
        let row = sqlx::raw_sql(&sql).fetch_one(&mut self.conn).await?;
        let transactions: i64 = row.try_get(0)?;
        let sessions: i64 = row.try_get(1)?;
        Ok((
            TransactionReading {
                transactions: transactions.max(0) as u64,
                own_before,
            },
            sessions,
        ))
    }

    /// The bench's transactions between two readings.
    pub fn since(&self, before: TransactionReading, after: TransactionReading) -> u64 {
        let own = if self.same_database {
            after.own_before - before.own_before
        } else {
            0
        };
        after
            .transactions
            .saturating_sub(before.transactions)
            .saturating_sub(own)
    }

    /// Closes the monitor's connection.
    pub async fn close(self) {
        let _ = self.conn.close().await;
    }
}

/// `text` as an SQL string literal.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_quoted() {
        assert_eq!(quote_literal("it's"), "'it''s'");
    }
}
