//! Sql tasks: the task's query runs against a datasource configured on the worker
//! (`--datasource NAME@PROJECTS=URL`, Postgres, MySQL/MariaDB or SQLite) and granted to the
//! task's project, or one the project defines as a secret. One pool per datasource is
//! created on first use and kept.
//!
//! The query text is sent as it is (`raw_sql`; on Postgres the simple query protocol, on
//! MySQL the text protocol), so a script of several statements works too. Output parameters
//! come from the first statement that returns rows. On Postgres and MySQL every value comes
//! back as the server's own text rendering, so any column type (numeric, timestamp, uuid,
//! json, ...) can be output.
//!
//! A stop (kill or timeout) drops the query and closes its connection; on Postgres and MySQL
//! the server-side statement is also cancelled (`pg_cancel_backend`, `KILL QUERY`) from
//! another connection, so it does not run on holding locks. (SQLite has no cancel through
//! sqlx: a stopped statement finishes in the background on its connection thread before the
//! connection closes.)

use super::kill::KillSwitch;
use super::task_log::TaskLog;
use super::{NO_EXIT_CODE, Outcome};
use shoal_common::definition::{SqlOutput, SqlSpec};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{Column, Database, Either, Executor, MySql, Postgres, Row, Sqlite, TypeInfo};
use sqlx::{Pool, ValueRef};
use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;
use tokio_stream::StreamExt;
use tracing::warn;

/// Connections per datasource pool, at most.
const MAX_POOL: u32 = 8;
/// How long a task waits for a free connection of its datasource.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the cleanup after a stop (cancelling the statement on the server).
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// Total bytes of output parameters a query may produce.
const MAX_OUTPUT: usize = super::set_value::MAX_OUTPUT;

/// Connection options of a datasource, parsed from its URL at start-up.
#[derive(Clone, Debug)]
enum Target {
    Postgres(PgConnectOptions),
    Mysql(MySqlConnectOptions),
    Sqlite(SqliteConnectOptions),
}

#[derive(Clone)]
enum DsPool {
    Postgres(PgPool),
    Mysql(MySqlPool),
    Sqlite(SqlitePool),
}

/// The datasources configured on this worker and their pools.
pub(crate) struct Datasources {
    targets: BTreeMap<String, Target>,
    /// The projects each may serve ([`EVERY_PROJECT`]: all); none listed: every project
    /// (on a single-team worker only, see [`Datasources::new`]).
    grants: BTreeMap<String, Vec<String>>,
    /// Whether the worker's users all act as admins ([`super::Tenants::single_team`]).
    single_team: bool,
    pools: Mutex<HashMap<String, DsPool>>,
    pool_size: u32,
}

/// The grant of a datasource to every project (`--datasource NAME@*=URL`).
pub const EVERY_PROJECT: &str = "*";

impl Datasources {
    /// Checks every URL (scheme and syntax; nothing is connected yet). A worker shared by
    /// teams refuses a datasource that does not say which projects may use it: one that
    /// every project could use would be open to whoever may create a project.
    pub(crate) fn new(
        urls: &BTreeMap<String, String>,
        grants: &BTreeMap<String, Vec<String>>,
        single_team: bool,
        slots: u32,
    ) -> Result<Self, String> {
        let mut targets = BTreeMap::new();
        for (name, url) in urls {
            if !single_team && !grants.contains_key(name) {
                return Err(format!(
                    "datasource '{name}' says no project that may use it, and this worker \
                     serves several teams: grant it with --datasource {name}@PROJECT,...=URL \
                     (or {name}@*=URL for every project), or start the worker with \
                     --single-team if every user of this shoal may act as its admin"
                ));
            }
            targets.insert(name.clone(), target(name, url)?);
        }
        Ok(Datasources {
            targets,
            grants: grants.clone(),
            single_team,
            pools: Mutex::new(HashMap::new()),
            pool_size: slots.clamp(1, MAX_POOL),
        })
    }

    /// Whether a task of `project` may use this worker's datasource `name`.
    fn granted(&self, name: &str, project: &str) -> bool {
        self.grants
            .get(name)
            .is_none_or(|to| to.iter().any(|p| p == EVERY_PROJECT || p == project))
    }

