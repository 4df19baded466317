//! Fault injection on a real cluster: etcd, a fresh Postgres database, `shoal api-server`,
//! two masters and three workers, each its own process. A master or a worker is killed
//! with SIGKILL, a master is frozen with SIGSTOP past its lease and resumed, etcd is
//! killed and restarted, Postgres is crashed and restarted, and a task waits for a worker group that has no worker yet;
//! a master driving a serial workflow's run and a task-group slot holder is killed.
//!
//! Every task appends `start <instance> <task> <task-instance id>` before its work and
//! `end ...` after it to one shared file, so the suite counts real executions and checks
//! them against the task rows the API reports (each attempt is its own row and id):
//! every instance ends `success`, each task has exactly one `success` row, that attempt
//! ran exactly once, no row is left in a non-final state, and each command became
//! exactly one instance. Where no worker died or lost its lease, nothing at all ran twice.
//!
//! The victims and the moments are drawn from a seed printed by every test; rerun with
//! `SHOAL_FAULT_SEED=<seed>` to repeat a draw (timing still varies), and with
//! `SHOAL_FAULT_KEEP=1` to keep every process log and the execution log.
//!
//! Postgres is restarted on a server of that test's own (the other tests share one server,
//! a database each).

mod support;

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Api, Proc, SHOAL, TestDb, free_port, start_api_server, start_etcd_on};

/// Lease TTL (seconds) of every node: a dead node leaves the registry this long after
/// its last renewal. Short, so that failover is quick.
const LEASE_TTL: &str = "2";
/// Longest wait for a new master to take over: the lease, the failover loop's 5 s
/// fallback tick, and slack for a loaded CI machine.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for every instance of a scenario to end.
const END_TIMEOUT: Duration = Duration::from_secs(60);
const DIAMOND_TASKS: [&str; 4] = ["a", "b", "c", "d"];
/// Instances of short tasks started around a fault, so that it lands while the masters
/// claim commands and dispatch tasks at full speed.
const STORM: usize = 120;

// ---------------------------------------------------------------------------------------
// Seeded choices

/// A small LCG (Knuth's MMIX constants): enough to pick victims and moments repeatably.
struct Lcg(u64);

impl Lcg {
    /// The generator of one test: the suite's seed mixed with the test's name, so tests
    /// draw differently but each is repeatable from the printed seed.
    fn for_test(test: &str) -> Lcg {
        let seed = std::env::var("SHOAL_FAULT_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("[{test}] SHOAL_FAULT_SEED={seed}");
        // FNV-1a of the name.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in test.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let mut lcg = Lcg(seed ^ h);
        lcg.next();
        lcg
    }

    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next() % n as u64) as usize
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }

    /// A task's sleep in seconds, 0.2 to 0.9, as text for a parameter.
    fn nap(&mut self) -> String {
        self.nap_tenths(2, 9)
    }

    /// A sleep of `lo` to `hi` tenths of a second, as text for a parameter.
    fn nap_tenths(&mut self, lo: usize, hi: usize) -> String {
        let tenths = lo + self.below(hi - lo + 1);
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}

// ---------------------------------------------------------------------------------------
// The cluster

struct Node {
    name: String,
    /// host:port as registered: the owner name of a master's instances, the `worker` of a
    /// task row.
    addr: String,
    proc: Proc,
}

/// The processes of one test's cluster. Field order is drop order: shoal nodes go first,
/// then etcd, then the database and the directory.
struct Cluster {
    test: &'static str,
    masters: Vec<Node>,
    workers: Vec<Node>,
    _api_server: Proc,
    /// Replaced when etcd restarts (behind a lock, so that a test can restart it while
    /// other threads use the cluster).
    etcd: std::sync::Mutex<Proc>,
    api: Api,
    etcd_ports: (u16, u16),
    etcd_url: String,
    etcd_starts: std::sync::atomic::AtomicUsize,
    db: TestDb,
    /// The execution log every task appends to.
    execs: PathBuf,
    t0: Instant,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// etcd, api-server, two masters and a worker per entry of `worker_groups` (its
    /// `--groups`).
    fn start(test: &'static str, worker_groups: &[&str]) -> Cluster {
        Self::start_on(TestDb::create("shoal_fault"), test, worker_groups)
    }

