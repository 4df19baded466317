//! Helpers for end-to-end tests: real `shoal` processes, a real etcd, real Postgres. What
//! other crates' tests need too (processes, etcd, databases, waits, overlap of runs, the
//! seeded generator) is in the workspace's test kit, re-exported here.
#![allow(dead_code)] // each test binary uses a different subset

pub use shoal_testkit::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
/// The datasource every test worker has for sql tasks: the local test server.
pub const TEST_DATASOURCE: &str = "pg@*=postgres://postgres@127.0.0.1:5432/postgres";
/// The secret of the test clusters: their nodes bind 0.0.0.0, as in production, and so
/// need one.
pub const CLUSTER_SECRET: &str = "test-cluster-secret-0123456789";
/// The key of project secrets in the clusters the tests start (api-server and masters).
pub const SECRET_KEY: &str = "5eccc8b2d6a4f0e1c3b5a7d9f1e3c5b7a9d1f3e5c7b9a1d3f5e7c9b1a3d5f7e9";

/// A blocking JSON client for the REST API.
pub struct Api {
    pub base: String,
    http: reqwest::blocking::Client,
}

impl Api {
    pub fn new(port: u16) -> Api {
        Api::at(
            format!("http://127.0.0.1:{port}"),
            reqwest::blocking::Client::builder(),
        )
    }

    /// An API on `host` (an address of a test network host).
    pub fn on(host: &str, port: u16) -> Api {
        Api::at(
            format!("http://{host}:{port}"),
            reqwest::blocking::Client::builder(),
        )
    }

    /// An API served over HTTPS with a certificate of the CA `ca`, trusting only that CA.
    pub fn https(port: u16, ca: &Path) -> Api {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
        let http = reqwest::blocking::Client::builder().tls_certs_only([ca]);
        Api::at(format!("https://127.0.0.1:{port}"), http)
    }

    fn at(base: String, http: reqwest::blocking::ClientBuilder) -> Api {
        // reqwest is built without a default TLS provider; the binary installs ring too.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Every call carries the admin token of the api-servers the tests start; a
        // standalone without auth ignores it.
        let mut auth = reqwest::header::HeaderMap::new();
        let bearer = format!("Bearer {API_TOKEN}");
        auth.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
        Api {
            base,
            http: http
                .timeout(Duration::from_secs(30))
                .default_headers(auth)
                .build()
                .unwrap(),
        }
    }

    pub fn get(&self, path: &str) -> Value {
        self.get_ok(&format!("/api/v1{path}")).json().unwrap()
    }

    /// The status of `GET /api/v1{path}`.
    pub fn status(&self, path: &str) -> u16 {
        let url = format!("{}/api/v1{path}", self.base);
        self.http.get(url).send().unwrap().status().as_u16()
    }

    /// GET `path` (from the server's root), which must succeed.
    pub fn get_ok(&self, path: &str) -> reqwest::blocking::Response {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .unwrap();
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, body)
    }

    pub fn put(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, body)
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, "")
    }

    fn send(&self, method: reqwest::Method, path: &str, body: &str) -> (u16, Value) {
        let resp = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base))
            .header("content-type", content_type(body))
            .body(body.to_string())
            .send()
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().unwrap_or(Value::Null))
    }

    /// A task attempt's log: where it came from (`X-Shoal-Log-Source`) and its text.
    pub fn log(&self, task_instance_id: i64) -> (String, String) {
        let resp = self.get_ok(&format!("/api/v1/task-instances/{task_instance_id}/log"));
        let source = resp.headers()["x-shoal-log-source"]
            .to_str()
            .unwrap()
            .to_string();
        (source, resp.text().unwrap())
    }

    /// A plain-text page outside /api/v1 (e.g. `/metrics`).
    pub fn get_text(&self, path: &str) -> String {
        self.get_ok(path).text().unwrap()
    }

    pub fn healthy(&self) -> bool {
        self.http
            .get(format!("{}/api/v1/health", self.base))
            .send()
            .is_ok_and(|r| r.status().is_success())
    }

    pub fn wait_healthy(&self, procs: &[&Proc]) {
        wait_for("the api to answer /health", Duration::from_secs(60), || {
            for p in procs {
                assert!(p.log_text().lines().count() < 100_000);
            }
            self.healthy().then_some(())
        });
    }

    /// Waits until the instance is in a terminal state and returns it.
    pub fn wait_instance(&self, id: i64, timeout: Duration) -> Value {
        wait_for(&format!("instance {id} to end"), timeout, || {
            let inst = self.get(&format!("/instances/{id}"));
            matches!(
                inst["state"].as_str(),
                Some("success" | "failure" | "stopped")
            )
            .then_some(inst)
        })
    }
}

