//! The two typed pools and the few helpers through which every statement runs: a statement
//! is built once with sea-query and rendered here for the backend in use, values bound.

use super::Backend;
use super::pending_audit;
use super::signal::LocalSignal;
use sea_query::{Func, PostgresQueryBuilder, Query, SqliteQueryBuilder};
use sea_query_sqlx::SqlxBinder;
use shoal_common::error::{Error, Result};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{FromRow, Postgres, Sqlite, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../sql/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../sql/sqlite");

/// Largest number of bound values in one statement (Postgres' wire format uses a u16
/// count; SQLite's default SQLITE_MAX_VARIABLE_NUMBER).
const POSTGRES_MAX_BINDS: usize = 65_535;
const SQLITE_MAX_BINDS: usize = 32_766;

/// A row type decoded the same way from both backends (`#[derive(sqlx::FromRow)]` structs
/// and tuples qualify).
pub(super) trait Record:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

impl<T> Record for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

#[derive(Clone)]
pub(super) enum Db {
    Postgres(PgPool),
    /// SQLite has one writer per file. Every write transaction goes through `writer`, a
    /// single connection, so in-process writers queue in the pool (FIFO, no busy-waiting)
    /// instead of failing with SQLITE_BUSY; each such transaction also starts with
    /// `BEGIN IMMEDIATE`, so it takes the write lock up front and another process on the
    /// same file makes it wait (busy_timeout) rather than fail on a read-to-write upgrade.
    /// Reads use `readers`, which WAL lets run beside the writer.
    Sqlite {
        writer: SqlitePool,
        readers: SqlitePool,
        commands: Arc<LocalSignal>,
        /// Woken after a commit that offered external tasks.
        external: Arc<LocalSignal>,
    },
}

impl Db {
    /// `ping_taken`: ping a Postgres connection as it is taken from the pool (a round
    /// trip), so that one which died while idle is replaced unseen rather than failing its
    /// first statement.
    pub(super) async fn connect(url: &str, ping_taken: bool) -> Result<Db> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // A frozen process (SIGSTOP, VM pause, partition) must not hold row locks
            // for long: failover waits on them. Nothing of ours idles inside a transaction.
            let options = PgConnectOptions::from_str(url)?
                .options([("idle_in_transaction_session_timeout", "5s")]);
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .test_before_acquire(ping_taken)
                .connect_with(options)
                .await?;
            POSTGRES_MIGRATIONS.run(&pool).await?;
            Ok(Db::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(5))
                .foreign_keys(true);
            // No ping when a connection is taken from the pool: a file in this process
            // does not hang up, and each ping is a round trip to the connection's thread
            // (a sixth of a write's time). sqlx still pings on release.
            let writer = SqlitePoolOptions::new()
                .max_connections(1)
                .test_before_acquire(false)
                .connect_with(options.clone())
                .await?;
            SQLITE_MIGRATIONS.run(&writer).await?;
            let readers = SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .connect_with(options)
                .await?;
            Ok(Db::Sqlite {
                writer,
                readers,
                commands: Arc::new(LocalSignal::default()),
                external: Arc::new(LocalSignal::default()),
            })
        } else {
            // Only the scheme: the rest of the URL may hold a password.
            let scheme = url.split(':').next().unwrap_or_default();
            Err(Error::Invalid(format!(
                "unsupported database url scheme '{scheme}': use postgres://... or sqlite://PATH"
            )))
        }
    }

    pub(super) fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite { .. } => Backend::Sqlite,
        }
    }

    /// Starts a write transaction.
    pub(super) async fn begin(&self) -> Result<Tx> {
        Ok(match self {
            Db::Postgres(pool) => Tx::Postgres(pool.begin().await?),
            // Begun in a task of its own. A caller dropped while the BEGIN runs (its client
            // hung up) would otherwise leave the one writer connection counted inside a
            // transaction nobody holds (sqlx counts the BEGIN its worker thread ran), and
            // every later BEGIN would be refused. Unawaited, the task's transaction rolls back.
            Db::Sqlite { writer, .. } => {
                let writer = writer.clone();
                let begun = tokio::spawn(async move { writer.begin_with("BEGIN IMMEDIATE").await });
                let begun = begun.await.map_err(|e| {
                    Error::Invalid(format!("the task beginning a transaction failed: {e}"))
                })?;
                Tx::Sqlite(begun?)
            }
        })
    }

    pub(super) async fn fetch_all<T: Record>(&self, stmt: &impl SqlxBinder) -> Result<Vec<T>> {
        match self {
            Db::Postgres(pool) => run!(fetch_all, pool, stmt.build_sqlx(PostgresQueryBuilder)),
            Db::Sqlite { readers, .. } => {
                run!(fetch_all, readers, stmt.build_sqlx(SqliteQueryBuilder))
            }
        }
    }

    pub(super) async fn fetch_optional<T: Record>(
        &self,
        stmt: &impl SqlxBinder,
    ) -> Result<Option<T>> {
        match self {
            Db::Postgres(pool) => {
                run!(fetch_optional, pool, stmt.build_sqlx(PostgresQueryBuilder))
            }
            Db::Sqlite { readers, .. } => {
                run!(fetch_optional, readers, stmt.build_sqlx(SqliteQueryBuilder))
            }
        }
    }
}

