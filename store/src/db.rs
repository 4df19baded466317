//! The typed pools and the few helpers through which every statement runs: a statement
//! is built once with sea-query and rendered here for the backend in use, values bound.

use super::Backend;
use super::pending_audit;
use super::signal::{LocalSignal, Probe, Signal, Written};
use sea_query::{
    Expr, ExprTrait, Func, InsertStatement, LockType, MysqlQueryBuilder, PostgresQueryBuilder,
    Query, SelectStatement, SqliteQueryBuilder, UpdateStatement,
};
use sea_query_sqlx::SqlxBinder;
use shoal_common::error::{Error, Result};
use sqlx::migrate::Migrator;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlRow};
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
static MYSQL_MIGRATIONS: Migrator = sqlx::migrate!("../sql/mysql");

/// Largest number of bound values in one statement (Postgres' wire format uses a u16
/// count; SQLite's default SQLITE_MAX_VARIABLE_NUMBER).
const POSTGRES_MAX_BINDS: usize = 65_535;
const SQLITE_MAX_BINDS: usize = 32_766;
/// MySQL's prepared statements count placeholders in a u16 too.
const MYSQL_MAX_BINDS: usize = 65_535;

/// How often a MySQL waiter probes for writes of another process: MySQL has no
/// LISTEN/NOTIFY (one in this process still wakes at once). A probe is one cheap query.
const MYSQL_PROBE: Duration = Duration::from_millis(10);

/// A row type decoded the same way from every backend (`#[derive(sqlx::FromRow)]` structs
/// and tuples qualify).
pub(super) trait Record:
    for<'r> FromRow<'r, PgRow>
    + for<'r> FromRow<'r, SqliteRow>
    + for<'r> FromRow<'r, MySqlRow>
    + Send
    + Unpin
{
}

impl<T> Record for T where
    T: for<'r> FromRow<'r, PgRow>
        + for<'r> FromRow<'r, SqliteRow>
        + for<'r> FromRow<'r, MySqlRow>
        + Send
        + Unpin
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
    /// MySQL 8 or MariaDB 10.10+ (`SKIP LOCKED`, and a case-sensitive Unicode collation:
    /// `mysql_collation`). No `RETURNING` is used on it
    /// (MySQL has none, MariaDB none on UPDATE): the store reads back what it wrote.
    Mysql {
        pool: MySqlPool,
        /// Woken by writes of this process; other processes' writes are polled for.
        commands: Arc<LocalSignal>,
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
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let options = MySqlConnectOptions::from_str(url)?.charset("utf8mb4");
            let pool = MySqlPoolOptions::new()
                .max_connections(16)
                .test_before_acquire(ping_taken)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        // The store's reads and locks are written for Postgres' READ
                        // COMMITTED (a locking read and a plain one see the same rows);
                        // InnoDB's default REPEATABLE READ would give plain reads an older
                        // snapshot. `time_zone` is unused: times are stored as epoch ms.
                        sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                            .execute(conn)
                            .await?;
                        Ok(())
                    })
                })
                .connect_with(options)
                .await?;
            mysql_collation(&pool).await?;
            MYSQL_MIGRATIONS.run(&pool).await?;
            Ok(Db::Mysql {
                pool,
                commands: Arc::new(LocalSignal::default()),
                external: Arc::new(LocalSignal::default()),
            })
        } else {
            // Only the scheme: the rest of the URL may hold a password.
            let scheme = url.split(':').next().unwrap_or_default();
            Err(Error::Invalid(format!(
                "unsupported database url scheme '{scheme}': use postgres://..., \
                 mysql://... or sqlite://PATH"
            )))
        }
    }

    pub(super) fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite { .. } => Backend::Sqlite,
            Db::Mysql { .. } => Backend::Mysql,
        }
    }

    /// Wakes when writes of `kind` may have happened: on Postgres by LISTEN over a
    /// connection of its own; elsewhere by this process' own writes, and on MySQL also
    /// when a probe every [`MYSQL_PROBE`] sees another process' write.
    pub(super) async fn signal(&self, kind: Written) -> Result<Signal> {
        match self {
            Db::Postgres(pool) => Signal::postgres(pool, kind.channel()).await,
            Db::Sqlite {
                commands, external, ..
            } => Ok(Signal::local(kind.pick(commands, external).clone(), None)),
            Db::Mysql {
                pool,
                commands,
                external,
            } => Ok(Signal::local(
                kind.pick(commands, external).clone(),
                Some(Probe::new(pool.clone(), kind.probe(), MYSQL_PROBE)),
            )),
        }
    }

    /// Wakes this process' waiters on `kind` after a commit that wrote it. Postgres needs
    /// none: the transaction's NOTIFY wakes every process.
    pub(super) fn written(&self, kind: Written) {
        match self {
            Db::Postgres(_) => {}
            Db::Sqlite {
                commands, external, ..
            }
            | Db::Mysql {
                commands, external, ..
            } => kind.pick(commands, external).wake(),
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
            Db::Mysql { pool, .. } => Tx::Mysql(pool.begin().await?),
        })
    }

    pub(super) async fn fetch_all<T: Record>(&self, stmt: &impl SqlxBinder) -> Result<Vec<T>> {
        match self {
            Db::Postgres(pool) => run!(fetch_all, pool, stmt.build_sqlx(PostgresQueryBuilder)),
            Db::Sqlite { readers, .. } => {
                run!(fetch_all, readers, stmt.build_sqlx(SqliteQueryBuilder))
            }
            Db::Mysql { pool, .. } => run!(fetch_all, pool, stmt.build_sqlx(MysqlQueryBuilder)),
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
            Db::Mysql { pool, .. } => {
                run!(fetch_optional, pool, stmt.build_sqlx(MysqlQueryBuilder))
            }
        }
    }
}