/// The admin token (SHOAL_TOKEN) of the api-servers the tests start.
pub const API_TOKEN: &str = "test-admin-token";

/// The content type of a request body the tests send: JSON (or empty) or YAML. Without
/// auth the API refuses a write without one (what a web page could send).
fn content_type(body: &str) -> &'static str {
    match body.trim_start().chars().next() {
        None | Some('{' | '[') => "application/json",
        _ => "application/yaml",
    }
}

/// `shoal api-server` on a free port with `env` and [`API_TOKEN`], answering /health.
pub fn start_api_server(dir: &Path, env: &[(&str, &str)]) -> (Proc, Api) {
    let env: Vec<(&str, &str)> = [("SHOAL_TOKEN", API_TOKEN)]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    // Port 0: the system picks a free port, and the api-server logs which.
    let proc = Proc::spawn(
        "api-server",
        dir,
        SHOAL,
        &["api-server", "--port", "0", "--bind", "127.0.0.1"],
        &env,
    );
    let api = Api::new(bound_port(&proc));
    api.wait_healthy(&[&proc]);
    (proc, api)
}

/// The port the API of `proc` (an api-server or a standalone started with `--port 0`)
/// listens on, from its log.
pub fn bound_port(proc: &Proc) -> u16 {
    const LINE: &str = "api-server listening addr=";
    wait_for(
        &format!("{} to log '{LINE}'", proc.name),
        Duration::from_secs(60),
        || {
            let log = proc.log_text();
            let at = log.find(LINE)? + LINE.len();
            let addr = log[at..].split_whitespace().next()?;
            addr.rsplit_once(':')?.1.parse().ok()
        },
    )
}

/// Runs a client command of the `shoal` binary against `api`.
pub fn cli(api: &Api, args: &[&str]) -> Output {
    cli_env(api, args, &[])
}

