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

/// A table's columns as read: its id (the database's) first, then the columns it is
/// written with. `M` must be `N + 1`; a const that gets it wrong does not compile.
pub(super) const fn with_id<C: Copy, const N: usize, const M: usize>(
    id: C,
    written: [C; N],
) -> [C; M] {
    assert!(
        M == N + 1,
        "a table's columns are its id and its written columns"
    );
    let mut all = [id; M];
    let mut i = 0;
    while i < N {
        all[i + 1] = written[i];
        i += 1;
    }
    all
}
