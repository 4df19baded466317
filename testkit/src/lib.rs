//! The test kit of the workspace: what the tests of several crates share (the end-to-end
//! tests of `tests/`, the worker's and the store's). Real processes only: a child process
//! with a log, a real etcd, real Postgres databases; plus the one poll-with-deadline, the
//! one seeded generator and the one overlap count of the suites; proxies that lose what
//! clients send.

mod etcd;
mod mysql;
mod netns;
mod pg_proxy;
mod postgres;
mod rng;
mod small_disk;
mod spans;
mod tcp_hole;
mod tcp_proxy;

pub use etcd::{start_etcd, start_etcd_in, start_etcd_on};
pub use mysql::TestMysqlDb;
pub use netns::{Host, Net, Peer, Way};
pub use pg_proxy::PgProxy;
pub use postgres::{PrivatePostgres, TestDb};
pub use rng::Lcg;
pub use small_disk::SmallDisk;
pub use spans::{intervals, max_overlap, timed};
pub use tcp_hole::TcpHole;
pub use tcp_proxy::TcpProxy;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free at the time of the call (another process may take it before it is used).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Polls `f` every 50 ms until it returns Some; None once `timeout` has passed. For a
/// caller that reports a timeout its own way; [`wait_for`] panics instead.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `f` until it returns Some, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll(timeout, f).unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// A child process killed when dropped; its output goes to a log file whose last lines
/// are printed when a test fails.
pub struct Proc {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Starts `program args` with `env`, its output in `dir/<name>.log`.
    pub fn spawn(
        name: &str,
        dir: &Path,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null());
        cmd.env("RUST_LOG", "info,sqlx=warn,h2=warn,hyper=warn,tower=warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({program}): {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal by name (`STOP`, `CONT`, `KILL`, ...) with kill(1), so that a test
    /// can pause and resume a process without an extra crate.
    pub fn signal(&self, sig: &str) {
        let out = Command::new("kill")
            .args([format!("-{sig}"), self.pid().to_string()])
            .output()
            .unwrap_or_else(|e| panic!("cannot run kill -{sig} for {}: {e}", self.name));
        assert!(
            out.status.success(),
            "kill -{sig} {} ({}): {}",
            self.pid(),
            self.name,
            text(&out.stderr)
        );
    }

    /// Whether the process has ended (reaps it if so).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("----- last lines of {} -----", self.name);
            for l in tail.into_iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}