/// `cli` with more environment variables.
pub fn cli_env(api: &Api, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(SHOAL)
        .args(args)
        .env("SHOAL_API", &api.base)
        .env("SHOAL_TOKEN", API_TOKEN)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `shoal standalone` on a free port with its own data dir.
pub struct Standalone {
    pub dir: tempfile::TempDir,
    pub api: Api,
    pub proc: Proc,
    /// Its extra environment and arguments, for a restart.
    env: Vec<(String, String)>,
    args: Vec<String>,
}

impl Standalone {
    pub fn start() -> Standalone {
        Standalone::start_with(&[])
    }

    /// A standalone with `env` in its environment.
    pub fn start_with(env: &[(&str, &str)]) -> Standalone {
        Standalone::start_serving(env, &[], Api::new)
    }

    /// A standalone with `env` in its environment and `args` on its command line.
    pub fn start_with_args(env: &[(&str, &str)], args: &[&str]) -> Standalone {
        Standalone::start_serving(env, args, Api::new)
    }

    /// A standalone serving HTTPS with `certs` (see [`make_certs`]).
    pub fn start_https(certs: &Certs) -> Standalone {
        let env = [
            ("SHOAL_HTTPS_CERT", certs.cert.to_str().unwrap()),
            ("SHOAL_HTTPS_KEY", certs.key.to_str().unwrap()),
        ];
        Standalone::start_serving(&env, &[], |port| Api::https(port, &certs.ca))
    }

    fn start_serving(
        env: &[(&str, &str)],
        args: &[&str],
        api: impl FnOnce(u16) -> Api,
    ) -> Standalone {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let proc = Self::spawn(dir.path(), 0, "standalone", &env, &args);
        let api = api(bound_port(&proc));
        api.wait_healthy(&[&proc]);
        Standalone {
            dir,
            api,
            proc,
            env,
            args,
        }
    }

    fn spawn(
        dir: &Path,
        port: u16,
        name: &str,
        env: &[(String, String)],
        extra: &[String],
    ) -> Proc {
        let data = dir.join("data");
        let port = port.to_string();
        let mut args = vec![
            "standalone",
            "--data-dir",
            data.to_str().unwrap(),
            "--port",
            &port,
            "--datasource",
            TEST_DATASOURCE,
        ];
        args.extend(extra.iter().map(String::as_str));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Proc::spawn(name, dir, SHOAL, &args, &env)
    }

    /// Kills the process with SIGKILL (a crash) and starts it again on the same data.
    pub fn crash_and_restart(&mut self) {
        self.proc.kill();
        let port: u16 = self.api.base.rsplit(':').next().unwrap().parse().unwrap();
        let (env, args) = (&self.env, &self.args);
        self.proc = Self::spawn(self.dir.path(), port, "standalone-restarted", env, args);
        self.api.wait_healthy(&[&self.proc]);
    }

    /// [`Standalone::crash_and_restart`] with `env` in place of the environment it had.
    pub fn crash_and_restart_with(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.crash_and_restart();
    }
}

/// A cluster of separate processes on a fresh Postgres (or MariaDB) database and a real
/// etcd: an api-server, `masters` masters and `workers` workers (4 slots unless
/// `SHOAL_SLOTS` is in the extra environment, group `default`).
pub struct MiniCluster {
    /// Dropped first: nodes, then etcd (last in the list).
    pub procs: Vec<Proc>,
    pub api: Api,
    pub db: ClusterDb,
    pub dir: tempfile::TempDir,
}

/// The database a [`MiniCluster`]'s nodes share, dropped with it.
pub enum ClusterDb {
    Postgres(TestDb),
    Mysql(TestMysqlDb),
}

impl ClusterDb {
    pub fn url(&self) -> &str {
        match self {
            ClusterDb::Postgres(db) => &db.url,
            ClusterDb::Mysql(db) => &db.url,
        }
    }
}

impl MiniCluster {
    /// As production runs: calls between nodes on mutual TLS (certificates in
    /// `dir/cluster-*`) and carrying the cluster secret.
    pub fn start(masters: usize, workers: usize) -> MiniCluster {
        MiniCluster::start_env(masters, workers, &[])
    }

    /// [`MiniCluster::start`] with `extra` in every node's environment.
    pub fn start_env(masters: usize, workers: usize, extra: &[(&str, &str)]) -> MiniCluster {
        let dir = tempfile::tempdir().unwrap();
        let certs = make_certs(dir.path(), "cluster");
        let env: Vec<(&str, &str)> = certs
            .env()
            .into_iter()
            .chain(extra.iter().copied())
            .collect();
        let db = ClusterDb::Postgres(TestDb::create("shoal_cluster"));
        MiniCluster::start_with(masters, workers, dir, db, &env)
    }

    /// [`MiniCluster::start`] on a fresh MySQL/MariaDB database.
    pub fn start_mysql(masters: usize, workers: usize) -> MiniCluster {
        let dir = tempfile::tempdir().unwrap();
        let certs = make_certs(dir.path(), "cluster");
        let db = ClusterDb::Mysql(TestMysqlDb::create("shoal_cluster"));
        MiniCluster::start_with(masters, workers, dir, db, &certs.env())
    }

    /// A cluster in `dir` on `db` whose every node also gets `extra` in its environment.
    fn start_with(
        masters: usize,
        workers: usize,
        dir: tempfile::TempDir,
        db: ClusterDb,
        extra: &[(&str, &str)],
    ) -> MiniCluster {
        let (etcd, etcd_url) = start_etcd(dir.path());
        let mut env = vec![
            ("SHOAL_DATABASE_URL", db.url()),
            ("SHOAL_ETCD", etcd_url.as_str()),
            ("SHOAL_LEASE_TTL", "5"),
            ("SHOAL_CLUSTER_SECRET", CLUSTER_SECRET),
            ("SHOAL_SECRET_KEY", SECRET_KEY),
        ];
        env.extend_from_slice(extra);
        let (api_server, api) = start_api_server(dir.path(), &env);
        // Callback tasks hand out callback URLs on the api-server.
        let api_url = api.base.clone();
        env.push(("SHOAL_API_URL", &api_url));
        let mut nodes = vec![];
        // Port 0: each registers the address it bound.
        for i in 0..masters {
            let args = ["master", "--port", "0"];
            nodes.push(Proc::spawn(
                &format!("master{i}"),
                dir.path(),
                SHOAL,
                &args,
                &env,
            ));
        }
        // Four slots each, unless the test's environment gives SHOAL_SLOTS.
        let slots = extra
            .iter()
            .find(|(k, _)| *k == "SHOAL_SLOTS")
            .map_or("4", |(_, v)| *v);
        for i in 0..workers {
            let data = dir.path().join(format!("worker{i}"));
            let args = [
                "worker",
                "--port",
                "0",
                "--slots",
                slots,
                "--data-dir",
                data.to_str().unwrap(),
                "--datasource",
                TEST_DATASOURCE,
                // Tasks run as the test's user, writing where the tests read.
                "--single-team",
            ];
            nodes.push(Proc::spawn(
                &format!("worker{i}"),
                dir.path(),
                SHOAL,
                &args,
                &env,
            ));
        }
        for node in &nodes {
            let started = format!("{} started", node.name.trim_end_matches(char::is_numeric));
            wait_for(
                &format!("{} to register ('{started}' in its log)", node.name),
                Duration::from_secs(60),
                || node.log_text().contains(&started).then_some(()),
            );
        }
        nodes.extend([api_server, etcd]);
        MiniCluster {
            procs: nodes,
            api,
            db,
            dir,
        }
    }
}

/// The files of one node's mutual TLS: its certificate and key, and its cluster's CA.
pub struct Certs {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl Certs {
    /// The environment that gives a node these files.
    pub fn env(&self) -> [(&'static str, &str); 3] {
        [
            ("SHOAL_TLS_CERT", self.cert.to_str().unwrap()),
            ("SHOAL_TLS_KEY", self.key.to_str().unwrap()),
            ("SHOAL_TLS_CA", self.ca.to_str().unwrap()),
        ]
    }
}

/// A new CA in `dir` (files `<name>-ca.*`) and a node certificate it signed for
/// 127.0.0.1 and localhost, made with openssl as docs/security.md shows.
pub fn make_certs(dir: &Path, name: &str) -> Certs {
    let file = |suffix: &str| dir.join(format!("{name}-{suffix}"));
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            text(&out.stderr)
        );
    };
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let (ca_key, ca, key, csr, cert, ext) = (
        file("ca.key"),
        file("ca.pem"),
        file("node.key"),
        file("node.csr"),
        file("node.pem"),
        file("node.ext"),
    );
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let subject = format!("/CN={name}-ca");
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            &s(&ca_key),
            "-out",
            &s(&ca),
            "-days",
            "2",
            "-subj",
            &subject,
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            &s(&key),
            "-out",
            &s(&csr),
            "-subj",
            "/CN=shoal-node",
        ],
    ]
    .concat());
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        &s(&csr),
        "-CA",
        &s(&ca),
        "-CAkey",
        &s(&ca_key),
        "-CAcreateserial",
        "-out",
        &s(&cert),
        "-days",
        "2",
        "-extfile",
        &s(&ext),
    ]);
    Certs { cert, key, ca }
}