    /// The pool of datasource `name` for a task of `project`: at `given` (a URL the
    /// project defines as a secret), else configured on this worker and granted to the
    /// project. Created on first use (lazily: connections open on demand); a given URL has
    /// a pool of its own.
    fn pool(&self, name: &str, given: Option<&String>, project: &str) -> Result<DsPool, String> {
        let key = match given {
            Some(url) => format!("{name}\0{url}"),
            None => name.to_string(),
        };
        if given.is_none() && self.targets.contains_key(name) && !self.granted(name, project) {
            return Err(format!(
                "datasource '{name}' of this worker is not granted to project '{project}': \
                 the worker's operator grants it with --datasource {name}@{project}=URL (more \
                 projects after a comma), or the project defines its own as a secret"
            ));
        }
        let mut pools = self.pools.lock().expect("datasource pools lock");
        if let Some(pool) = pools.get(&key) {
            return Ok(pool.clone());
        }
        let given = given.map(|url| target(name, url)).transpose()?;
        if let Some(Target::Sqlite(_)) = &given
            && !self.single_team
        {
            return Err(format!(
                "datasource '{name}' of project '{project}' is a SQLite file, which this \
                 worker would open as its own OS user (its data dir holds shoal's store): on \
                 a worker of several teams, only its operator gives SQLite datasources \
                 (--datasource {name}@{project}=sqlite://...)"
            ));
        }
        let Some(target) = given.as_ref().or_else(|| self.targets.get(name)) else {
            let known = if self.targets.is_empty() {
                "none are configured on this worker".to_string()
            } else {
                let names: Vec<&str> = self.targets.keys().map(String::as_str).collect();
                format!("configured: {}", names.join(", "))
            };
            return Err(format!("unknown datasource '{name}' ({known})"));
        };
        let pool = match target.clone() {
            Target::Postgres(options) => DsPool::Postgres(
                PgPoolOptions::new()
                    .max_connections(self.pool_size)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_lazy_with(options),
            ),
            Target::Mysql(options) => DsPool::Mysql(
                MySqlPoolOptions::new()
                    .max_connections(self.pool_size)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_lazy_with(options),
            ),
            Target::Sqlite(options) => DsPool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(self.pool_size)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_lazy_with(options),
            ),
        };
        pools.insert(key, pool.clone());
        Ok(pool)
    }

    /// Closes the pools (at shutdown, after the tasks ended).
    pub(crate) async fn close(&self) {
        let pools: Vec<DsPool> = {
            let mut pools = self.pools.lock().expect("datasource pools lock");
            pools.drain().map(|(_, p)| p).collect()
        };
        for pool in pools {
            match pool {
                DsPool::Postgres(p) => p.close().await,
                DsPool::Mysql(p) => p.close().await,
                DsPool::Sqlite(p) => p.close().await,
            }
        }
    }
}

/// Where datasource `name` at `url` connects; an error names what is wrong (never the
/// password: a URL parse error does not contain it).
fn target(name: &str, url: &str) -> Result<Target, String> {
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    match scheme {
        "postgres" | "postgresql" => PgConnectOptions::from_str(url).map(Target::Postgres),
        "mysql" | "mariadb" => MySqlConnectOptions::from_str(url)
            .map(|options| Target::Mysql(server_session(options, url))),
        "sqlite" => SqliteConnectOptions::from_str(url).map(Target::Sqlite),
        _ => {
            return Err(format!(
                "datasource '{name}': unsupported url scheme '{scheme}' \
                 (use postgres://..., mysql://... or sqlite://...)"
            ));
        }
    }
    .map_err(|e| format!("datasource '{name}': invalid url: {e}"))
}

