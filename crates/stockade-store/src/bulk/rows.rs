//! How a batch travels to the database: one JSON parameter, unpacked into
//! rows by the statement.
//!
//! sqlx's `Any` driver binds no arrays, so a batch is one JSON array bound
//! as `$1`: one bound parameter per statement (no limit on bound
//! parameters applies), and SQL text that depends only on the database and
//! the row type, so each statement is prepared once per connection and
//! then reused from sqlx's statement cache.
//!
//! - PostgreSQL: an array of objects, unpacked by `json_to_recordset`.
//! - SQLite: an array of arrays, each row's values in column order,
//!   unpacked by `json_each` and `value ->> i`. Objects read with
//!   `json_extract(value, '$.name')` cost SQLite a key search per field on
//!   top of the row's parse; by position, SQLite's thread spends about a
//!   fifth less per committed order (`docs/benchmarks.md`).
//!
//! A row type is declared once with [`bulk_row!`], which gives both
//! encodings and the column list the statements unpack, so the two cannot
//! disagree.

use serde::ser::{Serialize, SerializeTuple, Serializer};

use crate::{StoreError, StoreKind};

/// A column of the rows a JSON parameter is unpacked into.
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

/// A row of a bulk statement: its columns, and its values in their order.
pub(super) trait BulkRow {
    /// Every column, in the order the row's values come.
    const COLUMNS: &'static [Column];

    /// The row as the database unpacks it (see the module docs).
    fn encode<S: Serializer>(&self, kind: StoreKind, serializer: S) -> Result<S::Ok, S::Error>;
}

/// Declares a row type of bulk statements: a struct whose fields are the
/// columns (named as the fields, typed `Text` or `BigInt`), in order.
macro_rules! bulk_row {
    (
        $(#[$meta:meta])*
        struct $name:ident$(<$lt:lifetime>)? {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty => $column:ident,)*
        }
    ) => {
        $(#[$meta])*
        pub(super) struct $name$(<$lt>)? {
            $($(#[$field_meta])* pub(super) $field: $ty,)*
        }

        impl$(<$lt>)? $crate::bulk::rows::BulkRow for $name$(<$lt>)? {
            const COLUMNS: &'static [$crate::bulk::rows::Column] =
                &[$($crate::bulk::rows::Column::$column(stringify!($field)),)*];

            fn encode<S: serde::Serializer>(
                &self,
                kind: $crate::StoreKind,
                serializer: S,
            ) -> Result<S::Ok, S::Error> {
                use serde::ser::{SerializeMap, SerializeTuple};
                let width = Self::COLUMNS.len();
                match kind {
                    $crate::StoreKind::Postgres => {
                        let mut object = serializer.serialize_map(Some(width))?;
                        $(object.serialize_entry(stringify!($field), &self.$field)?;)*
                        object.end()
                    }
                    $crate::StoreKind::Sqlite => {
                        let mut values = serializer.serialize_tuple(width)?;
                        $(values.serialize_element(&self.$field)?;)*
                        values.end()
                    }
                }
            }
        }
    };
}
pub(super) use bulk_row;

/// `FROM`-clause rows named `r` over the JSON array of `R` rows bound as
/// `$1`, with every column of `R`. On SQLite the subquery is flattened
/// into the statement, so a column the statement does not read is never
/// unpacked.
pub(super) fn json_rows<R: BulkRow>(kind: StoreKind) -> String {
    match kind {
        StoreKind::Postgres => {
            let typed: Vec<String> = R::COLUMNS
                .iter()
                .map(|column| match column {
                    Column::Text(name) => format!("{name} text"),
                    Column::BigInt(name) => format!("{name} bigint"),
                })
                .collect();
            format!("json_to_recordset($1::json) AS r({})", typed.join(", "))
        }
        StoreKind::Sqlite => {
            let fields: Vec<String> = R::COLUMNS
                .iter()
                .enumerate()
                .map(|(index, column)| format!("value ->> {index} AS {}", column.name()))
                .collect();
            format!("(SELECT {} FROM json_each($1)) AS r", fields.join(", "))
        }
    }
}

/// The JSON array of `rows` bound as `$1` of a statement over [`json_rows`].
pub(super) fn json_array<R: BulkRow>(
    kind: StoreKind,
    rows: impl Iterator<Item = R>,
) -> Result<String, StoreError> {
    /// The rows, encoded for `kind`.
    struct Encoded<R>(StoreKind, Vec<R>);

    impl<R: BulkRow> Serialize for Encoded<R> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            /// One row, encoded for `kind`.
            struct Row<'a, R>(StoreKind, &'a R);

            impl<R: BulkRow> Serialize for Row<'_, R> {
                fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                    self.1.encode(self.0, serializer)
                }
            }

            let mut array = serializer.serialize_tuple(self.1.len())?;
            for row in &self.1 {
                array.serialize_element(&Row(self.0, row))?;
            }
            array.end()
        }
    }

    serde_json::to_string(&Encoded(kind, rows.collect()))
        .map_err(|e| StoreError::Failed(format!("encoding a batch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    bulk_row! {
        /// A row of the tests.
        struct Pair<'a> {
            name: &'a str => Text,
            count: Option<i64> => BigInt,
        }
    }

    fn pairs() -> impl Iterator<Item = Pair<'static>> {
        [
            Pair {
                name: "a\"b",
                count: Some(3),
            },
            Pair {
                name: "c",
                count: None,
            },
        ]
        .into_iter()
    }

    #[test]
    fn postgres_reads_objects_named_as_the_columns() {
        assert_eq!(
            json_rows::<Pair>(StoreKind::Postgres),
            "json_to_recordset($1::json) AS r(name text, count bigint)"
        );
        assert_eq!(
            json_array(StoreKind::Postgres, pairs()).unwrap(),
            r#"[{"name":"a\"b","count":3},{"name":"c","count":null}]"#
        );
    }

    #[test]
    fn sqlite_reads_arrays_in_column_order() {
        assert_eq!(
            json_rows::<Pair>(StoreKind::Sqlite),
            "(SELECT value ->> 0 AS name, value ->> 1 AS count FROM json_each($1)) AS r"
        );
        assert_eq!(
            json_array(StoreKind::Sqlite, pairs()).unwrap(),
            r#"[["a\"b",3],["c",null]]"#
        );
    }
}