// ---- one test over both deployments (semantics, execution types, groups, alerts) ----

pub const LONG: Duration = Duration::from_secs(60);

/// Runs each listed test function (taking an [`Env`]) once over `shoal standalone` and
/// once over a one-master, one-worker [`MiniCluster`], in modules `standalone` and `cluster`.
#[allow(unused_macros)] // not every test binary runs over both
macro_rules! deployments {
    ($($test:ident),* $(,)?) => {
        $crate::support::deployments!(env: &[]; $($test),*);
    };
    // With `env` in the environment of the standalone and of every node of the cluster.
    (env: $env:expr; $($test:ident),* $(,)?) => {
        mod standalone {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::support::Env::Standalone(
                        $crate::support::Standalone::start_with($env),
                    ));
                }
            )*
        }
        mod cluster {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::support::Env::Cluster(
                        $crate::support::MiniCluster::start_env(1, 1, $env),
                    ));
                }
            )*
        }
    };
}

#[allow(unused_imports)]
pub(crate) use deployments;

/// Where a test runs: `shoal standalone` or a cluster of processes.
pub enum Env {
    Standalone(Standalone),
    Cluster(MiniCluster),
}

impl Env {
    pub fn api(&self) -> &Api {
        match self {
            Env::Standalone(s) => &s.api,
            Env::Cluster(c) => &c.api,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        match self {
            Env::Standalone(s) => s.dir.path().join(name),
            Env::Cluster(c) => c.dir.path().join(name),
        }
    }

    pub fn apply(&self, yaml: &str) {
        let (status, body) = self.api().post("/projects/default/workflows", yaml);
        assert!(status == 201 || status == 200, "apply: {status} {body}");
    }

    /// Starts a workflow with a JSON start body and returns the instance id.
    pub fn start(&self, name: &str, body: &str) -> i64 {
        let (status, resp) = self
            .api()
            .post(&format!("/projects/default/workflows/{name}/start"), body);
        assert_eq!(status, 202, "start {name}: {resp}");
        self.instance_of(resp["command_id"].as_i64().unwrap())
    }

    pub fn instance_of(&self, command: i64) -> i64 {
        wait_for(&format!("command {command}"), LONG, || {
            let c = self.api().get(&format!("/commands/{command}"));
            assert_ne!(c["status"], "error", "{c}");
            c["workflow_instance_id"].as_i64()
        })
    }

    pub fn action(&self, id: i64, action: &str) -> (u16, Value) {
        self.api().post(&format!("/instances/{id}/{action}"), "")
    }

    pub fn wait_state(&self, id: i64, states: &[&str]) -> Value {
        wait_for(&format!("instance {id} to reach {states:?}"), LONG, || {
            let inst = self.api().get(&format!("/instances/{id}"));
            states
                .contains(&inst["state"].as_str().unwrap_or_default())
                .then_some(inst)
        })
    }

    pub fn end(&self, id: i64) -> Value {
        self.wait_state(id, &["success", "failure", "stopped", "paused"])
    }
}

impl Env {
    /// Everything the processes of the deployment logged so far.
    pub fn log_text(&self) -> String {
        match self {
            Env::Standalone(s) => s.proc.log_text(),
            Env::Cluster(c) => c.procs.iter().map(Proc::log_text).collect(),
        }
    }
}

/// The task-instance rows (every attempt) of task `name` in an instance's JSON.
/// The lines of a file a test's tasks append to (none if it does not exist yet).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn attempts<'a>(inst: &'a Value, name: &str) -> Vec<&'a Value> {
    inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == name)
        .collect()
}

/// `shoal secret set NAME` with `value` on stdin.
pub fn set_secret(e: &Env, name: &str, value: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new(SHOAL)
        .args(["secret", "set", name, "--description", "test"])
        .env("SHOAL_API", &e.api().base)
        .env("SHOAL_TOKEN", API_TOKEN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{value}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "secret set {name}: {}",
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains(value));
}