/// MySQL sessions set up the way the server sets them up for any client (and for the JDBC
/// connections of DolphinScheduler's sql tasks): sqlx would otherwise add PIPES_AS_CONCAT
/// to the `sql_mode` (`a || b` would concatenate instead of OR) and NO_ENGINE_SUBSTITUTION,
/// and set the session's time zone to UTC (`NOW()` would change), unless the URL names one
/// (`?timezone=...`).
fn server_session(options: MySqlConnectOptions, url: &str) -> MySqlConnectOptions {
    let options = options.pipes_as_concat(false).no_engine_substitution(false);
    let names_time_zone = url::Url::parse(url).is_ok_and(|u| {
        u.query_pairs()
            .any(|(k, _)| k == "timezone" || k == "time-zone")
    });
    match names_time_zone {
        true => options,
        false => options.timezone(None),
    }
}

/// Runs the task's query for a task of `project`; `given` are the datasources the
/// project defines.
pub(crate) async fn run(
    datasources: &Datasources,
    project: &str,
    given: &HashMap<String, String>,
    spec: &SqlSpec,
    log: &TaskLog,
    kill: &KillSwitch,
) -> Outcome {
    let pool = datasources.pool(&spec.datasource, given.get(&spec.datasource), project);
    let pool = match pool {
        Ok(p) => p,
        Err(message) => {
            log.note(&message);
            return Outcome::failure(message);
        }
    };
    log.note(&format!(
        "sql on datasource '{}':\n{}",
        spec.datasource, spec.query
    ));
    let result = match pool {
        DsPool::Postgres(pool) => run_on(&pool, spec, kill).await,
        DsPool::Mysql(pool) => run_on(&pool, spec, kill).await,
        DsPool::Sqlite(pool) => run_on(&pool, spec, kill).await,
    };
    match result {
        Ok(Some(done)) => {
            let mut line = format!("{} rows returned", done.rows);
            if done.affected > 0 {
                line.push_str(&format!(", {} rows affected", done.affected));
            }
            log.note(&line);
            Outcome::Success {
                output: done.output,
            }
        }
        Ok(None) => Outcome::killed(),
        Err(message) => {
            log.note(&message);
            Outcome::Failure {
                exit_code: NO_EXIT_CODE,
                message,
                output: HashMap::new(),
            }
        }
    }
}

/// What a finished query produced.
struct Done {
    rows: u64,
    affected: u64,
    output: HashMap<String, String>,
}

/// What differs between the backends.
trait Backend: Database {
    /// The statement that cancels what this session runs, sent from another connection
    /// when the task is stopped (asked for first: a running session cannot be asked).
    fn canceller(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<Option<String>, sqlx::Error>> + Send;
    fn affected(result: &Self::QueryResult) -> u64;
    fn cell(row: &Self::Row, index: usize) -> Result<Cell, sqlx::Error>;
}

impl Backend for Postgres {
    async fn canceller(conn: &mut Self::Connection) -> Result<Option<String>, sqlx::Error> {
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(conn)
            .await?;
        Ok(Some(format!("SELECT pg_cancel_backend({pid})")))
    }

    fn affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }

    /// Values arrive in text format (simple query protocol): the server's rendering.
    fn cell(row: &Self::Row, index: usize) -> Result<Cell, sqlx::Error> {
        if row.try_get_raw(index)?.is_null() {
            return Ok(Cell::Null);
        }
        let text: &str = row.try_get_unchecked(index)?;
        Ok(match row.column(index).type_info().name() {
            "BOOL" => Cell::Bool(text == "t"),
            "INT2" | "INT4" | "INT8" | "OID" | "FLOAT4" | "FLOAT8" | "NUMERIC" => {
                Cell::Number(text.to_string())
            }
            _ => Cell::Text(text.to_string()),
        })
    }
}

impl Backend for MySql {
    async fn canceller(conn: &mut Self::Connection) -> Result<Option<String>, sqlx::Error> {
        let id: i64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(conn)
            .await?;
        Ok(Some(format!("KILL QUERY {id}")))
    }

