//! The fault-injection harness of tests/fault_injection.rs and tests/fault_campaign.rs: a
//! cluster of real processes (etcd, a fresh Postgres database, `shoal api-server`, masters
//! and workers) that a test drives, faults it injects, and the checks every scenario ends
//! with. Every task appends
//! `start|end <instance> <task> <task-instance id>` to one shared execution log, which the
//! checks compare with the task rows the API reports.
#![allow(dead_code)] // each test binary uses a different subset

use crate::support::{
    self, Api, Lcg, Proc, SHOAL, TestDb, free_port, poll, start_api_server, start_etcd_on,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lease TTL (seconds) of every node: a dead node leaves the registry this long after
/// its last renewal. Short, so that failover is quick.
pub const LEASE_TTL: &str = "2";
/// Longest wait for a new master to take over: the lease, the failover loop's 5 s
/// fallback tick, and slack for a loaded CI machine.
pub const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for every instance of a scenario to end.
pub const END_TIMEOUT: Duration = Duration::from_secs(60);
pub const DIAMOND_TASKS: [&str; 4] = ["a", "b", "c", "d"];
/// The name the nodes of [`Cluster::start_hosts_by_name`] reach etcd by.
pub const ETCD_NAME: &str = "etcd.shoal";
/// Instances of short tasks started around a fault, so that it lands while the masters
/// claim commands and dispatch tasks at full speed.
pub const STORM: usize = 120;

// ---------------------------------------------------------------------------------------
// The cluster

pub struct Node {
    pub name: String,
    /// host:port as registered: the owner name of a master's instances, the `worker` of a
    /// task row.
    pub addr: String,
    pub proc: Proc,
}

/// The processes of one test's cluster. Field order is drop order: shoal nodes go first,
/// then etcd, then the database and the directory.
pub struct Cluster {
    test: &'static str,
    pub masters: Vec<Node>,
    pub workers: Vec<Node>,
    _api_server: Proc,
    /// Replaced when etcd restarts (behind a lock, so that a test can restart it while
    /// other threads use the cluster).
    etcd: std::sync::Mutex<Proc>,
    /// The network hosts of a cluster on separate hosts ([`Cluster::start_hosts`]); after
    /// the processes, so that their namespaces go once they are dead.
    pub hosts: Option<Hosts>,
    pub api: Api,
    etcd_ports: (u16, u16),
    etcd_url: String,
    /// The database URL of the nodes (through the proxy of a cluster on hosts).
    node_db: String,
    etcd_starts: std::sync::atomic::AtomicUsize,
    /// The network host etcd runs on (a cluster on hosts), which [`Cluster::move_etcd`]
    /// changes.
    etcd_host: std::sync::Mutex<String>,
    pub db: TestDb,
    /// The execution log every task appends to.
    pub execs: PathBuf,
    t0: Instant,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// etcd, api-server, two masters and a worker per entry of `worker_groups` (its
    /// `--groups`).
    pub fn start(test: &'static str, worker_groups: &[&str]) -> Cluster {
        Self::start_on(TestDb::create("shoal_fault"), test, worker_groups)
    }

    /// The same on the database `db` (e.g. on a Postgres server of the test's own).
    pub fn start_on(db: TestDb, test: &'static str, worker_groups: &[&str]) -> Cluster {
        let t0 = Instant::now();
        let mut dir = tempfile::tempdir().unwrap();
        // SHOAL_FAULT_KEEP=1 keeps the logs and the execution log for a look afterwards.
        if std::env::var_os("SHOAL_FAULT_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("[{test}] keeping {}", dir.path().display());
        }
        let etcd_ports = (free_port(), free_port());
        let (etcd, etcd_url) = start_etcd_on(dir.path(), "etcd", etcd_ports.0, etcd_ports.1);
        let execs = dir.path().join("executions");
        let env = node_env(&db.url, &etcd_url);
        let (api_server, api) = start_api_server(dir.path(), &env);
        let mut c = Cluster {
            test,
            masters: vec![],
            workers: vec![],
            _api_server: api_server,
            etcd: std::sync::Mutex::new(etcd),
            hosts: None,
            api,
            etcd_ports,
            etcd_url,
            node_db: db.url.clone(),
            etcd_starts: std::sync::atomic::AtomicUsize::new(1),
            etcd_host: std::sync::Mutex::new("etcd".into()),
            db,
            execs,
            t0,
            dir,
        };
        for i in 0..2 {
            let m = c.spawn_node(&format!("master{i}"), &["master"]);
            c.masters.push(m);
        }
        for (i, groups) in worker_groups.iter().enumerate() {
            c.add_worker(&format!("worker{i}"), groups);
        }
        c.log(&format!(
            "cluster up: masters {:?}, workers {:?}",
            c.masters.iter().map(|n| &n.addr).collect::<Vec<_>>(),
            c.workers.iter().map(|n| &n.addr).collect::<Vec<_>>()
        ));
        c
    }

    /// The same cluster on separate network hosts ([`testkit::Net`]): etcd, the
    /// api-server, each master and each worker in a network namespace of its own on the
    /// test's bridge; Postgres (the machine's) through a proxy on the bridge's address in
    /// the root namespace. None, after printing why, where this machine makes no
    /// namespaces.
    pub fn start_hosts(test: &'static str, worker_groups: &[&str]) -> Option<Cluster> {
        Self::start_hosts_as(test, worker_groups, false)
    }

    /// [`Cluster::start_hosts`] with the nodes reaching etcd by the name [`ETCD_NAME`]
    /// (each host's /etc/hosts), so that etcd can move to another address
    /// ([`Cluster::move_etcd`]).
    pub fn start_hosts_by_name(test: &'static str, worker_groups: &[&str]) -> Option<Cluster> {
        Self::start_hosts_as(test, worker_groups, true)
    }

    fn start_hosts_as(
        test: &'static str,
        worker_groups: &[&str],
        by_name: bool,
    ) -> Option<Cluster> {
        let net = support::Net::or_skip(test)?;
        let t0 = Instant::now();
        let db = TestDb::create("shoal_part");
        let mut dir = tempfile::tempdir().unwrap();
        if std::env::var_os("SHOAL_FAULT_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("[{test}] keeping {}", dir.path().display());
        }
        let gw = net.gateway();
        let pg = support::TcpProxy::start_on(&gw.to_string(), &server_of(&db.url));
        let node_db = with_server(&db.url, &format!("{gw}:{}", pg.port));
        let etcd_host = net.host("etcd");
        let etcd_ports = (2379, 2380);
        let (etcd, etcd_url) = support::start_etcd_in(
            Some(&etcd_host),
            dir.path(),
            "etcd",
            etcd_ports.0,
            etcd_ports.1,
        );
        let etcd_url = if by_name {
            net.set_name(ETCD_NAME, etcd_host.ip);
            format!("http://{ETCD_NAME}:{}", etcd_ports.0)
        } else {
            etcd_url
        };
        let api_host = net.host("api-server");
        let api_db = format!("{node_db}?application_name=api-server");
        let env: Vec<(&str, &str)> = [("SHOAL_TOKEN", support::API_TOKEN)]
            .into_iter()
            .chain(node_env(&api_db, &etcd_url))
            .collect();
        let bind = api_host.ip.to_string();
        let mut args = api_host.wrap(SHOAL);
        args.extend(["api-server", "--port", "8080", "--bind", &bind]);
        let api_server = Proc::spawn("api-server", dir.path(), "ip", &args, &env);
        let api = Api::on(&bind, 8080);
        api.wait_healthy(&[&api_server]);
        let mut c = Cluster {
            test,
            masters: vec![],
            workers: vec![],
            _api_server: api_server,
            etcd: std::sync::Mutex::new(etcd),
            hosts: Some(Hosts {
                net,
                pg_port: pg.port,
                _pg: pg,
            }),
            api,
            etcd_ports,
            etcd_url,
            node_db,
            etcd_starts: std::sync::atomic::AtomicUsize::new(1),
            etcd_host: std::sync::Mutex::new("etcd".into()),
            db,
            execs: dir.path().join("executions"),
            t0,
            dir,
        };
        for i in 0..2 {
            let m = c.spawn_node_on(5678, &format!("master{i}"), &["master"]);
            c.masters.push(m);
        }
        for (i, groups) in worker_groups.iter().enumerate() {
            let w = c.spawn_worker(1234, &format!("worker{i}"), groups);
            c.workers.push(w);
        }
        c.log(&format!(
            "cluster up on hosts: api-server {}, etcd {}, masters {:?}, workers {:?}",
            c.api.base,
            c.etcd_url,
            c.masters.iter().map(|n| &n.addr).collect::<Vec<_>>(),
            c.workers.iter().map(|n| &n.addr).collect::<Vec<_>>()
        ));
        Some(c)
    }

    /// The network of a cluster on hosts.
    pub fn net(&self) -> &support::Net {
        &self.hosts.as_ref().expect("a cluster on hosts").net
    }

    /// The network host of node `name` (`etcd`, `api-server`, `master0`, `worker1`, ...).
    pub fn host(&self, name: &str) -> support::Host {
        self.net().host(name)
    }

    /// Postgres as the nodes reach it: the proxy on the bridge.
    pub fn postgres_peer(&self) -> support::Peer {
        let h = self.hosts.as_ref().expect("a cluster on hosts");
        support::Peer {
            ip: h.net.gateway(),
            port: Some(h.pg_port),
        }
    }

    /// etcd's client port on its host.
    pub fn etcd_peer(&self) -> support::Peer {
        support::Peer {
            ip: self.host(&self.etcd_host.lock().unwrap()).ip,
            port: Some(self.etcd_ports.0),
        }
    }

    pub fn log(&self, msg: &str) {
        eprintln!(
            "[{} +{:.1}s] {msg}",
            self.test,
            self.t0.elapsed().as_secs_f64()
        );
    }

    /// Starts `shoal <role_args> --port P` and waits until it has registered.
    pub fn spawn_node(&self, name: &str, role_args: &[&str]) -> Node {
        self.spawn_node_on(free_port(), name, role_args)
    }

    pub fn spawn_node_on(&self, port: u16, name: &str, role_args: &[&str]) -> Node {
        self.spawn_on_db(port, name, role_args, &self.node_db)
    }

    /// A node that reaches the database at `db_url` (e.g. through a [`PgProxy`]).
    pub fn spawn_on_db(&self, port: u16, name: &str, role_args: &[&str], db_url: &str) -> Node {
        self.spawn_via(port, name, role_args, db_url, &self.etcd_url)
    }

    /// A node that reaches the database at `db_url` and etcd at `etcd_url` (e.g. through
    /// a [`testkit::TcpHole`]).
    pub fn spawn_via(
        &self,
        port: u16,
        name: &str,
        role_args: &[&str],
        db_url: &str,
        etcd_url: &str,
    ) -> Node {
        self.spawn_with_env(port, name, role_args, db_url, etcd_url, &[])
    }

    /// [`Cluster::spawn_via`] with `extra` in the node's environment (e.g. libfaketime's).
    pub fn spawn_with_env(
        &self,
        port: u16,
        name: &str,
        role_args: &[&str],
        db_url: &str,
        etcd_url: &str,
        extra: &[(&str, &str)],
    ) -> Node {
        // On separate hosts: the node's own namespace, its address advertised, and its
        // name on its database sessions (the store's audit tells the nodes apart).
        let host = self.hosts.as_ref().map(|h| h.net.host(name));
        let db_url = match &host {
            Some(_) => format!("{db_url}?application_name={name}"),
            None => db_url.to_string(),
        };
        let mut args: Vec<&str> = host.as_ref().map_or(vec![], |h| h.wrap(SHOAL));
        args.extend(role_args);
        let port_s = port.to_string();
        args.extend(["--port", &port_s]);
        let env = node_env(&db_url, etcd_url);
        // Callback tasks hand out callback URLs on the api-server.
        let mut env = env.to_vec();
        env.push(("SHOAL_API_URL", &self.api.base));
        let ip = host
            .as_ref()
            .map_or("127.0.0.1".to_string(), |h| h.ip.to_string());
        if host.is_some() {
            env.push(("SHOAL_ADVERTISE_HOST", &ip));
        }
        env.extend_from_slice(extra);
        let program = if host.is_some() { "ip" } else { SHOAL };
        let proc = Proc::spawn(name, self.dir.path(), program, &args, &env);
        let started = if role_args[0] == "master" {
            "master started"
        } else {
            "worker started"
        };
        support::wait_for(
            &format!("{name} to register ('{started}' in its log)"),
            Duration::from_secs(60),
            || proc.log_text().contains(started).then_some(()),
        );
        Node {
            name: name.to_string(),
            addr: format!("{ip}:{port}"),
            proc,
        }
    }

    pub fn add_worker(&mut self, name: &str, groups: &str) -> String {
        let w = self.spawn_worker(free_port(), name, groups);
        let addr = w.addr.clone();
        self.workers.push(w);
        addr
    }

    /// A worker with its own data dir (the same one on every start under `name`).
    pub fn spawn_worker(&self, port: u16, name: &str, groups: &str) -> Node {
        self.spawn_worker_via(port, name, groups, &self.etcd_url)
    }

    /// The same, reaching etcd at `etcd_url`.
    pub fn spawn_worker_via(&self, port: u16, name: &str, groups: &str, etcd_url: &str) -> Node {
        let data = self.dir.path().join(name);
        let data = data.to_str().unwrap().to_string();
        self.spawn_via(
            port,
            name,
            &[
                "worker",
                "--slots",
                "4",
                "--groups",
                groups,
                "--data-dir",
                &data,
                // Low, so that a test machine short of disk still runs tasks; the campaign
                // fills a small disk past it.
                "--min-free-disk",
                "1MiB",
                // Tasks run as the test's user, writing where the tests read.
                "--single-team",
            ],
            &self.node_db,
            etcd_url,
        )
    }

    /// etcd's host:port.
    /// The etcd URL and database URL of the nodes.
    pub fn urls(&self) -> (&str, &str) {
        (&self.etcd_url, &self.node_db)
    }

    pub fn etcd_addr(&self) -> String {
        let etcd = self.etcd_host.lock().unwrap().clone();
        let host = self.hosts.as_ref().map(|h| h.net.host(&etcd).ip);
        format!(
            "{}:{}",
            host.unwrap_or([127, 0, 0, 1].into()),
            self.etcd_ports.0
        )
    }

    /// SIGKILL etcd, and later start it again on the same ports and data dir.
    pub fn kill_etcd(&self) {
        self.etcd.lock().unwrap().kill();
    }

    pub fn restart_etcd(&self) {
        let n = 1 + self
            .etcd_starts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let etcd = self.etcd_host.lock().unwrap().clone();
        let host = self.hosts.as_ref().map(|h| h.net.host(&etcd));
        let (etcd, url) = support::start_etcd_in(
            host.as_ref(),
            self.dir.path(),
            &format!("etcd{n}"),
            self.etcd_ports.0,
            self.etcd_ports.1,
        );
        if !self.etcd_url.contains(ETCD_NAME) {
            assert_eq!(url, self.etcd_url);
        }
        *self.etcd.lock().unwrap() = etcd;
    }

    /// etcd killed and started again on its data dir on another host `to` (another
    /// address); [`ETCD_NAME`] then resolves to it on every host. Only for a cluster
    /// started with [`Cluster::start_hosts_by_name`].
    pub fn move_etcd(&self, to: &str) {
        assert!(
            self.etcd_url.contains(ETCD_NAME),
            "nodes reach etcd by address"
        );
        self.kill_etcd();
        *self.etcd_host.lock().unwrap() = to.to_string();
        self.restart_etcd();
        self.net().set_name(ETCD_NAME, self.host(to).ip);
    }

    pub fn apply(&self, yaml: &str) {
        let (status, body) = self.api.post("/projects/default/workflows", yaml);
        assert!(status == 201 || status == 200, "apply: {status} {body}");
    }

    /// Starts `workflow` with `params`; returns the command id.
    pub fn submit(&self, workflow: &str, params: Value) -> i64 {
        let body = json!({ "params": params }).to_string();
        let (status, resp) = self.api.post(
            &format!("/projects/default/workflows/{workflow}/start"),
            &body,
        );
        assert_eq!(status, 202, "start {workflow}: {resp}");
        resp["command_id"].as_i64().unwrap()
    }

    /// Starts a workflow of [`dag`] with a random sleep per task; returns the command id.
    pub fn submit_naps(&self, workflow: &str, tasks: &[&str], rng: &mut Lcg) -> i64 {
        self.submit_with(workflow, tasks, || rng.tenths(2, 9))
    }

    pub fn submit_with(
        &self,
        workflow: &str,
        tasks: &[&str],
        mut nap: impl FnMut() -> String,
    ) -> i64 {
        let params: serde_json::Map<String, Value> = tasks
            .iter()
            .map(|t| (format!("n_{t}"), Value::String(nap())))
            .collect();
        self.submit(workflow, Value::Object(params))
    }

    pub fn submit_diamond(&self, rng: &mut Lcg) -> i64 {
        self.submit_naps("diamond", &DIAMOND_TASKS, rng)
    }

    /// A diamond whose tasks sleep 1.0 to 2.5 s: still running after a loaded machine's
    /// slow start.
    pub fn submit_slow_diamond(&self, rng: &mut Lcg) -> i64 {
        self.submit_with("diamond", &DIAMOND_TASKS, || rng.tenths(10, 25))
    }

    pub fn instance_of(&self, command: i64) -> i64 {
        self.wait_until(
            &format!("command {command} to become an instance"),
            Duration::from_secs(60),
            &[],
            || {
                let c = self.api.get(&format!("/commands/{command}"));
                assert_ne!(c["status"], "error", "command {command} failed: {c}");
                c["workflow_instance_id"].as_i64()
            },
        )
    }

    pub fn instance(&self, id: i64) -> Value {
        self.api.get(&format!("/instances/{id}"))
    }

    /// One line per instance: state, owner and every attempt, for failure messages. Of
    /// many instances, only those that did not succeed are shown.
    pub fn describe(&self, ids: &[i64]) -> String {
        let mut out = String::new();
        let mut succeeded = 0;
        for id in ids {
            let inst = self.instance(*id);
            if ids.len() > 12 && inst["state"] == "success" {
                succeeded += 1;
                continue;
            }
            out.push_str(&format!(
                "\n  instance {id}: {} (master {})",
                inst["state"].as_str().unwrap_or("?"),
                inst["master"].as_str().unwrap_or("-")
            ));
            for t in inst["tasks"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    " | {}#{} id {} {} @{}",
                    t["name"].as_str().unwrap_or("?"),
                    t["attempt"],
                    t["id"],
                    t["state"].as_str().unwrap_or("?"),
                    t["worker"].as_str().unwrap_or("-")
                ));
                if let Some(m) = t["message"].as_str().filter(|m| !m.is_empty()) {
                    out.push_str(&format!(" ({m})"));
                }
            }
        }
        if succeeded > 0 {
            out.push_str(&format!("\n  ({succeeded} more instances succeeded)"));
        }
        out
    }

    /// Polls `f` until it returns Some; on timeout fails naming `what` and showing the
    /// instances `ids`.
    pub fn wait_until<T>(
        &self,
        what: &str,
        timeout: Duration,
        ids: &[i64],
        f: impl FnMut() -> Option<T>,
    ) -> T {
        poll(timeout, f).unwrap_or_else(|| {
            panic!(
                "[{}] timed out after {timeout:?} waiting for {what}; instances:{}\ndatabase sessions (state, wait, query):\n{}",
                self.test,
                self.describe(ids),
                self.db_sessions()
            )
        })
    }

    /// The ids of `workflow`'s instances newer than instance `after`.
    pub fn instances_after(&self, workflow: &str, after: i64) -> Vec<i64> {
        let list = self
            .api
            .get(&format!("/instances?workflow={workflow}&limit=1000"));
        let mut ids: Vec<i64> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_i64().unwrap())
            .filter(|id| *id > after)
            .collect();
        ids.sort();
        ids
    }

    /// Waits until every instance is in a terminal state; returns them with their tasks.
    pub fn wait_all_end(&self, ids: &[i64]) -> Vec<Value> {
        let wanted: HashSet<i64> = ids.iter().copied().collect();
        self.wait_until("every instance to end", END_TIMEOUT, ids, || {
            let list = self.api.get("/instances?limit=1000");
            let ended = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| wanted.contains(&i["id"].as_i64().unwrap()))
                .filter(|i| {
                    matches!(
                        i["state"].as_str(),
                        Some("success" | "failure" | "stopped" | "paused")
                    )
                })
                .count();
            (ended == wanted.len()).then_some(())
        });
        ids.iter().map(|id| self.instance(*id)).collect()
    }

    /// Waits until some task of `ids` is running; returns the running rows.
    pub fn wait_running(&self, ids: &[i64]) -> Vec<Value> {
        self.wait_until("a task to run", Duration::from_secs(60), ids, || {
            let rows = self.rows_in(ids, "running");
            (!rows.is_empty()).then_some(rows)
        })
    }

    /// Task rows of `ids` in `state`.
    pub fn rows_in(&self, ids: &[i64], state: &str) -> Vec<Value> {
        ids.iter()
            .flat_map(|id| {
                let inst = self.instance(*id);
                inst["tasks"].as_array().cloned().unwrap_or_default()
            })
            .filter(|t| t["state"] == state)
            .collect()
    }

    /// Instances in `state` driven by `owner`, with their owner epoch (read from the
    /// database: the API does not show epochs).
    pub fn owned(&self, owner: &str, state: &str) -> BTreeMap<i64, i64> {
        self.db
            .query(&format!(
                "SELECT id, owner_epoch FROM workflow_instance WHERE owner = '{owner}' AND state = '{state}'"
            ))
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (id, epoch) = l.split_once('|').unwrap();
                (id.parse().unwrap(), epoch.parse().unwrap())
            })
            .collect()
    }

    /// The sessions of this test's database that are in a transaction or waiting, for
    /// timeout messages: a frozen node's open transaction shows here.
    pub fn db_sessions(&self) -> String {
        self.db.query(
            "SELECT pid, state, coalesce(wait_event_type, '-'), \
             round(extract(epoch FROM now() - xact_start)::numeric, 1) AS xact_secs, \
             left(regexp_replace(query, '\\s+', ' ', 'g'), 160) \
             FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND (state <> 'idle' OR wait_event_type = 'Lock')",
        )
    }

    /// Holds a lock on `task_instance` that blocks every write to task rows (reads go on)
    /// for `how_long`, in a psql of its own; returns once the lock is held (or the psql
    /// ended). Wait for the returned child.
    pub fn stall_task_writes(&self, how_long: Duration) -> std::process::Child {
        let sql = format!(
            "BEGIN; LOCK TABLE task_instance IN SHARE MODE; SELECT pg_sleep({}); COMMIT;",
            how_long.as_secs_f64()
        );
        let mut stall = std::process::Command::new("psql")
            .args([&self.db.url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", &sql])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("psql must be installed (PostgreSQL client)");
        // Nothing else takes a SHARE lock on task_instance.
        let held = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'task_instance' AND l.mode = 'ShareLock' AND l.granted \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";
        self.wait_until(
            "the stall to lock task_instance",
            Duration::from_secs(30),
            &[],
            || {
                let ended = stall.try_wait().unwrap().is_some();
                (ended || self.db.query(held).trim() != "0").then_some(())
            },
        );
        stall
    }

    /// Every attempt in state `running`, from the database, with when its task stops
    /// sleeping at the earliest (its sleep parameter counted from when it reported
    /// running). Only instances among `sleepy` have tasks that sleep.
    pub fn running_attempts(&self, sleepy: &[i64]) -> Vec<Running> {
        let mut naps: HashMap<i64, Value> = HashMap::new();
        self.db
            .query(
                "SELECT id, workflow_instance_id, worker, name, started_at FROM task_instance \
                 WHERE state = 'running' ORDER BY id",
            )
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                let instance: i64 = f[1].parse().unwrap();
                let nap: f64 = if sleepy.contains(&instance) {
                    let params = naps
                        .entry(instance)
                        .or_insert_with(|| self.instance(instance)["params"].clone());
                    params[format!("n_{}", f[3])]
                        .as_str()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0.0)
                } else {
                    0.0
                };
                let started: i64 = f[4].parse().unwrap_or(0);
                Running {
                    id: f[0].parse().unwrap(),
                    instance,
                    worker: f[2].to_string(),
                    sleeps_until_ms: started + (nap * 1000.0) as i64,
                }
            })
            .collect()
    }

    pub fn epoch(&self, id: i64) -> i64 {
        self.db
            .query(&format!(
                "SELECT owner_epoch FROM workflow_instance WHERE id = {id}"
            ))
            .trim()
            .parse()
            .unwrap()
    }

    pub fn executions(&self) -> Vec<Exec> {
        std::fs::read_to_string(&self.execs)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(f.len(), 4, "execution log line '{l}'");
                Exec {
                    start: match f[0] {
                        "start" => true,
                        "end" => false,
                        other => panic!("execution log line '{l}': {other}"),
                    },
                    instance: f[1].parse().unwrap(),
                    task: f[2].to_string(),
                    tid: f[3].parse().unwrap(),
                }
            })
            .collect()
    }

    /// Each command became exactly one instance, and `workflow` has no others.
    pub fn check_commands(&self, workflow: &str, commands: &[i64], ids: &[i64]) {
        assert_eq!(commands.len(), ids.len());
        let distinct: HashSet<_> = ids.iter().collect();
        assert_eq!(
            distinct.len(),
            ids.len(),
            "two commands became the same instance: {ids:?}"
        );
        for (cmd, id) in commands.iter().zip(ids) {
            let inst = self.instance(*id);
            assert_eq!(inst["command_id"], *cmd, "instance {id}: {inst}");
        }
        let listed = self
            .api
            .get(&format!("/instances?workflow={workflow}&limit=1000"));
        let listed: HashSet<i64> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_i64().unwrap())
            .collect();
        assert_eq!(
            listed,
            ids.iter().copied().collect::<HashSet<_>>(),
            "no command became two instances, none was lost"
        );
    }

    /// The end state every scenario must reach (see the module doc). `nothing_rerun`:
    /// no worker died, so every task ran exactly once and has exactly one attempt row.
    pub fn check_runs(&self, ids: &[i64], tasks: &[&str], nothing_rerun: bool) -> Vec<Value> {
        let insts = self.wait_all_end(ids);
        let execs = self.executions();
        let mut starts: HashMap<i64, usize> = HashMap::new();
        let mut ends: HashMap<i64, usize> = HashMap::new();
        let mut per_task: HashMap<(i64, &str), usize> = HashMap::new();
        for e in &execs {
            if e.start {
                *starts.entry(e.tid).or_default() += 1;
                *per_task.entry((e.instance, e.task.as_str())).or_default() += 1;
            } else {
                *ends.entry(e.tid).or_default() += 1;
            }
        }
        for inst in &insts {
            let id = inst["id"].as_i64().unwrap();
            let described = || self.describe(&[id]);
            assert_eq!(
                inst["state"],
                "success",
                "[{}] instance {id} did not succeed:{}",
                self.test,
                described()
            );
            let rows = inst["tasks"].as_array().unwrap();
            let row_ids: HashMap<i64, &str> = rows
                .iter()
                .map(|r| (r["id"].as_i64().unwrap(), r["name"].as_str().unwrap()))
                .collect();
            for r in rows {
                let state = r["state"].as_str().unwrap();
                // A failed attempt is one its retry made good.
                let retried = || {
                    rows.iter().any(|later| {
                        later["name"] == r["name"]
                            && later["state"] == "success"
                            && later["attempt"].as_i64() > r["attempt"].as_i64()
                    })
                };
                assert!(
                    state == "success"
                        || (state == "need_fault_tolerance" && !nothing_rerun)
                        || (state == "failure" && retried()),
                    "[{}] instance {id} ended success but its attempt {} ({}#{}) is {state}:{}",
                    self.test,
                    r["id"],
                    r["name"],
                    r["attempt"],
                    described()
                );
            }
            for task in tasks {
                let succeeded: Vec<&Value> = rows
                    .iter()
                    .filter(|r| r["name"] == *task && r["state"] == "success")
                    .collect();
                assert_eq!(
                    succeeded.len(),
                    1,
                    "[{}] instance {id}: task {task} must have exactly one success row:{}",
                    self.test,
                    described()
                );
                let tid = succeeded[0]["id"].as_i64().unwrap();
                let (s, e) = (
                    starts.get(&tid).copied().unwrap_or(0),
                    ends.get(&tid).copied().unwrap_or(0),
                );
                // Where a worker was killed, an attempt whose dispatch call died with it may
                // have started there too and been sent again (the master cannot tell a lost
                // answer from a refusal); it never finished there. Invariant 5 is about
                // finished tasks: the successful attempt ends exactly once.
                // No log lost: the successful attempt's log is readable, whatever became
                // of its worker (or its disk).
                let (source, log) = self.api.log(tid);
                assert!(
                    log.contains(&ran_line(id, task, tid)),
                    "[{}] instance {id}: the log of {task} (attempt {tid}, from the {source}) lost its line:\n{log}",
                    self.test
                );
                let interrupted_once = !nothing_rerun && s == 2;
                assert!(
                    e == 1 && (s == 1 || interrupted_once),
                    "[{}] instance {id}: the successful attempt {tid} of {task} must have run exactly once, it started {s} and ended {e} times:{}",
                    self.test,
                    described()
                );
                if nothing_rerun {
                    let runs = per_task.get(&(id, *task)).copied().unwrap_or(0);
                    let attempts = rows.iter().filter(|r| r["name"] == *task).count();
                    assert!(
                        runs == 1 && attempts == 1,
                        "[{}] instance {id}: no worker died, so {task} must run once in one attempt; it ran {runs} times in {attempts} attempts:{}",
                        self.test,
                        described()
                    );
                }
            }
            for e in execs.iter().filter(|e| e.instance == id) {
                let n = starts.get(&e.tid).copied().unwrap_or(0);
                assert!(
                    n <= 1,
                    "[{}] instance {id}: attempt {} of {} started {n} times: an attempt runs at most once:{}",
                    self.test,
                    e.tid,
                    e.task,
                    described()
                );
                assert_eq!(
                    row_ids.get(&e.tid).copied(),
                    Some(e.task.as_str()),
                    "[{}] instance {id}: task {} ran as task instance {}, which is not one of its attempt rows:{}",
                    self.test,
                    e.task,
                    e.tid,
                    described()
                );
            }
        }
        insts
    }
}