    /// The same on the database `db` (e.g. on a Postgres server of the test's own).
    fn start_on(db: TestDb, test: &'static str, worker_groups: &[&str]) -> Cluster {
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
            api,
            etcd_ports,
            etcd_url,
            etcd_starts: std::sync::atomic::AtomicUsize::new(1),
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

    fn log(&self, msg: &str) {
        eprintln!(
            "[{} +{:.1}s] {msg}",
            self.test,
            self.t0.elapsed().as_secs_f64()
        );
    }

    /// Starts `shoal <role_args> --port P` and waits until it has registered.
    fn spawn_node(&self, name: &str, role_args: &[&str]) -> Node {
        self.spawn_node_on(free_port(), name, role_args)
    }

    fn spawn_node_on(&self, port: u16, name: &str, role_args: &[&str]) -> Node {
        let mut args: Vec<&str> = role_args.to_vec();
        let port_s = port.to_string();
        args.extend(["--port", &port_s]);
        let env = node_env(&self.db.url, &self.etcd_url);
        let proc = Proc::spawn(name, self.dir.path(), SHOAL, &args, &env);
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
            addr: format!("127.0.0.1:{port}"),
            proc,
        }
    }

    fn add_worker(&mut self, name: &str, groups: &str) -> String {
        let w = self.spawn_worker(free_port(), name, groups);
        let addr = w.addr.clone();
        self.workers.push(w);
        addr
    }