    fn affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }

    /// Values arrive in text format (the text protocol): the server's rendering, but for
    /// BIT (its bits as bytes, shown as the number) and binary strings ([`Cell::bytes`]).
    /// BOOLEAN is how MySQL declares TINYINT(1), which comes out as true/false as it does
    /// through JDBC.
    fn cell(row: &Self::Row, index: usize) -> Result<Cell, sqlx::Error> {
        if row.try_get_raw(index)?.is_null() {
            return Ok(Cell::Null);
        }
        let bytes: &[u8] = row.try_get_unchecked(index)?;
        let name = row.column(index).type_info().name();
        let number = matches!(
            name.trim_end_matches(" UNSIGNED"),
            "TINYINT"
                | "SMALLINT"
                | "MEDIUMINT"
                | "INT"
                | "BIGINT"
                | "FLOAT"
                | "DOUBLE"
                | "DECIMAL"
        );
        Ok(match (name, std::str::from_utf8(bytes)) {
            ("BOOLEAN", Ok(text)) => Cell::Bool(text != "0"),
            ("BIT", _) => {
                // At most 64 bits, most significant byte first.
                let n = bytes.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
                Cell::Number(n.to_string())
            }
            (_, Ok(text)) if number => Cell::Number(text.to_string()),
            _ => Cell::bytes(bytes),
        })
    }
}

impl Backend for Sqlite {
    async fn canceller(_: &mut Self::Connection) -> Result<Option<String>, sqlx::Error> {
        Ok(None)
    }

    fn affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }

    /// Decodes by the value's storage class; a declared `BOOLEAN` column (an integer in
    /// SQLite) comes out as true/false.
    fn cell(row: &Self::Row, index: usize) -> Result<Cell, sqlx::Error> {
        let raw = row.try_get_raw(index)?;
        if raw.is_null() {
            return Ok(Cell::Null);
        }
        let storage = raw.type_info().name().to_string();
        let declared = row.column(index).type_info().name().to_string();
        Ok(match storage.as_str() {
            "INTEGER" => {
                let n: i64 = row.try_get_unchecked(index)?;
                if declared == "BOOLEAN" {
                    Cell::Bool(n != 0)
                } else {
                    Cell::Number(n.to_string())
                }
            }
            "REAL" => Cell::float(row.try_get_unchecked(index)?),
            "BLOB" => Cell::bytes(row.try_get_unchecked(index)?),
            _ => Cell::Text(row.try_get_unchecked(index)?),
        })
    }
}

/// One value of a result row.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Bool(bool),
    /// A number in the database's text rendering.
    Number(String),
    Text(String),
}

impl Cell {
    fn float(f: f64) -> Cell {
        match serde_json::Number::from_f64(f) {
            // serde_json prints the shortest form that reads back the same, keeping `.0`.
            Some(n) => Cell::Number(n.to_string()),
            None => Cell::Text(f.to_string()),
        }
    }

    /// Bytes of a binary value: as text when they are UTF-8 (as what is stored in a blob
    /// often is), else in hex as MySQL and SQLite write a blob literal (`0x00ff`), which
    /// reads back as the same bytes where text with replacement characters would not.
    fn bytes(bytes: &[u8]) -> Cell {
        match std::str::from_utf8(bytes) {
            Ok(text) => Cell::Text(text.to_string()),
            Err(_) => Cell::Text(format!("0x{}", hex::encode(bytes))),
        }
    }

    /// For `first_row`: NULL is the empty string.
    fn into_text(self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Bool(b) => b.to_string(),
            Cell::Number(s) | Cell::Text(s) => s,
        }
    }

    /// For `all_rows`: numbers stay numbers where JSON can hold them (not NaN, Infinity).
    fn into_json(self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Cell::Null => Value::Null,
            Cell::Bool(b) => Value::Bool(b),
            Cell::Number(s) => match serde_json::from_str::<serde_json::Number>(&s) {
                Ok(n) => Value::Number(n),
                Err(_) => Value::String(s),
            },
            Cell::Text(s) => Value::String(s),
        }
    }
}

