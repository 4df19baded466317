//! Starting a shoal for the bench to drive: `standalone` (one process, SQLite) or
//! `cluster` (etcd, a fresh Postgres or MariaDB database, an api-server, two masters or as
//! many as asked, two workers).
//! Every process logs to a file in a temporary directory, kept when the bench fails.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Standalone,
    Cluster,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Standalone => "standalone",
            Mode::Cluster => "cluster",
        }
    }
}

/// The database a cluster runs on, on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Database {
    /// 127.0.0.1:5432, trust auth, user postgres.
    Postgres,
    /// MySQL or MariaDB on 127.0.0.1:3306, user root without a password.
    Mysql,
}

/// Where the cluster's Postgres lives (trust auth, user postgres).
const PG_HOST: &str = "127.0.0.1";
const PG_PORT: u16 = 5432;
const MYSQL_URL: &str = "mysql://root@127.0.0.1:3306";
const ETCD_BIN: &str = "/usr/bin/etcd";
/// Tasks each worker runs at once (the default of `shoal standalone` and `shoal worker`),
/// given explicitly because the shell fan-out's floor runs as many spawns at once.
pub const SLOTS: usize = 100;

/// The processes the bench started, killed (and the database dropped) on [`Spawned::stop`].
pub struct Spawned {
    pub api_url: String,
    /// Slots of all the workers together.
    pub slots: usize,
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
    /// The database made for a cluster, dropped on stop.
    database: Option<(Database, String)>,
}

/// Starts a shoal of `mode`; a cluster gets `masters` masters, on `database`.
pub async fn spawn(
    mode: Mode,
    shoal: &Path,
    masters: usize,
    database: Database,
) -> Result<Spawned> {
    let shoal = std::fs::canonicalize(shoal).with_context(|| {
        format!(
            "no shoal binary at {} (build it with `cargo build --release -p shoal` or pass --shoal-bin)",
            shoal.display()
        )
    })?;
    let dir = tempfile::Builder::new().prefix("shoal-bench-").tempdir()?;
    let mut s = Spawned {
        api_url: String::new(),
        slots: 0,
        dir,
        children: Vec::new(),
        database: None,
    };
    let started = match mode {
        Mode::Standalone => s.standalone(&shoal).await,
        Mode::Cluster => s.cluster(&shoal, masters, database).await,
    };
    if let Err(e) = started {
        let logs = s.stop(false).await;
        return Err(e.context(format!("starting {} shoal (logs in {logs})", mode.name())));
    }
    Ok(s)
}

impl Spawned {
    async fn standalone(&mut self, shoal: &Path) -> Result<()> {
        let port = free_port()?;
        let data = self.path("data");
        self.start(
            "standalone",
            shoal,
            &[
                "standalone".into(),
                "--data-dir".into(),
                data,
                "--port".into(),
                port.to_string(),
                "--slots".into(),
                SLOTS.to_string(),
            ],
        )?;
        self.slots = SLOTS;
        self.api_url = format!("http://127.0.0.1:{port}");
        self.wait_healthy(&format!("{}/api/v1/health", self.api_url))
            .await
    }

    async fn cluster(&mut self, shoal: &Path, masters: usize, database: Database) -> Result<()> {
        let (client, peer) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client}");
        self.start(
            "etcd",
            Path::new(ETCD_BIN),
            &[
                "--data-dir".into(),
                self.path("etcd"),
                "--listen-client-urls".into(),
                etcd_url.clone(),
                "--advertise-client-urls".into(),
                etcd_url.clone(),
                "--listen-peer-urls".into(),
                format!("http://127.0.0.1:{peer}"),
            ],
        )?;
        self.wait_healthy(&format!("{etcd_url}/health")).await?;

        let db = format!("shoal_bench_{}", std::process::id());
        admin(database, &format!("CREATE DATABASE {db}")).await?;
        self.database = Some((database, db.clone()));
        let db_url = match database {
            Database::Postgres => format!("postgres://postgres@{PG_HOST}:{PG_PORT}/{db}"),
            Database::Mysql => format!("{MYSQL_URL}/{db}"),
        };

