//! Real Postgres for tests: a fresh database per test on the shared server, or a server of
//! a test's own that it may stop and start. Through the `psql` and server tools, so that
//! the kit needs no driver.

use crate::{free_port, text};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The shared server, without a database: `SHOAL_TEST_POSTGRES` or the local one.
fn server() -> String {
    std::env::var("SHOAL_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_string())
}

/// A fresh Postgres database for one test; dropped (best effort) with the guard.
pub struct TestDb {
    pub name: String,
    pub url: String,
    /// Set when the database lives on a server of the test's own.
    pub server: Option<PrivatePostgres>,
}

impl TestDb {
    /// A new database `<prefix>_<pid>_<nanos>_<n>` on the shared server.
    pub fn create(prefix: &str) -> TestDb {
        let name = unique_name(prefix);
        // A generated identifier: CREATE DATABASE cannot take a parameter.
        admin(&format!("CREATE DATABASE {name}"));
        TestDb {
            url: format!("{}/{name}", server()),
            server: None,
            name,
        }
    }

    /// The `postgres` database of a fresh server of this test's own, which the test may
    /// stop and start (the shared server serves every other test).
    pub fn private() -> TestDb {
        let server = PrivatePostgres::start();
        TestDb {
            name: "postgres".into(),
            url: format!("postgres://postgres@127.0.0.1:{}/postgres", server.port),
            server: Some(server),
        }
    }

    /// Runs one SQL statement in this test's database; returns psql's unaligned,
    /// tuples-only output (`|` between columns, a row per line).
    pub fn query(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([&self.url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
            .output()
            .expect("psql must be installed (PostgreSQL client)");
        assert!(out.status.success(), "{sql}: {}", text(&out.stderr));
        text(&out.stdout)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.server.is_some() {
            return; // the whole server goes
        }
        // FORCE ends the connections that pools of the test still hold.
        let _ = Command::new("psql")
            .args([
                &format!("{}/postgres", server()),
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// `<prefix>_<pid>_<nanos>_<n>`: a database name no other test of any process takes.
pub(crate) fn unique_name(prefix: &str) -> String {
    // Unique within the process too: tests of one binary run in parallel threads.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{nanos}_{n}", std::process::id())
}

/// Runs `sql` on the shared server's `postgres` database.
fn admin(sql: &str) {
    let url = format!("{}/postgres", server());
    let out = Command::new("psql")
        .args([&url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .expect("psql must be installed (PostgreSQL client)");
    assert!(
        out.status.success(),
        "this test needs Postgres at {url} (set SHOAL_TEST_POSTGRES to use another server; \
         `pg_ctlcluster 15 main start` starts the local one) for {sql}: {}",
        text(&out.stderr)
    );
}

// ---- a Postgres server of a test's own ----

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// initdb in a temporary dir and a postgres on a free loopback port, run as the
/// `postgres` user when the tests run as root (postgres refuses root). Stopped (immediate)
/// when dropped.
pub struct PrivatePostgres {
    pub port: u16,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl PrivatePostgres {
    fn start() -> PrivatePostgres {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if as_root() {
            run(Command::new("chown").args(["postgres:postgres", data.to_str().unwrap()]));
        }
        let d = data.to_str().unwrap();
        run(pg_tool("initdb").args(["-D", d, "-A", "trust", "-U", "postgres", "--no-sync"]));
        let pg = PrivatePostgres {
            port: free_port(),
            data,
            _dir: dir,
        };
        pg.start_again();
        pg
    }

    /// Starts the server on its data dir and port and waits until it accepts connections.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off",
            self.port
        );
        let log = self.data.join("server.log");
        run(pg_tool("pg_ctl").args([
            "-D",
            self.data.to_str().unwrap(),
            "-o",
            &options,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "start",
        ]));
    }

    /// Stops the server the hard way: every backend dies, nothing is flushed politely
    /// (a crash, as far as clients can tell); the next start recovers from the WAL.
    pub fn stop(&self) {
        run(pg_tool("pg_ctl").args(["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"]));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = pg_tool("pg_ctl")
            .args(["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
    }
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0")
}

/// A Postgres server tool, run as `postgres` when we are root.
fn pg_tool(tool: &str) -> Command {
    let path = format!("{PG_BIN}/{tool}");
    if as_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--", &path]);
        cmd
    } else {
        Command::new(path)
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