/// Acquires a connection and runs the query on it, giving up (and cleaning up) on a stop.
/// `Ok(None)` means stopped.
async fn run_on<DB>(
    pool: &Pool<DB>,
    spec: &SqlSpec,
    kill: &KillSwitch,
) -> Result<Option<Done>, String>
where
    DB: Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    // Each select below is cancellation-safe on the side that is dropped: an unfinished
    // acquire gives nothing back, and a connection whose statement was dropped mid-way is
    // closed instead of returned to the pool.
    let mut conn = tokio::select! {
        conn = pool.acquire() => conn.map_err(|e| format!("datasource '{}': {e}", spec.datasource))?,
        _ = kill.stopped() => return Ok(None),
    };
    let canceller = tokio::select! {
        c = DB::canceller(&mut conn) => c.map_err(|e| format!("datasource '{}': {e}", spec.datasource))?,
        _ = kill.stopped() => {
            conn.close_on_drop();
            return Ok(None);
        }
    };
    let done = tokio::select! {
        done = collect::<DB>(&mut conn, &spec.query, spec.output) => done,
        _ = kill.stopped() => None,
    };
    match done {
        Some(done) => done.map(Some),
        None => {
            conn.close_on_drop();
            drop(conn);
            if let Some(statement) = canceller {
                cancel(pool, &statement).await;
            }
            Ok(None)
        }
    }
}

/// Runs `statement` (a [`Backend::canceller`]) on another connection of the pool, within
/// [`CANCEL_WAIT`]: a failure is only logged, as the task has stopped all the same.
async fn cancel<DB>(pool: &Pool<DB>, statement: &str)
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let cancel = sqlx::raw_sql(statement).execute(pool);
    match tokio::time::timeout(CANCEL_WAIT, cancel).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => warn!(statement, error = %e, "cannot cancel a stopped sql statement"),
        Err(_) => warn!(statement, "cancelling a stopped sql statement timed out"),
    }
}

/// Streams the results, keeping only what the output mode needs.
/// The outer `Option` is always `Some`; it lets the caller's select tell "stopped" apart.
async fn collect<DB>(
    conn: &mut DB::Connection,
    query: &str,
    mode: SqlOutput,
) -> Option<Result<Done, String>>
where
    DB: Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    Some(collect_inner::<DB>(conn, query, mode).await)
}