        let port = free_port()?;
        self.api_url = format!("http://127.0.0.1:{port}");
        self.start(
            "api-server",
            shoal,
            &[
                "api-server".into(),
                "--database-url".into(),
                db_url.clone(),
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
            ],
        )?;
        // The api-server runs the migrations; masters start once it answers.
        self.wait_healthy(&format!("{}/api/v1/health", self.api_url))
            .await?;
        for i in 1..=masters {
            self.start(
                &format!("master-{i}"),
                shoal,
                &[
                    "master".into(),
                    "--database-url".into(),
                    db_url.clone(),
                    "--etcd".into(),
                    etcd_url.clone(),
                    "--port".into(),
                    free_port()?.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                ],
            )?;
        }
        let workers = 2;
        for i in 1..=workers {
            self.start(
                &format!("worker-{i}"),
                shoal,
                &[
                    "worker".into(),
                    "--etcd".into(),
                    etcd_url.clone(),
                    "--port".into(),
                    free_port()?.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                    "--data-dir".into(),
                    self.path(&format!("worker-{i}")),
                    "--slots".into(),
                    SLOTS.to_string(),
                ],
            )?;
        }
        self.slots = workers * SLOTS;
        Ok(())
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn start(&mut self, name: &str, bin: &Path, args: &[String]) -> Result<()> {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log")))?;
        let child = Command::new(bin)
            .args(args)
            // As a production cluster runs: every gRPC call carries the secret.
            .env("SHOAL_CLUSTER_SECRET", "bench-cluster-secret-0123456789")
            // The api-server's admin token, which the bench's client sends.
            .env("SHOAL_TOKEN", crate::api::TOKEN)
            // Tasks run as the bench's user (an older shoal ignores the variable).
            .env("SHOAL_SINGLE_TEAM", "true")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {}", bin.display()))?;
        eprintln!("started {name} (pid {})", child.id().unwrap_or(0));
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// Process ids of what drives instances: the standalone process, or the masters.
    pub fn engine_pids(&self) -> Vec<u32> {
        self.children
            .iter()
            .filter(|(name, _)| name == "standalone" || name.starts_with("master"))
            .filter_map(|(_, child)| child.id())
            .collect()
    }

    /// Waits until `url` answers 2xx, failing early if a process the bench started exited.
    async fn wait_healthy(&mut self, url: &str) -> Result<()> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let answer = http.get(url).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            for (name, child) in &mut self.children {
                if let Some(status) = child.try_wait()? {
                    bail!("{name} exited with {status}");
                }
            }
            if Instant::now() >= deadline {
                bail!("{url} did not answer within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills every process and drops the database. Keeps the directory of logs and data
    /// unless `clean`; returns where it is.
    pub async fn stop(mut self, clean: bool) -> String {
        for (name, child) in self.children.iter_mut().rev() {
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!("warning: {name} had already exited ({status})");
            }
            let _ = child.kill().await;
        }
        if let Some((database, db)) = self.database.take() {
            let drop = match database {
                // FORCE: the killed nodes' sessions may linger.
                Database::Postgres => format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
                Database::Mysql => format!("DROP DATABASE IF EXISTS {db}"),
            };
            if let Err(e) = admin(database, &drop).await {
                eprintln!("warning: {e:#}");
            }
        }
        if clean {
            return "(removed)".into();
        }
        let kept: PathBuf = self.dir.keep();
        kept.display().to_string()
    }
}

/// A port nobody listens on right now (the OS picks it; a race with other processes is
/// possible but harmless for a benchmark, which then fails to start and says so).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Runs `sql` on the server of `database` with its command-line client.
async fn admin(database: Database, sql: &str) -> Result<()> {
    let port = PG_PORT.to_string();
    let (client, args) = match database {
        Database::Postgres => (
            "psql",
            vec![
                "-h",
                PG_HOST,
                "-p",
                &port,
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
        ),
        Database::Mysql => (
            "mariadb",
            vec!["--host=127.0.0.1", "--port=3306", "--user=root", "-e", sql],
        ),
    };
    let out = Command::new(client)
        .args(args)
        .output()
        .await
        .with_context(|| format!("cannot run {client}"))?;
    if !out.status.success() {
        bail!(
            "{client} `{sql}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