    /// A worker with its own data dir (the same one on every start under `name`).
    fn spawn_worker(&self, port: u16, name: &str, groups: &str) -> Node {
        let data = self.dir.path().join(name);
        let data = data.to_str().unwrap().to_string();
        self.spawn_node_on(
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
            ],
        )
    }

    /// SIGKILL etcd, and later start it again on the same ports and data dir.
    fn kill_etcd(&self) {
        self.etcd.lock().unwrap().kill();
    }

    fn restart_etcd(&self) {
        let n = 1 + self
            .etcd_starts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (etcd, url) = start_etcd_on(
            self.dir.path(),
            &format!("etcd{n}"),
            self.etcd_ports.0,
            self.etcd_ports.1,
        );
        assert_eq!(url, self.etcd_url);
        *self.etcd.lock().unwrap() = etcd;
    }

    fn apply(&self, yaml: &str) {
        let (status, body) = self.api.post("/projects/default/workflows", yaml);
        assert!(status == 201 || status == 200, "apply: {status} {body}");
    }

    /// Starts `workflow` with `params`; returns the command id.
    fn submit(&self, workflow: &str, params: Value) -> i64 {
        let body = json!({ "params": params }).to_string();
        let (status, resp) = self.api.post(
            &format!("/projects/default/workflows/{workflow}/start"),
            &body,
        );
        assert_eq!(status, 202, "start {workflow}: {resp}");
        resp["command_id"].as_i64().unwrap()
    }

    /// Starts a workflow of [`dag`] with a random sleep per task; returns the command id.
    fn submit_naps(&self, workflow: &str, tasks: &[&str], rng: &mut Lcg) -> i64 {
        self.submit_with(workflow, tasks, || rng.nap())
    }

    fn submit_with(&self, workflow: &str, tasks: &[&str], mut nap: impl FnMut() -> String) -> i64 {
        let params: serde_json::Map<String, Value> = tasks
            .iter()
            .map(|t| (format!("n_{t}"), Value::String(nap())))
            .collect();
        self.submit(workflow, Value::Object(params))
    }

    fn submit_diamond(&self, rng: &mut Lcg) -> i64 {
        self.submit_naps("diamond", &DIAMOND_TASKS, rng)
    }

    /// A diamond whose tasks sleep 1.0 to 2.5 s: still running after a loaded machine's
    /// slow start.
    fn submit_slow_diamond(&self, rng: &mut Lcg) -> i64 {
        self.submit_with("diamond", &DIAMOND_TASKS, || rng.nap_tenths(10, 25))
    }

    fn instance_of(&self, command: i64) -> i64 {
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

    fn instance(&self, id: i64) -> Value {
        self.api.get(&format!("/instances/{id}"))
    }

    /// One line per instance: state, owner and every attempt, for failure messages. Of
    /// many instances, only those that did not succeed are shown.
    fn describe(&self, ids: &[i64]) -> String {
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
    fn wait_until<T>(
        &self,
        what: &str,
        timeout: Duration,
        ids: &[i64],
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if Instant::now() >= deadline {
                panic!(
                    "[{}] timed out after {timeout:?} waiting for {what}; instances:{}\ndatabase sessions (state, wait, query):\n{}",
                    self.test,
                    self.describe(ids),
                    self.db_sessions()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every instance is in a terminal state; returns them with their tasks.
    fn wait_all_end(&self, ids: &[i64]) -> Vec<Value> {
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
    fn wait_running(&self, ids: &[i64]) -> Vec<Value> {
        self.wait_until("a task to run", Duration::from_secs(60), ids, || {
            let rows = self.rows_in(ids, "running");
            (!rows.is_empty()).then_some(rows)
        })
    }

    /// Task rows of `ids` in `state`.
    fn rows_in(&self, ids: &[i64], state: &str) -> Vec<Value> {
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
    fn owned(&self, owner: &str, state: &str) -> BTreeMap<i64, i64> {
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
    fn db_sessions(&self) -> String {
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
    /// for `how_long`, in a psql of its own; wait for the returned child.
    fn stall_task_writes(&self, how_long: Duration) -> std::process::Child {
        let sql = format!(
            "BEGIN; LOCK TABLE task_instance IN SHARE MODE; SELECT pg_sleep({}); COMMIT;",
            how_long.as_secs_f64()
        );
        std::process::Command::new("psql")
            .args([&self.db.url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", &sql])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("psql must be installed (PostgreSQL client)")
    }

    /// Every attempt in state `running`, from the database, with when its task stops
    /// sleeping at the earliest (its sleep parameter counted from when it reported
    /// running). Only instances among `sleepy` have tasks that sleep.
    fn running_attempts(&self, sleepy: &[i64]) -> Vec<Running> {
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

    fn epoch(&self, id: i64) -> i64 {
        self.db
            .query(&format!(
                "SELECT owner_epoch FROM workflow_instance WHERE id = {id}"
            ))
            .trim()
            .parse()
            .unwrap()
    }

    fn executions(&self) -> Vec<Exec> {
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
    fn check_commands(&self, workflow: &str, commands: &[i64], ids: &[i64]) {
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
    fn check_runs(&self, ids: &[i64], tasks: &[&str], nothing_rerun: bool) -> Vec<Value> {
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
                assert!(
                    state == "success" || (state == "need_fault_tolerance" && !nothing_rerun),
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

/// The environment of every shoal node.
fn node_env<'a>(db: &'a str, etcd: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("SHOAL_DATABASE_URL", db),
        ("SHOAL_ETCD", etcd),
        ("SHOAL_LEASE_TTL", LEASE_TTL),
        ("SHOAL_CLUSTER_SECRET", support::CLUSTER_SECRET),
    ]
}

fn lease_ttl() -> Duration {
    Duration::from_secs(LEASE_TTL.parse().unwrap())
}

/// An attempt that was running when looked at.
#[derive(Debug)]
struct Running {
    id: i64,
    instance: i64,
    worker: String,
    /// Its task sleeps at least until then (ms since the epoch).
    sleeps_until_ms: i64,
}

/// One line of the execution log.
struct Exec {
    start: bool,
    instance: i64,
    task: String,
    tid: i64,
}

/// A task command that records its execution around a sleep of `${nap}`.
fn recorded(log: &Path, task: &str, nap: &str) -> String {
    let l = log.display();
    let me = format!("${{system.workflow.instance.id}} {task} ${{system.task.instance.id}}");
    format!("echo start {me} >> {l}; sleep ${{{nap}}}; echo end {me} >> {l}")
}

/// A workflow whose tasks (name, upstream tasks, worker group or "") record their
/// executions; task `x` sleeps its parameter `n_x` (default 0.3 s).
fn dag(name: &str, log: &Path, tasks: &[(&str, &[&str], &str)]) -> String {
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
fn diamond(log: &Path) -> String {
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
fn find(insts: &[Value], id: i64) -> &Value {
    insts
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("instance {id} missing"))
}

/// Which masters (indices) drive a running instance among `ids`.
fn masters_driving(c: &Cluster, ids: &[i64]) -> Vec<usize> {
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
fn storm<'s>(
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
fn submit_during<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    c: &'s Cluster,
    rng: &mut Lcg,
    n: usize,
) -> std::thread::ScopedJoinHandle<'s, Vec<i64>> {
    let gaps: Vec<Duration> = (0..n).map(|_| rng.millis(50, 250)).collect();
    let mut sub_rng = Lcg(rng.next());
    s.spawn(move || {
        gaps.into_iter()
            .map(|gap| {
                std::thread::sleep(gap);
                c.submit_diamond(&mut sub_rng)
            })
            .collect()
    })
}

/// Two rounds: a master is killed while it drives instances whose tasks are out on the
/// workers and while both masters claim and dispatch a storm of short instances; a new
/// master joins; then the master that took over is killed the same way, so what it took
/// over is orphaned a second time, this time while the database stalls writes to task
/// rows (so that tasks it handed to workers are not recorded yet when it dies).
#[test]
fn a_killed_master_s_instances_are_taken_over_and_finish() {
    let mut rng = Lcg::for_test("master_kill");
    let mut c = Cluster::start("master_kill", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut live: Vec<usize> = vec![0, 1];
    let mut commands: Vec<i64> = vec![];
    // Per killed master: its address and when it died (ms since the epoch).
    let mut dead: Vec<(String, i64)> = vec![];
    // Per orphaned instance: its epoch when its master died.
    let mut orphaned: BTreeMap<i64, i64> = BTreeMap::new();
    for round in 1..=2 {
        let sleepy: Vec<i64> = (0..5).map(|_| c.submit_diamond(&mut rng)).collect();
        let sleepy_ids: Vec<i64> = sleepy.iter().map(|cmd| c.instance_of(*cmd)).collect();
        commands.extend(sleepy);
        c.wait_running(&sleepy_ids);
        std::thread::sleep(rng.millis(0, 800));
        let driving: Vec<usize> = masters_driving(&c, &sleepy_ids)
            .into_iter()
            .filter(|m| live.contains(m))
            .collect();
        assert!(
            !driving.is_empty(),
            "no live master drives a running instance:{}",
            c.describe(&sleepy_ids)
        );
        let v = driving[rng.below(driving.len())];
        live.retain(|m| *m != v);
        let victim = c.masters[v].addr.clone();
        let survivors: Vec<String> = live.iter().map(|m| c.masters[*m].addr.clone()).collect();
        let kill_after = rng.millis(300, 1200);

        // The kill lands while the masters claim commands and dispatch at full speed: a
        // storm of instances whose tasks do not sleep is started around it.
        let (more, t_kill) = std::thread::scope(|s| {
            let storm = storm(s, &c);
            let late = submit_during(s, &c, &mut rng, 3);
            std::thread::sleep(kill_after);
            // Round 2: the database stalls writes to task rows around the kill (as an
            // fsync or lock stall would); dispatches go on, their records wait.
            let stall = (round == 2).then(|| {
                let stall = c.stall_task_writes(Duration::from_millis(800));
                std::thread::sleep(Duration::from_millis(400));
                stall
            });
            c.masters[v].proc.signal("KILL");
            let t_kill = Instant::now();
            c.log(&format!(
                "round {round}: SIGKILL {} ({victim}); {survivors:?} survive",
                c.masters[v].name
            ));
            if let Some(mut stall) = stall {
                let status = stall.wait().unwrap();
                assert!(status.success(), "the stall transaction failed");
            }
            let mut more = storm.join().unwrap();
            more.extend(late.join().unwrap());
            (more, t_kill)
        });
        commands.extend(more);
        dead.push((
            victim.clone(),
            chrono::Utc::now().timestamp_millis() - t_kill.elapsed().as_millis() as i64,
        ));
        // A commit the victim had in flight settles within moments; after that, what it
        // drove is frozen until a survivor takes it.
        std::thread::sleep(Duration::from_millis(300));
        let orphans = c.owned(&victim, "running");
        let orphan_ids: Vec<i64> = orphans.keys().copied().collect();
        c.log(&format!(
            "round {round}: orphaned instances (id: epoch): {orphans:?}"
        ));
        orphaned.extend(orphans);
        if orphan_ids.is_empty() {
            c.log("the victim's instances all ended before the kill: nothing to take over");
        } else {
            let taken = c.wait_until(
                &format!(
                    "a survivor {survivors:?} to take over an instance of the killed {victim}"
                ),
                TAKEOVER_TIMEOUT,
                &orphan_ids,
                || {
                    orphan_ids.iter().copied().find(|id| {
                        let m = c.instance(*id)["master"].as_str().unwrap_or("").to_string();
                        survivors.contains(&m)
                    })
                },
            );
            eprintln!(
                "[master_kill] round {round}: takeover of instance {taken} {:.2}s after the kill (lease TTL {LEASE_TTL}s)",
                t_kill.elapsed().as_secs_f64()
            );
        }
        if round == 1 {
            let m = c.spawn_node("master2", &["master"]);
            c.log(&format!("master2 joined: {}", m.addr));
            c.masters.push(m);
            live.push(2);
        }
    }

    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let t_end = Instant::now();
    let insts = c.check_runs(&ids, &DIAMOND_TASKS, true);
    eprintln!(
        "[master_kill] all {} instances checked {:.2}s after the last kill",
        ids.len(),
        t_end.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);
    for (id, epoch) in &orphaned {
        assert!(
            c.epoch(*id) > *epoch,
            "instance {id} was orphaned at epoch {epoch}: taking it over bumps the epoch:{}",
            c.describe(&[*id])
        );
    }
    // What a killed master still owns, it finished before it died: everything else was
    // taken over and finished by a live master.
    for (master, died_ms) in &dead {
        for inst in insts.iter().filter(|i| i["master"] == master.as_str()) {
            let ended = chrono::DateTime::parse_from_rfc3339(inst["ended_at"].as_str().unwrap())
                .unwrap()
                .timestamp_millis();
            assert!(
                ended <= died_ms + 1000,
                "instance {} ended {}ms after its master {master} was killed, yet no master took it over: {inst}",
                inst["id"],
                ended - died_ms
            );
        }
    }
}

#[test]
fn a_killed_worker_s_tasks_run_again_elsewhere() {
    let mut rng = Lcg::for_test("worker_kill");
    let c = Cluster::start("worker_kill", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_slow_diamond(&mut rng)).collect();
    let sleepy: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&sleepy);
    std::thread::sleep(rng.millis(0, 600));
    // The worker dies while tasks run on it and while a storm of short instances is being
    // dispatched to every worker.
    let kill_after = rng.millis(300, 1200);
    let (more, victim, lost, sure, t_kill) = std::thread::scope(|s| {
        let storm = storm(s, &c);
        std::thread::sleep(kill_after);
        // The victim runs a task that still sleeps for a while: that attempt is surely lost.
        let (running, now) = c.wait_until(
            "a task with at least 300 ms of sleep left",
            Duration::from_secs(30),
            &sleepy,
            || {
                let running = c.running_attempts(&sleepy);
                let now = chrono::Utc::now().timestamp_millis();
                running
                    .iter()
                    .any(|r| r.sleeps_until_ms > now + 300)
                    .then_some((running, now))
            },
        );
        let busy: Vec<usize> = (0..c.workers.len())
            .filter(|w| {
                running
                    .iter()
                    .any(|r| r.sleeps_until_ms > now + 300 && r.worker == c.workers[*w].addr)
            })
            .collect();
        let v = busy[rng.below(busy.len())];
        let victim = c.workers[v].addr.clone();
        c.workers[v].proc.signal("KILL");
        let t_kill = Instant::now();
        let killed_ms = chrono::Utc::now().timestamp_millis();
        let lost: Vec<&Running> = running.iter().filter(|r| r.worker == victim).collect();
        let sure: Vec<i64> = lost
            .iter()
            .filter(|r| r.sleeps_until_ms > killed_ms + 100)
            .map(|r| r.id)
            .collect();
        let lost: Vec<(i64, i64)> = lost.iter().map(|r| (r.id, r.instance)).collect();
        c.log(&format!(
            "SIGKILL {} ({victim}) while it ran attempts (id, instance) {lost:?}, of which {sure:?} still sleep",
            c.workers[v].name
        ));
        (storm.join().unwrap(), victim, lost, sure, t_kill)
    });
    commands.extend(more);
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let lost_instances: Vec<i64> = lost.iter().map(|l| l.1).collect();
    let state_of = |id: i64| -> String {
        c.api.get(&format!("/task-instances/{id}"))["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    c.wait_until(
        &format!("the attempts {sure:?} of the killed worker to become need_fault_tolerance"),
        TAKEOVER_TIMEOUT,
        &lost_instances,
        || {
            sure.iter()
                .all(|id| state_of(*id) == "need_fault_tolerance")
                .then_some(())
        },
    );
    eprintln!(
        "[worker_kill] lost attempts marked need_fault_tolerance {:.2}s after the kill (lease TTL {LEASE_TTL}s)",
        t_kill.elapsed().as_secs_f64()
    );

    let insts = c.check_runs(&ids, &DIAMOND_TASKS, false);
    c.check_commands("diamond", &commands, &ids);
    let execs = c.executions();
    for (id, instance) in &lost {
        let state = state_of(*id);
        assert!(
            state == "success" || state == "need_fault_tolerance",
            "attempt {id} running on the killed worker ended {state}:{}",
            c.describe(&[*instance])
        );
        assert!(
            execs.iter().any(|e| e.start && e.tid == *id),
            "attempt {id} was reported running, so it started:{}",
            c.describe(&[*instance])
        );
    }
    let mut lost_count = 0;
    for inst in &insts {
        let rows = inst["tasks"].as_array().unwrap();
        for r in rows.iter().filter(|r| r["state"] == "need_fault_tolerance") {
            lost_count += 1;
            assert_eq!(
                r["worker"],
                victim.as_str(),
                "only the killed worker's attempts are lost: {inst}"
            );
            let next = rows
                .iter()
                .find(|n| {
                    n["name"] == r["name"] && n["attempt"] == r["attempt"].as_i64().unwrap() + 1
                })
                .unwrap_or_else(|| {
                    panic!(
                        "attempt {} was lost: a new attempt follows it: {inst}",
                        r["id"]
                    )
                });
            assert_ne!(
                next["worker"],
                victim.as_str(),
                "the new attempt runs on a live worker: {inst}"
            );
        }
    }
    assert!(
        lost_count >= 1,
        "tasks were running on the killed worker, some attempt is need_fault_tolerance: {lost:?}"
    );
    eprintln!(
        "[worker_kill] {lost_count} attempts ran again; all {} instances ended {:.2}s after the kill",
        ids.len(),
        t_kill.elapsed().as_secs_f64()
    );
}

#[test]
fn a_master_frozen_past_its_lease_is_fenced_out_when_it_resumes() {
    let mut rng = Lcg::for_test("master_stop");
    let c = Cluster::start("master_stop", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_diamond(&mut rng)).collect();
    let first: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&first);
    std::thread::sleep(rng.millis(0, 600));
    let driving = masters_driving(&c, &first);
    assert!(
        !driving.is_empty(),
        "no master drives a running instance:{}",
        c.describe(&first)
    );
    let v = driving[rng.below(driving.len())];
    let (victim, survivor) = (c.masters[v].addr.clone(), c.masters[1 - v].addr.clone());
    // The master freezes in the middle of claiming and dispatching a storm of short
    // instances: when it resumes, it still holds queued tasks and unsent writes.
    let stop_after = rng.millis(300, 1200);
    let (storm, t_stop) = std::thread::scope(|s| {
        let storm = storm(s, &c);
        std::thread::sleep(stop_after);
        c.masters[v].proc.signal("STOP");
        let t_stop = Instant::now();
        c.log(&format!(
            "SIGSTOP {} ({victim}); {survivor} should take over",
            c.masters[v].name
        ));
        (storm.join().unwrap(), t_stop)
    });
    commands.extend(storm);
    std::thread::sleep(Duration::from_millis(300).saturating_sub(t_stop.elapsed()));
    let frozen = c.owned(&victim, "running");
    let frozen_ids: Vec<i64> = frozen.keys().copied().collect();
    c.log(&format!("frozen instances (id: epoch): {frozen:?}"));
    c.wait_until(
        &format!("{survivor} to take over every instance of the frozen {victim}"),
        TAKEOVER_TIMEOUT,
        &frozen_ids,
        || {
            frozen_ids
                .iter()
                .all(|id| c.instance(*id)["master"] == survivor.as_str())
                .then_some(())
        },
    );
    eprintln!(
        "[master_stop] {} instances taken over {:.2}s after SIGSTOP (lease TTL {LEASE_TTL}s)",
        frozen_ids.len(),
        t_stop.elapsed().as_secs_f64()
    );
    for (id, epoch) in &frozen {
        assert_eq!(
            c.epoch(*id),
            epoch + 1,
            "the takeover bumped the epoch of {id}"
        );
    }
    // Tasks end while the frozen master cannot answer, so calls wait for it in its
    // socket. It resumes before the workers' 10 s call timeout gives up on them.
    let more = rng.millis(300, 2000);
    std::thread::sleep(more.min(Duration::from_secs(8).saturating_sub(t_stop.elapsed())));
    c.masters[v].proc.signal("CONT");
    c.log(&format!(
        "SIGCONT {} after {:.2}s",
        c.masters[v].name,
        t_stop.elapsed().as_secs_f64()
    ));
    // The resumed master is a master again: it registers anew and claims work.
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 4);
        commands.extend(late.join().unwrap());
    });

    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let insts = c.check_runs(&ids, &DIAMOND_TASKS, true);
    c.check_commands("diamond", &commands, &ids);
    for (id, epoch) in &frozen {
        assert_eq!(
            find(&insts, *id)["master"],
            survivor.as_str(),
            "instance {id} stays with the master that took it over:{}",
            c.describe(&ids)
        );
        assert_eq!(c.epoch(*id), epoch + 1, "nobody took {id} back");
    }
    // Late writes of the resumed master would show up as changes after the end.
    std::thread::sleep(Duration::from_millis(1500));
    for (before, id) in insts.iter().zip(&ids) {
        let after = c.instance(*id);
        assert_eq!(
            &after, before,
            "instance {id} changed after it ended: was {before}, is {after}"
        );
    }
    c.check_runs(&ids, &DIAMOND_TASKS, true);
}

#[test]
fn the_cluster_recovers_from_an_etcd_restart() {
    let mut rng = Lcg::for_test("etcd_restart");
    let mut c = Cluster::start("etcd_restart", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_diamond(&mut rng)).collect();
    let first: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&first);
    std::thread::sleep(rng.millis(0, 600));
    c.kill_etcd();
    let t_kill = Instant::now();
    // Down for longer than a lease TTL, while commands keep arriving and the restart
    // comes in the middle of a storm of short instances.
    let ttl_ms = lease_ttl().as_millis() as u64;
    let down = rng.millis(ttl_ms + 500, ttl_ms + 2500);
    c.log(&format!("SIGKILL etcd for {down:?}"));
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 2);
        std::thread::sleep(down.saturating_sub(Duration::from_millis(500)));
        let storm = storm(s, &c);
        std::thread::sleep(down.saturating_sub(t_kill.elapsed()));
        c.restart_etcd();
        commands.extend(late.join().unwrap());
        commands.extend(storm.join().unwrap());
    });
    let t_back = Instant::now();
    c.log("etcd restarted on the same ports and data");
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 3);
        commands.extend(late.join().unwrap());
    });
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    // etcd stays down longer than the lease TTL, so every worker gives up what it ran
    // (it cannot know whether masters already count it dead): those attempts run again as
    // new attempts, each attempt at most once.
    c.check_runs(&ids, &DIAMOND_TASKS, false);
    eprintln!(
        "[etcd_restart] all {} instances ended {:.2}s after etcd came back",
        ids.len(),
        t_back.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);

    // The masters follow the registry again: a worker that joins now gets work.
    let fresh = c.add_worker("worker_fresh", "fresh");
    c.apply(&dag("fresh", &c.execs, &[("f", &[], "fresh")]));
    let cmd = c.submit_naps("fresh", &["f"], &mut rng);
    let id = c.instance_of(cmd);
    let insts = c.check_runs(&[id], &["f"], true);
    assert_eq!(
        insts[0]["tasks"][0]["worker"],
        fresh.as_str(),
        "the task of group fresh ran on the worker that joined after the restart"
    );
    for n in c.masters.iter_mut().chain(c.workers.iter_mut()) {
        assert!(!n.proc.exited(), "{} died during the etcd outage", n.name);
    }
}

#[test]
fn a_task_waits_for_a_worker_of_its_group_and_runs_when_one_joins() {
    let mut rng = Lcg::for_test("group_join");
    let mut c = Cluster::start("group_join", &["default"; 3]);
    let tasks = ["a", "g", "d"];
    c.apply(&dag(
        "gpu",
        &c.execs,
        &[("a", &[], ""), ("g", &["a"], "gpu"), ("d", &["g"], "")],
    ));
    let commands: Vec<i64> = (0..2)
        .map(|_| c.submit_naps("gpu", &tasks, &mut rng))
        .collect();
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_until(
        "task g (group gpu) of every instance to be submitted",
        Duration::from_secs(60),
        &ids,
        || {
            (c.rows_in(&ids, "submitted")
                .iter()
                .filter(|r| r["name"] == "g")
                .count()
                == ids.len())
            .then_some(())
        },
    );
    std::thread::sleep(rng.millis(1500, 3000));
    for id in &ids {
        let inst = c.instance(*id);
        assert_eq!(inst["state"], "running", "{inst}");
        let g: Vec<&Value> = inst["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "g")
            .collect();
        assert!(
            g.len() == 1 && g[0]["state"] == "submitted" && g[0]["worker"].is_null(),
            "with no gpu worker, g waits in the queue: {inst}"
        );
        assert!(
            g[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("group 'gpu'")),
            "the waiting task says why it waits: {inst}"
        );
    }
    assert!(
        !c.executions().iter().any(|e| e.task == "g"),
        "g did not run anywhere"
    );
    let gpu = c.add_worker("worker_gpu", "gpu");
    let t_join = Instant::now();
    c.log(&format!("gpu worker joined: {gpu}"));
    let insts = c.check_runs(&ids, &tasks, true);
    eprintln!(
        "[group_join] instances ended {:.2}s after the gpu worker joined",
        t_join.elapsed().as_secs_f64()
    );
    c.check_commands("gpu", &commands, &ids);
    for inst in &insts {
        for t in inst["tasks"].as_array().unwrap() {
            assert_eq!(
                t["worker"] == gpu.as_str(),
                t["name"] == "g",
                "g and only g runs on the gpu worker: {inst}"
            );
        }
    }
}

#[test]
fn a_worker_restarted_under_its_address_has_its_lost_attempts_run_again() {
    let mut rng = Lcg::for_test("worker_restart");
    let mut c = Cluster::start("worker_restart", &["default"]);
    c.apply(&dag("slow", &c.execs, &[("s", &[], ""), ("t", &["s"], "")]));
    let cmd = c.submit("slow", serde_json::json!({"n_s": "3"}));
    let id = c.instance_of(cmd);
    c.wait_until("task s to run", Duration::from_secs(30), &[id], || {
        (!c.rows_in(&[id], "running").is_empty()).then_some(())
    });
    std::thread::sleep(rng.millis(0, 500));
    // Back on the same address well within the lease TTL: its registry entry never goes
    // away, so nothing says "worker left"; only its new start time tells.
    let old = c.workers.remove(0);
    let port: u16 = old.addr.rsplit(':').next().unwrap().parse().unwrap();
    old.proc.signal("KILL");
    drop(old);
    let t_kill = Instant::now();
    let again = c.spawn_worker(port, "worker0", "default");
    c.log(&format!(
        "worker0 restarted on {} {:.2}s after SIGKILL",
        again.addr,
        t_kill.elapsed().as_secs_f64()
    ));
    c.workers.push(again);
    let insts = c.check_runs(&[id], &["s", "t"], false);
    let s: Vec<&Value> = insts[0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "s")
        .collect();
    assert_eq!(s.len(), 2, "s ran again as a second attempt: {}", insts[0]);
    assert_eq!(s[0]["state"], "need_fault_tolerance", "{}", insts[0]);
    assert!(
        s[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no longer had this attempt")),
        "the lost attempt says why: {}",
        insts[0]
    );
    eprintln!(
        "[worker_restart] instance ended {:.2}s after the worker was killed",
        t_kill.elapsed().as_secs_f64()
    );
}

#[test]
fn the_cluster_rides_out_a_postgres_crash_and_restart() {
    let mut rng = Lcg::for_test("postgres_restart");
    let mut c = Cluster::start_on(TestDb::private(), "postgres_restart", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_slow_diamond(&mut rng)).collect();
    let sleepy: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&sleepy);
    std::thread::sleep(rng.millis(0, 800));
    // Tasks keep running on the workers while the database is gone; their events wait in
    // the workers' outboxes, the masters' commits fail and are tried again.
    let down = rng.millis(500, 4000);
    let server = c.db.server.as_ref().unwrap();
    c.log(&format!("Postgres stopped (immediate) for {down:?}"));
    server.stop();
    std::thread::sleep(down);
    server.start_again();
    let t_back = Instant::now();
    c.log("Postgres started again");
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 4);
        commands.extend(late.join().unwrap());
    });
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.check_runs(&ids, &DIAMOND_TASKS, true);
    eprintln!(
        "[postgres_restart] all {} instances ended {:.2}s after Postgres came back",
        ids.len(),
        t_back.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);
    for n in c.masters.iter_mut().chain(c.workers.iter_mut()) {
        assert!(
            !n.proc.exited(),
            "{} died during the Postgres outage",
            n.name
        );
    }
}

/// A waiting serial run and a task waiting for a task-group slot outlive the master that
/// drives what they wait for: the survivor takes the running instances over, and when
/// they end the waiting ones start, one at a time, each exactly once.
#[test]
fn serial_runs_and_task_group_waiters_survive_a_master_kill() {
    let c = Cluster::start("serial_kill", &["default"]);
    let (runs, slots) = (c.dir.path().join("runs"), c.dir.path().join("slots"));
    let (status, body) = c.api.post("/task-groups", r#"{"name": "one", "slots": 1}"#);
    assert_eq!(status, 201, "{body}");
    let task = |file: &Path, group: &str| {
        let command = support::timed(file, "${system.workflow.instance.id}", "2");
        format!("- {{ name: t, type: shell, {group}command: '{command}' }}\n")
    };
    c.apply(&format!(
        "name: queue\nexecution_type: serial_wait\ntasks:\n{}",
        task(&runs, "")
    ));
    c.apply(&format!(
        "name: grouped\ntasks:\n{}",
        task(&slots, "task_group: one, ")
    ));
    let commands: Vec<i64> = ["queue", "queue", "grouped", "grouped"]
        .iter()
        .map(|w| c.submit(w, json!({})))
        .collect();
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_until(
        "a run waiting its turn",
        Duration::from_secs(30),
        &ids,
        || (c.instance(ids[1])["state"] == "serial_wait").then_some(()),
    );
    let running = c.wait_running(&[ids[0]]);
    assert_eq!(running.len(), 1);
    let owner = c.instance(ids[0])["master"].as_str().unwrap().to_string();
    let victim = c.masters.iter().find(|m| m.addr == owner).unwrap();
    victim.proc.signal("KILL");
    c.log(&format!(
        "SIGKILL {} ({owner}), which drives instance {}",
        victim.name, ids[0]
    ));

    for inst in c.wait_all_end(&ids) {
        assert_eq!(inst["state"], "success", "{}", c.describe(&ids));
    }
    for file in [&runs, &slots] {
        let spans = support::intervals(file);
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!(support::max_overlap(&spans), 1, "{spans:?}");
    }
}