/// A write transaction; dropped without `commit` it rolls back.
pub(super) enum Tx {
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
    Mysql(Transaction<'static, MySql>),
}

impl Tx {
    pub(super) fn backend(&self) -> Backend {
        match self {
            Tx::Postgres(_) => Backend::Postgres,
            Tx::Sqlite(_) => Backend::Sqlite,
            Tx::Mysql(_) => Backend::Mysql,
        }
    }

    /// Serializes this transaction with every other one that locks `key`, until commit
    /// (a Postgres advisory transaction lock; on MySQL, which has no transaction-scoped
    /// named lock, the row lock of the key's bucket in `key_lock`). SQLite's write
    /// transaction is exclusive already. A hash collision only makes two unrelated keys
    /// wait for each other.
    pub(super) async fn lock_key(&mut self, key: &str) -> Result<()> {
        match self.backend() {
            Backend::Postgres => {
                self.execute(
                    Query::select().expr(
                        Func::cust("pg_advisory_xact_lock")
                            .arg(Func::cust("hashtextextended").arg(key).arg(0i64)),
                    ),
                )
                .await?
            }
            Backend::Mysql => {
                self.execute(
                    Query::select()
                        .column(KeyLock::Bucket)
                        .from(KeyLock::Table)
                        .and_where(Expr::col(KeyLock::Bucket).eq(key_bucket(key)))
                        .lock(LockType::Update),
                )
                .await?
            }
            Backend::Sqlite => {}
        }
        Ok(())
    }

    /// How many rows of `columns` bound values fit in one statement.
    pub(super) fn rows_per_statement(&self, columns: usize) -> usize {
        let binds = match self {
            Tx::Postgres(_) => POSTGRES_MAX_BINDS,
            Tx::Sqlite(_) => SQLITE_MAX_BINDS,
            Tx::Mysql(_) => MYSQL_MAX_BINDS,
        };
        (binds / columns.max(1)).max(1)
    }