/// What a cluster on separate hosts has beyond a cluster on loopback.
pub struct Hosts {
    pub net: support::Net,
    /// The proxy to Postgres on the bridge's address, and its port.
    _pg: support::TcpProxy,
    pub pg_port: u16,
}

/// `host:port` of the Postgres URL `url`.
fn server_of(url: &str) -> String {
    let (_, rest) = url.split_once("://").expect("a URL");
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// The Postgres URL `url` with its server replaced by `server` (`host:port`).
fn with_server(url: &str, server: &str) -> String {
    url.replacen(&server_of(url), server, 1)
}

/// The environment of every shoal node.
pub fn node_env<'a>(db: &'a str, etcd: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("SHOAL_DATABASE_URL", db),
        ("SHOAL_ETCD", etcd),
        ("SHOAL_LEASE_TTL", LEASE_TTL),
        ("SHOAL_CLUSTER_SECRET", support::CLUSTER_SECRET),
    ]
}

pub fn lease_ttl() -> Duration {
    Duration::from_secs(LEASE_TTL.parse().unwrap())
}

/// An attempt that was running when looked at.
#[derive(Debug)]
pub struct Running {
    pub id: i64,
    pub instance: i64,
    pub worker: String,
    /// Its task sleeps at least until then (ms since the epoch).
    pub sleeps_until_ms: i64,
}