/// A write transaction; dropped without `commit` it rolls back.
pub(super) enum Tx {
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

impl Tx {
    pub(super) fn backend(&self) -> Backend {
        match self {
            Tx::Postgres(_) => Backend::Postgres,
            Tx::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// Serializes this transaction with every other one that locks `key`, until commit
    /// (a Postgres advisory transaction lock). SQLite's write transaction is exclusive
    /// already. A hash collision only makes two unrelated keys wait for each other.
    pub(super) async fn lock_key(&mut self, key: &str) -> Result<()> {
        if self.backend() == Backend::Postgres {
            self.execute(
                Query::select().expr(
                    Func::cust("pg_advisory_xact_lock")
                        .arg(Func::cust("hashtextextended").arg(key).arg(0i64)),
                ),
            )
            .await?;
        }
        Ok(())
    }

    /// How many rows of `columns` bound values fit in one statement.
    pub(super) fn rows_per_statement(&self, columns: usize) -> usize {
        let binds = match self {
            Tx::Postgres(_) => POSTGRES_MAX_BINDS,
            Tx::Sqlite(_) => SQLITE_MAX_BINDS,
        };
        (binds / columns.max(1)).max(1)
    }

    pub(super) async fn execute(&mut self, stmt: &impl SqlxBinder) -> Result<()> {
        match self {
            Tx::Postgres(tx) => run!(execute, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(execute, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(super) async fn execute_counted(&mut self, stmt: &impl SqlxBinder) -> Result<u64> {
        match self {
            Tx::Postgres(tx) => run!(counted, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(counted, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
        }
    }

    pub(super) async fn fetch_all<T: Record>(&mut self, stmt: &impl SqlxBinder) -> Result<Vec<T>> {
        match self {
            Tx::Postgres(tx) => run!(fetch_all, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(fetch_all, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
        }
    }

    pub(super) async fn fetch_one<T: Record>(&mut self, stmt: &impl SqlxBinder) -> Result<T> {
        match self {
            Tx::Postgres(tx) => run!(fetch_one, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(fetch_one, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
        }
    }

    pub(super) async fn fetch_optional<T: Record>(
        &mut self,
        stmt: &impl SqlxBinder,
    ) -> Result<Option<T>> {
        match self {
            Tx::Postgres(tx) => {
                run!(
                    fetch_optional,
                    &mut **tx,
                    stmt.build_sqlx(PostgresQueryBuilder)
                )
            }
            Tx::Sqlite(tx) => run!(
                fetch_optional,
                &mut **tx,
                stmt.build_sqlx(SqliteQueryBuilder)
            ),
        }
    }

    /// Commits; inside an audited API mutation, the first commit also writes its audit row.
    pub(super) async fn commit(mut self) -> Result<()> {
        if let Some(pending) = pending_audit::claim() {
            let (id,): (i64,) = self.fetch_one(&pending.insert()).await?;
            pending.written(id);
        }
        let result = match self {
            Tx::Postgres(tx) => tx.commit().await,
            Tx::Sqlite(tx) => tx.commit().await,
        };
        result.map_err(|e| match e {
            // The server answered: the transaction was rolled back.
            sqlx::Error::Database(_) => Error::Database(e),
            // The connection broke during COMMIT: it may or may not have been applied.
            e => Error::CommitUnknown(e),
        })
    }
}

// Statements run through this macro rather than through functions generic over
// `sqlx::Executor<'c>`: such generic futures fail to prove `Send` for every lifetime, and
// the store's futures must be `Send` to be spawned (rustc's higher-ranked lifetime limit).
macro_rules! run {
    (execute, $exec:expr, $built:expr) => {{
        let (sql, values) = $built;
        sqlx::query_with(&sql, values).execute($exec).await?;
        Ok(())
    }};
    (counted, $exec:expr, $built:expr) => {{
        let (sql, values) = $built;
        Ok(sqlx::query_with(&sql, values)
            .execute($exec)
            .await?
            .rows_affected())
    }};
    ($method:ident, $exec:expr, $built:expr) => {{
        let (sql, values) = $built;
        Ok(sqlx::query_as_with(&sql, values).$method($exec).await?)
    }};
}
use run;
