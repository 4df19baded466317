//! SQL builders the store modules share; they run nothing.

use sea_query::{Expr, InsertStatement, IntoIden, Query};

/// `INSERT INTO table (columns) VALUES (row), ...`. Each row is an array as long as
/// `columns`, so sea-query's column/value count check cannot fail. `rows` must not be empty.
pub(super) fn insert_rows<C: IntoIden + Copy, const N: usize>(
    table: C,
    columns: [C; N],
    rows: impl IntoIterator<Item = [Expr; N]>,
) -> InsertStatement {
    let mut insert = Query::insert();
    insert.into_table(table).columns(columns);
    for row in rows {
        insert.values_panic(row);
    }
    insert
}