/// One line of the execution log.
pub struct Exec {
    pub start: bool,
    pub instance: i64,
    pub task: String,
    pub tid: i64,
}

/// A task command that records its execution around a sleep of `${nap}`, and says
/// [`ran_line`] in its log.
pub fn recorded(log: &Path, task: &str, nap: &str) -> String {
    let l = log.display();
    let me = format!("${{system.workflow.instance.id}} {task} ${{system.task.instance.id}}");
    format!("echo start {me} >> {l}; echo ran {me}; sleep ${{{nap}}}; echo end {me} >> {l}")
}

/// What the log of attempt `tid` of `task` in `instance` says, when [`recorded`] ran it.
pub fn ran_line(instance: i64, task: &str, tid: i64) -> String {
    format!("ran {instance} {task} {tid}\n")
}

/// A workflow whose tasks (name, upstream tasks, worker group or "") record their
/// executions; task `x` sleeps its parameter `n_x` (default 0.3 s).
pub fn dag(name: &str, log: &Path, tasks: &[(&str, &[&str], &str)]) -> String {
    let params: Vec<String> = tasks.iter().map(|t| format!("n_{}: '0.3'", t.0)).collect();
    let mut yaml = format!(
        "name: {name}\nparams: {{ {} }}\ntasks:\n",
        params.join(", ")
    );
    for (task, deps, group) in tasks {
        yaml.push_str(&format!(
            "  - {{ name: {task}, type: shell, command: '{}'",
            recorded(log, task, &format!("n_{task}"))
        ));
        if !deps.is_empty() {
            yaml.push_str(&format!(", depends_on: [{}]", deps.join(", ")));
        }
        if !group.is_empty() {
            yaml.push_str(&format!(", worker_group: {group}"));
        }
        yaml.push_str(" }\n");
    }
    yaml
}