    /// Runs `update`, which changes at most one row and ends in `RETURNING` the columns of
    /// `T`; returns them, None when no row matched. MySQL, which renders no RETURNING,
    /// reads them with `reread` (a select of that row by its key) after the update, while
    /// the update's lock holds the row.
    pub(super) async fn update_returning<T: Record>(
        &mut self,
        update: &UpdateStatement,
        reread: &SelectStatement,
    ) -> Result<Option<T>> {
        if self.backend() != Backend::Mysql {
            return self.fetch_optional(update).await;
        }
        if self.execute_counted(update).await? == 0 {
            return Ok(None);
        }
        self.fetch_optional(reread).await
    }

    /// Runs a one-row insert into a table with an auto-increment `id`; returns the id.
    /// `insert` must end in `RETURNING id` for Postgres and SQLite; MySQL, which renders
    /// no RETURNING, reports the id in its answer.
    pub(super) async fn insert_id(&mut self, insert: &InsertStatement) -> Result<i64> {
        match self {
            Tx::Mysql(tx) => {
                let (sql, values) = insert.build_sqlx(MysqlQueryBuilder);
                let done = sqlx::query_with(&sql, values).execute(&mut **tx).await?;
                i64::try_from(done.last_insert_id())
                    .map_err(|_| Error::Invalid("an auto-increment id beyond i64".into()))
            }
            _ => {
                let (id,): (i64,) = self.fetch_one(insert).await?;
                Ok(id)
            }
        }
    }

