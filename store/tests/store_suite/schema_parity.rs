//! The Postgres, SQLite and MySQL migrations stay in step: applied to fresh databases,
//! they make the same tables with the same columns, and the same named indexes.

use super::*;
use std::collections::BTreeSet;

/// (table, column) pairs and index names of a schema.
type Shape = (BTreeSet<(String, String)>, BTreeSet<String>);

async fn postgres_shape(url: &str) -> Shape {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // Indexes the migrations name (not those behind PRIMARY KEY and UNIQUE constraints).
    let indexes: Vec<(String,)> = sqlx::query_as(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
         AND indexname NOT IN (SELECT conname FROM pg_constraint)",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    (
        columns.into_iter().collect(),
        indexes.into_iter().map(|(i,)| i).collect(),
    )
}

async fn sqlite_shape(url: &str) -> Shape {
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    // table_xinfo: generated columns too (table_info leaves them out).
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_xinfo(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // Automatic indexes (of PRIMARY KEY and UNIQUE) have no SQL.
    let indexes: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    (
        columns.into_iter().collect(),
        indexes.into_iter().map(|(i,)| i).collect(),
    )
}

async fn mysql_shape(url: &str) -> Shape {
    let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
    // CAST: information_schema's names come back as binary strings otherwise.
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(TABLE_NAME AS CHAR), CAST(COLUMN_NAME AS CHAR) \
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME NOT IN ('_sqlx_migrations', 'key_lock')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // Named indexes as Postgres lists them: not the primary key, not a foreign key's
    // (MySQL makes one named as the constraint), and not a UNIQUE constraint's (named
    // `<table>_<columns>_key` after Postgres'; MySQL lists CREATE UNIQUE INDEX as a
    // constraint too, so the suffix tells them apart).
    let indexes: Vec<(String,)> = sqlx::query_as(
        "SELECT DISTINCT CAST(s.INDEX_NAME AS CHAR) FROM information_schema.STATISTICS s \
         WHERE s.TABLE_SCHEMA = DATABASE() AND s.INDEX_NAME <> 'PRIMARY' \
         AND NOT (s.NON_UNIQUE = 0 AND s.INDEX_NAME LIKE '%\\_key') \
         AND s.INDEX_NAME NOT IN (SELECT c.CONSTRAINT_NAME \
             FROM information_schema.TABLE_CONSTRAINTS c \
             WHERE c.TABLE_SCHEMA = DATABASE() AND c.CONSTRAINT_TYPE = 'FOREIGN KEY')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    (
        columns.into_iter().collect(),
        indexes.into_iter().map(|(i,)| i).collect(),
    )
}

/// What `a` has that `b` lacks.
fn only<T: Ord + Clone>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> Vec<T> {
    a.difference(b).cloned().collect()
}

/// The shape `other`'s migrations make (read by `read`) is Postgres'.
async fn same_shape_as_postgres<F: Future<Output = Shape>>(
    other: Backend,
    read: impl FnOnce(String) -> F,
) {
    let (pg, pg_cleanup) = open(Backend::Postgres).await;
    let (them, their_cleanup) = open(other).await;
    let pg_shape = postgres_shape(&pg.url).await;
    let their_shape = read(them.url.clone()).await;
    drop((pg, them));
    cleanup(pg_cleanup).await;
    cleanup(their_cleanup).await;

    assert!(pg_shape.0.len() > 50, "{:?}", pg_shape.0);
    assert_eq!(
        (
            only(&pg_shape.0, &their_shape.0),
            only(&their_shape.0, &pg_shape.0)
        ),
        (vec![], vec![]),
        "columns only in Postgres, only in {other:?}"
    );
    assert_eq!(
        (
            only(&pg_shape.1, &their_shape.1),
            only(&their_shape.1, &pg_shape.1)
        ),
        (vec![], vec![]),
        "indexes only in Postgres, only in {other:?}"
    );
}

#[tokio::test]
async fn postgres_and_sqlite_migrations_make_the_same_tables_columns_and_indexes() {
    same_shape_as_postgres(Backend::Sqlite, |url| async move { sqlite_shape(&url).await }).await;
}

#[tokio::test]
async fn postgres_and_mysql_migrations_make_the_same_tables_columns_and_indexes() {
    same_shape_as_postgres(Backend::Mysql, |url| async move { mysql_shape(&url).await }).await;
}