/// a -> (b, c) -> d.
pub fn diamond(log: &Path) -> String {
    dag(
        "diamond",
        log,
        &[
            ("a", &[], ""),
            ("b", &["a"], ""),
            ("c", &["a"], ""),
            ("d", &["b", "c"], ""),
        ],
    )
}

/// The state of instance `id` in `insts`.
pub fn find(insts: &[Value], id: i64) -> &Value {
    insts
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("instance {id} missing"))
}

/// Which masters (indices) drive a running instance among `ids`.
pub fn masters_driving(c: &Cluster, ids: &[i64]) -> Vec<usize> {
    let owners: HashSet<String> = ids
        .iter()
        .map(|id| c.instance(*id))
        .filter(|i| i["state"] == "running")
        .filter_map(|i| i["master"].as_str().map(str::to_string))
        .collect();
    (0..c.masters.len())
        .filter(|m| owners.contains(&c.masters[*m].addr))
        .collect()
}

/// Starts `STORM` instances whose tasks do not sleep, from another thread; returns their
/// command ids. Masters claim and dispatch at full speed while it lasts.
pub fn storm<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    c: &'s Cluster,
) -> std::thread::ScopedJoinHandle<'s, Vec<i64>> {
    s.spawn(|| {
        (0..STORM)
            .map(|_| {
                c.submit(
                    "diamond",
                    json!({"n_a": "0", "n_b": "0", "n_c": "0", "n_d": "0"}),
                )
            })
            .collect()
    })
}

/// Submits diamonds after each of `gaps`, from another thread, while the caller injects a
/// fault; returns their command ids.
pub fn submit_during<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    c: &'s Cluster,
    rng: &mut Lcg,
    n: usize,
) -> std::thread::ScopedJoinHandle<'s, Vec<i64>> {
    let gaps: Vec<Duration> = (0..n).map(|_| rng.millis(50, 250)).collect();
    let mut sub_rng = Lcg::new(rng.next_u64());
    s.spawn(move || {
        gaps.into_iter()
            .map(|gap| {
                // Scenario: submissions spread over the fault.
                std::thread::sleep(gap);
                c.submit_diamond(&mut sub_rng)
            })
            .collect()
    })
}