    pub(super) async fn execute(&mut self, stmt: &impl SqlxBinder) -> Result<()> {
        match self {
            Tx::Postgres(tx) => run!(execute, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(execute, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
            Tx::Mysql(tx) => run!(execute, &mut **tx, stmt.build_sqlx(MysqlQueryBuilder)),
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(super) async fn execute_counted(&mut self, stmt: &impl SqlxBinder) -> Result<u64> {
        match self {
            Tx::Postgres(tx) => run!(counted, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(counted, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
            Tx::Mysql(tx) => run!(counted, &mut **tx, stmt.build_sqlx(MysqlQueryBuilder)),
        }
    }

    pub(super) async fn fetch_all<T: Record>(&mut self, stmt: &impl SqlxBinder) -> Result<Vec<T>> {
        match self {
            Tx::Postgres(tx) => run!(fetch_all, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(fetch_all, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
            Tx::Mysql(tx) => run!(fetch_all, &mut **tx, stmt.build_sqlx(MysqlQueryBuilder)),
        }
    }

    pub(super) async fn fetch_one<T: Record>(&mut self, stmt: &impl SqlxBinder) -> Result<T> {
        match self {
            Tx::Postgres(tx) => run!(fetch_one, &mut **tx, stmt.build_sqlx(PostgresQueryBuilder)),
            Tx::Sqlite(tx) => run!(fetch_one, &mut **tx, stmt.build_sqlx(SqliteQueryBuilder)),
            Tx::Mysql(tx) => run!(fetch_one, &mut **tx, stmt.build_sqlx(MysqlQueryBuilder)),
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
            Tx::Mysql(tx) => run!(
                fetch_optional,
                &mut **tx,
                stmt.build_sqlx(MysqlQueryBuilder)
            ),
        }
    }

    /// Commits; inside an audited API mutation, the first commit also writes its audit row.
    pub(super) async fn commit(mut self) -> Result<()> {
        if let Some(pending) = pending_audit::claim() {
            let id = self.insert_id(&pending.insert()).await?;
            pending.written(id);
        }
        let result = match self {
            Tx::Postgres(tx) => tx.commit().await,
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Mysql(tx) => tx.commit().await,
        };
        result.map_err(|e| match e {
            // The server answered: the transaction was rolled back.
            sqlx::Error::Database(_) => Error::Database(e),
            // The connection broke during COMMIT: it may or may not have been applied.
            e => Error::CommitUnknown(e),
        })
    }
}

/// Case- and accent-sensitive collations, most preferred first: MariaDB 10.10+'s (without
/// trailing-space padding) and MySQL 8's. A `_bin` collation would do too, but sqlx reads
/// its columns as bytes, not text.
const MYSQL_COLLATIONS: [&str; 2] = ["utf8mb4_uca1400_nopad_as_cs", "utf8mb4_0900_as_cs"];

/// Makes sure the database compares names as Postgres and SQLite do ('ETL' is not 'etl',
/// 'é' is not 'e'; MySQL's default collations make each pair one key). A database without
/// tables is given the best collation the server has; one with tables that compares
/// otherwise is refused, with how to fix it.
async fn mysql_collation(pool: &MySqlPool) -> Result<()> {
    let (database, collation, tables): (String, String, i64) = sqlx::query_as(
        "SELECT s.SCHEMA_NAME, s.DEFAULT_COLLATION_NAME, \
         (SELECT COUNT(*) FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = s.SCHEMA_NAME) \
         FROM information_schema.SCHEMATA s WHERE s.SCHEMA_NAME = DATABASE()",
    )
    .fetch_one(pool)
    .await?;
    if MYSQL_COLLATIONS.contains(&collation.as_str()) {
        return Ok(());
    }
    let quoted = database.replace('`', "``");
    let how = format!(
        "ALTER DATABASE `{quoted}` CHARACTER SET utf8mb4 COLLATE {} (MariaDB 10.10 or \
         later) or COLLATE {} (MySQL 8)",
        MYSQL_COLLATIONS[0], MYSQL_COLLATIONS[1]
    );
    if tables > 0 {
        return Err(Error::Invalid(format!(
            "database '{database}' has tables and collation {collation}, under which names \
             that differ in case or accents are one name; give shoal a database of its own \
             made with {how}"
        )));
    }
    // The first the server knows (MariaDB lists its UCA 14 collations without the
    // character set, so each is tried rather than looked up).
    let mut refused = Vec::new();
    for best in MYSQL_COLLATIONS {
        // A generated statement: names cannot be bound as parameters.
        let alter = format!("ALTER DATABASE `{quoted}` CHARACTER SET utf8mb4 COLLATE {best}");
        match sqlx::query(&alter).execute(pool).await {
            Ok(_) => return Ok(()),
            Err(e) => refused.push(format!("{best}: {e}")),
        }
    }
    Err(Error::Invalid(format!(
        "cannot give database '{database}' a collation shoal can use ({}); use MariaDB \
         10.10 or later or MySQL 8, and run {how}",
        refused.join("; ")
    )))
}

/// How many times a transaction that lost a deadlock is run again before the error goes
/// to the caller.
pub(super) const DEADLOCK_RETRIES: u32 = 3;

/// Whether `e` is a deadlock the server broke by rolling this transaction back whole, so
/// that running it again is safe. InnoDB declares them where Postgres would make one
/// transaction wait (its locks on index gaps and inserted keys): concurrent claimers of
/// commands meet them on MySQL.
pub(super) fn is_deadlock(e: &Error) -> bool {
    match e {
        Error::Database(sqlx::Error::Database(db)) => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|my| my.number() == 1213),
        _ => false,
    }
}

/// MySQL's table of `lock_key` rows (in its migrations only).
#[derive(sea_query::Iden, Clone, Copy)]
enum KeyLock {
    Table,
    Bucket,
}

/// How many rows `key_lock` has (sql/mysql/0001_init.sql).
const KEY_LOCK_BUCKETS: u16 = 4096;

/// A lock key's row in `key_lock`: a stable hash of it (SHA-256) into the buckets.
fn key_bucket(key: &str) -> i32 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    i32::from(u16::from_be_bytes([digest[0], digest[1]]) % KEY_LOCK_BUCKETS)
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