async fn collect_inner<DB>(
    conn: &mut DB::Connection,
    query: &str,
    mode: SqlOutput,
) -> Result<Done, String>
where
    DB: Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let mut stream = sqlx::raw_sql(query).fetch_many(&mut *conn);
    let mut rows = 0u64;
    let mut affected = 0u64;
    let mut in_statement = 0u64;
    // Outputs come from the first statement that returns rows.
    let mut outputs_done = false;
    let mut columns: Vec<String> = Vec::new();
    let mut first: Option<Vec<Cell>> = None;
    let mut all: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut bytes = 0usize;
    while let Some(item) = stream.next().await {
        match item.map_err(|e| e.to_string())? {
            Either::Left(result) => {
                if in_statement > 0 {
                    outputs_done = true;
                } else {
                    // For a row-less statement only. (SQLite reports the changes of the
                    // connection's last INSERT/UPDATE/DELETE, so after DDL this can be stale;
                    // it only feeds the log line.)
                    affected += DB::affected(&result);
                }
                in_statement = 0;
            }
            Either::Right(row) => {
                rows += 1;
                in_statement += 1;
                if outputs_done || mode == SqlOutput::None {
                    continue;
                }
                if columns.is_empty() && first.is_none() {
                    columns = row.columns().iter().map(|c| c.name().to_string()).collect();
                    all = vec![Vec::new(); columns.len()];
                }
                let cells = (0..row.len())
                    .map(|i| DB::cell(&row, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("cannot read row {rows}: {e}"))?;
                match mode {
                    SqlOutput::None => {}
                    SqlOutput::FirstRow => {
                        if first.is_none() {
                            first = Some(cells);
                        }
                    }
                    SqlOutput::AllRows => {
                        for (column, cell) in all.iter_mut().zip(cells) {
                            let value = cell.into_json();
                            // The size as it will be rendered, plus a separator.
                            bytes += value.to_string().len() + 1;
                            column.push(value);
                        }
                        if bytes > MAX_OUTPUT {
                            return Err(format!(
                                "query output exceeds {} KiB after {rows} rows; \
                                 limit the rows or use output: first_row",
                                MAX_OUTPUT / 1024
                            ));
                        }
                    }
                }
            }
        }
    }
    let output = match mode {
        SqlOutput::None => HashMap::new(),
        SqlOutput::FirstRow => columns
            .into_iter()
            .zip(first.unwrap_or_default())
            .map(|(name, cell)| (name, cell.into_text()))
            .collect(),
        SqlOutput::AllRows => columns
            .into_iter()
            .zip(all)
            .map(|(name, values)| (name, serde_json::Value::Array(values).to_string()))
            .collect(),
    };
    Ok(Done {
        rows,
        affected,
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasource_urls_are_checked_at_start() {
        let urls = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(
            Datasources::new(
                &urls(&[
                    ("pg", "postgres://u:p@127.0.0.1:5432/db"),
                    ("my", "mysql://u:p@127.0.0.1:3306/db?timezone=%2B08:00"),
                    ("maria", "mariadb://u@127.0.0.1/db"),
                    ("lite", "sqlite:///tmp/x.db?mode=rwc"),
                ]),
                &BTreeMap::new(),
                true,
                4
            )
            .is_ok()
        );
        let single = |pairs: &[(&str, &str)]| {
            Datasources::new(&urls(pairs), &BTreeMap::new(), true, 4)
                .err()
                .unwrap()
        };
        let e = single(&[("ora", "oracle://h/db")]);
        assert!(
            e.contains("'ora'") && e.contains("'oracle'") && e.contains("mysql://"),
            "{e}"
        );
        for url in [
            "postgres://u:secret@h:notaport/db",
            "mysql://u:secret@h:notaport/db",
        ] {
            let e = single(&[("db", url)]);
            assert!(e.contains("'db'") && !e.contains("secret"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_shared_worker_s_datasources_serve_the_projects_granted_them() {
        let urls = BTreeMap::from([
            ("wh".to_string(), "sqlite:///tmp/wh.db".to_string()),
            ("all".to_string(), "sqlite:///tmp/all.db".to_string()),
        ]);
        let e = Datasources::new(&urls, &BTreeMap::new(), false, 4)
            .err()
            .unwrap();
        assert!(e.contains("--datasource all@PROJECT"), "{e}");
        let grants = BTreeMap::from([
            (
                "wh".to_string(),
                vec!["sales".to_string(), "ops".to_string()],
            ),
            ("all".to_string(), vec![EVERY_PROJECT.to_string()]),
        ]);
        let ds = Datasources::new(&urls, &grants, false, 4).unwrap();
        assert!(ds.pool("wh", None, "ops").is_ok());
        assert!(ds.pool("all", None, "hr").is_ok());
        let e = ds.pool("wh", None, "hr").err().unwrap();
        assert!(
            e.starts_with("datasource 'wh' of this worker is not granted to project 'hr'"),
            "{e}"
        );
        // A project's own SQLite URL would open files as the worker's user.
        let own = "sqlite:///srv/shoal/shoal.db".to_string();
        let e = ds.pool("x", Some(&own), "hr").err().unwrap();
        assert!(
            e.contains("only its operator gives SQLite datasources"),
            "{e}"
        );
        let single = Datasources::new(&urls, &BTreeMap::new(), true, 4).unwrap();
        assert!(single.pool("wh", None, "hr").is_ok(), "every project's");
    }

    #[test]
    fn cells_render_as_text_and_json() {
        assert_eq!(Cell::Null.into_text(), "");
        assert_eq!(Cell::Bool(true).into_text(), "true");
        assert_eq!(Cell::float(1.0).into_text(), "1.0");
        assert_eq!(Cell::float(0.1).into_text(), "0.1");
        assert_eq!(Cell::float(f64::NAN).into_text(), "NaN");
        assert_eq!(
            Cell::Number("12.50".into()).into_json(),
            serde_json::json!(12.5)
        );
        assert_eq!(
            Cell::Number("NaN".into()).into_json(),
            serde_json::json!("NaN")
        );
        assert_eq!(Cell::Null.into_json(), serde_json::Value::Null);
        assert_eq!(Cell::Text("a".into()).into_json(), serde_json::json!("a"));
        assert_eq!(Cell::bytes("上海".as_bytes()), Cell::Text("上海".into()));
        assert_eq!(Cell::bytes(&[0xff, 0x00]), Cell::Text("0xff00".into()));
    }
}
