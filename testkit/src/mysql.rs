//! Real MySQL/MariaDB for tests: a fresh database per test on the machine's server, through
//! the `mariadb` (or `mysql`) client, so that the kit needs no driver.

use crate::postgres::unique_name;
use crate::text;
use std::process::{Command, Output};

/// The shared server, without a database: `SHOAL_TEST_MYSQL` or the local one.
fn server() -> String {
    std::env::var("SHOAL_TEST_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
}

/// A fresh MySQL database for one test; dropped (best effort) with the guard.
pub struct TestMysqlDb {
    pub name: String,
    pub url: String,
}

impl TestMysqlDb {
    /// A new database `<prefix>_<pid>_<nanos>_<n>` on the shared server.
    pub fn create(prefix: &str) -> TestMysqlDb {
        let name = unique_name(prefix);
        let out = client(&format!("CREATE DATABASE {name}"));
        assert!(
            out.status.success(),
            "this test needs MySQL or MariaDB at {} (set SHOAL_TEST_MYSQL to use another \
             server; `service mariadb start` starts the local one): {}",
            server(),
            text(&out.stderr)
        );
        TestMysqlDb {
            url: format!("{}/{name}", server()),
            name,
        }
    }
}

impl Drop for TestMysqlDb {
    fn drop(&mut self) {
        let _ = client(&format!("DROP DATABASE IF EXISTS {}", self.name));
    }
}

/// Runs `sql` with the command-line client against the shared server.
fn client(sql: &str) -> Output {
    let url = server();
    let rest = url.strip_prefix("mysql://").unwrap_or(&url);
    let (credentials, address) = rest.rsplit_once('@').unwrap_or(("root", rest));
    let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
    let (host, port) = address.split_once(':').unwrap_or((address, "3306"));
    let mut args = vec![
        format!("--host={host}"),
        format!("--port={port}"),
        format!("--user={user}"),
    ];
    if !password.is_empty() {
        args.push(format!("--password={password}"));
    }
    args.extend(["-e".to_string(), sql.to_string()]);
    Command::new("mariadb")
        .args(&args)
        .output()
        .or_else(|_| Command::new("mysql").args(&args).output())
        .expect("the mariadb or mysql command-line client must be installed")
}
