//! Where a bulk statement's rows come from, per database.
//!
//! - PostgreSQL: the whole batch as one JSON parameter unpacked with
//!   `json_to_recordset` (sqlx's `Any` driver binds no arrays), one
//!   statement per batch.
//! - SQLite: multi-row `VALUES` lists of bound parameters. Unpacking JSON
//!   there cost more than the rest of a commit (every `json_extract` turns
//!   the row back into text and parses it again: 40 % of a committed
//!   purchase's instructions under callgrind). A batch runs in chunks of
//!   at most [`SQLITE_CHUNK`] rows, each padded with rows of NULLs up to
//!   the next power of two, so a statement's text takes one of ten shapes,
//!   each prepared once per connection and then reused from sqlx's
//!   statement cache, and a full batch is one statement per table. Every
//!   statement over these rows ignores a row whose first column is NULL (a
//!   join on it matches nothing; an insert says `WHERE r.<first> IS NOT
//!   NULL`). No chunk comes near SQLite's limit on bound parameters
//!   (32,766).

use serde::Serialize;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, Transaction};

use crate::{StoreError, StoreKind};

/// A query of the `Any` driver, being bound.
pub(super) type AnyQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

/// The most rows of one statement on SQLite: the writer's default batch.
pub(super) const SQLITE_CHUNK: usize = 512;

/// A column of the rows a statement reads.
#[derive(Clone, Copy)]
pub(super) enum Column {
    Text(&'static str),
    BigInt(&'static str),
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Self::Text(name) | Self::BigInt(name) => name,
        }
    }
}

/// A row of a bulk statement: serialised as a JSON object for PostgreSQL,
/// bound field by field for SQLite.
pub(super) trait BulkRow: Serialize {
    /// Binds the row's values, in the order of the statement's columns.
    fn bind<'q>(&'q self, query: AnyQuery<'q>) -> AnyQuery<'q>;
}

/// Runs a statement over `rows`, its row source (`FROM` or `JOIN` rows
/// named `r`, with `columns`) put into the text by `sql`; the rows it
/// returns, of every chunk.
pub(super) async fn run<R: BulkRow>(
    kind: StoreKind,
    tx: &mut Transaction<'_, Any>,
    sql: impl Fn(&str) -> String,
    columns: &[Column],
    rows: &[R],
) -> Result<Vec<AnyRow>, StoreError> {
    match kind {
        StoreKind::Postgres => {
            let text = sql(&json_rows(columns));
            let values = serde_json::to_string(rows)
                .map_err(|e| StoreError::Failed(format!("encoding a batch: {e}")))?;
            Ok(sqlx::query(&text).bind(values).fetch_all(&mut **tx).await?)
        }
        StoreKind::Sqlite => {
            let mut found = Vec::new();
            for chunk in rows.chunks(SQLITE_CHUNK) {
                let padded = chunk.len().next_power_of_two();
                let text = sql(&values_rows(columns, padded));
                let query = chunk
                    .iter()
                    .fold(sqlx::query(&text), |query, row| row.bind(query));
                let nulls = (padded - chunk.len()) * columns.len();
                let query = (0..nulls).fold(query, |query, _| query.bind(None::<i64>));
                found.extend(query.fetch_all(&mut **tx).await?);
            }
            Ok(found)
        }
    }
}

/// PostgreSQL: rows named `r` over the JSON array of objects bound as `$1`.
fn json_rows(columns: &[Column]) -> String {
    let typed: Vec<String> = columns
        .iter()
        .map(|column| match column {
            Column::Text(name) => format!("{name} text"),
            Column::BigInt(name) => format!("{name} bigint"),
        })
        .collect();
    format!("json_to_recordset($1::json) AS r({})", typed.join(", "))
}

/// SQLite: rows named `r` over `count` rows of bound parameters.
fn values_rows(columns: &[Column], count: usize) -> String {
    let named: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(index, column)| format!("column{} AS {}", index + 1, column.name()))
        .collect();
    let width = columns.len();
    let rows: Vec<String> = (0..count)
        .map(|row| {
            let params: Vec<String> = (1..=width)
                .map(|column| format!("${}", row * width + column))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect();
    format!(
        "(SELECT {} FROM (VALUES {})) AS r",
        named.join(", "),
        rows.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_rows_name_their_columns() {
        let columns = [Column::Text("id"), Column::BigInt("sold")];
        assert_eq!(
            values_rows(&columns, 2),
            "(SELECT column1 AS id, column2 AS sold FROM (VALUES ($1, $2), ($3, $4))) AS r"
        );
    }
}
