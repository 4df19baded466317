//! A real worker (gRPC server, bash processes, log files) against an in-test master that
//! records the events it receives and acks them. The task types beyond shell and noop, and
//! timeouts, are in `worker/task_types.rs` (sql on MySQL/MariaDB in `worker/mysql.rs`),
//! spark and notebook in `worker/data_tasks.rs`; shutdown, crashes and lease loss in
//! `worker/ha.rs`.

#[path = "worker/container.rs"]
mod container;
#[path = "worker/data_tasks.rs"]
mod data_tasks;
#[path = "worker/ha.rs"]
mod ha;
#[path = "worker/kubernetes.rs"]
mod kubernetes;
#[path = "worker/mysql.rs"]
mod mysql;
#[path = "worker/task_types.rs"]
mod task_types;

use shoal_common::proto::master_server::{Master, MasterServer};
use shoal_common::proto::worker_client::WorkerClient;
use shoal_common::proto::{
    ControlRequest, ControlResponse, DispatchRequest, DispatchResponse, KillRequest,
    ReadLogRequest, ReportEventsRequest, ReportEventsResponse, TaskEvent, TaskEventKind, TaskSpec,
};
use shoal_common::registry::{NodeWatch, Registry, Role};
use shoal_worker::{WorkerConfig, WorkerHandle};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(10);
/// How long "nothing more arrives" is watched for.
const QUIET: Duration = Duration::from_millis(500);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

// ---------------------------------------------------------------- fake master

struct FakeMaster {
    events: mpsc::UnboundedSender<TaskEvent>,
}

#[tonic::async_trait]
impl Master for FakeMaster {
    async fn report_events(
        &self,
        request: Request<ReportEventsRequest>,
    ) -> Result<Response<ReportEventsResponse>, Status> {
        let request = request.into_inner();
        assert!(!request.worker.is_empty(), "worker address missing");
        let acked = request.events.iter().map(|e| e.seq).collect();
        for e in request.events {
            let _ = self.events.send(e);
        }
        Ok(Response::new(ReportEventsResponse { acked }))
    }

    async fn control(
        &self,
        _: Request<ControlRequest>,
    ) -> Result<Response<ControlResponse>, Status> {
        Err(Status::unimplemented("not used by worker tests"))
    }
}

struct MasterProc {
    addr: String,
    events: mpsc::UnboundedReceiver<TaskEvent>,
    stop: CancellationToken,
}

impl Drop for MasterProc {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start_master(addr: SocketAddr) -> MasterProc {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, events) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MasterServer::new(FakeMaster { events: tx }))
            .serve_with_incoming_shutdown(
                TcpIncoming::from(listener),
                stop.clone().cancelled_owned(),
            ),
    );
    MasterProc { addr, events, stop }
}

impl MasterProc {
    async fn next(&mut self) -> TaskEvent {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("no event in time")
            .expect("master channel closed")
    }

    /// Events of one task attempt up to and including its terminal event.
    async fn until_done(&mut self, task_instance_id: i64) -> Vec<TaskEvent> {
        let mut got = Vec::new();
        loop {
            let e = self.next().await;
            assert_eq!(
                e.task_instance_id, task_instance_id,
                "unexpected event {e:?}"
            );
            let passing = [
                TaskEventKind::Running,
                TaskEventKind::Log,
                TaskEventKind::Timeout,
            ];
            let terminal = !passing.iter().any(|k| e.kind == *k as i32);
            got.push(e);
            if terminal {
                return got;
            }
        }
    }

    async fn assert_quiet(&mut self) {
        if let Ok(Some(e)) = tokio::time::timeout(QUIET, self.events.recv()).await {
            panic!("unexpected event {e:?}");
        }
    }
}

/// An address nothing listens on (yet).
fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

// ---------------------------------------------------------------- worker

struct Setup {
    dir: tempfile::TempDir,
    registry: Registry,
    shutdown: CancellationToken,
    worker: Option<WorkerHandle>,
    addr: String,
    client: WorkerClient<Channel>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start_worker(slots: u32) -> Setup {
    start_worker_with(slots, BTreeMap::new()).await
}

/// A worker with sql datasources (name -> URL).
async fn start_worker_with(slots: u32, datasources: BTreeMap<String, String>) -> Setup {
    launch(Launch {
        slots,
        datasources,
        ..Launch::default()
    })
    .await
}

/// How a test worker is started.
struct Launch {
    slots: u32,
    datasources: BTreeMap<String, String>,
    grace_period: Duration,
    /// The test's directory (the data dir is its `data`); a new one by default.
    dir: Option<tempfile::TempDir>,
    /// The in-process registry by default.
    registry: Option<Registry>,
    /// `--min-free-disk` (none by default).
    min_free_disk: u64,
    /// `--single-team` (by default: tasks may run as the worker's own user).
    single_team: bool,
    /// `--default-tenant` (none by default).
    default_tenant: Option<String>,
    /// `--spark-submit` (none by default).
    spark_submit: Option<PathBuf>,
    /// `--container-runtime` (none by default: podman or docker on PATH).
    container_runtime: Option<String>,
    /// `--container-volume-dir` (none by default).
    container_volume_dirs: Vec<PathBuf>,
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            slots: 4,
            datasources: BTreeMap::new(),
            grace_period: Duration::from_secs(5),
            dir: None,
            registry: None,
            min_free_disk: 0,
            single_team: true,
            default_tenant: None,
            spark_submit: None,
            container_runtime: None,
            container_volume_dirs: Vec::new(),
        }
    }
}

fn worker_config(l: &Launch, dir: &Path) -> WorkerConfig {
    WorkerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise_host: "127.0.0.1".into(),
        groups: vec!["default".into()],
        slots: l.slots,
        data_dir: dir.join("data"),
        python: shoal_worker::DEFAULT_PYTHON.into(),
        spark_submit: l.spark_submit.clone(),
        task_env: vec![],
        datasources: l.datasources.clone(),
        datasource_grants: BTreeMap::new(),
        grace_period: l.grace_period,
        secret: Default::default(),
        allow_root_tenant: false,
        default_tenant: l.default_tenant.clone(),
        single_team: l.single_team,
        min_free_disk: l.min_free_disk,
        log_retention: None,
        container_runtime: l.container_runtime.clone(),
        container_volume_dirs: l.container_volume_dirs.clone(),
    }
}

async fn launch(mut l: Launch) -> Setup {
    init_tracing();
    let dir = l.dir.take().unwrap_or_else(|| tempfile::tempdir().unwrap());
    let registry = l.registry.take().unwrap_or_else(Registry::local);
    let shutdown = CancellationToken::new();
    let worker = shoal_worker::start(
        worker_config(&l, dir.path()),
        registry.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let addr = worker.addr.clone();
    let client = WorkerClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Setup {
        dir,
        registry,
        shutdown,
        worker: Some(worker),
        addr,
        client,
    }
}

impl Setup {
    async fn dispatch(&mut self, tasks: Vec<TaskSpec>) -> DispatchResponse {
        self.client
            .dispatch(DispatchRequest {
                tasks,
                adopt_only: false,
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn read_log(&mut self, t: &TaskSpec, offset: u64, limit: u32) -> Option<Vec<u8>> {
        let r = self
            .client
            .read_log(ReadLogRequest {
                workflow_instance_id: t.workflow_instance_id,
                task_instance_id: t.task_instance_id,
                attempt: t.attempt,
                offset,
                limit,
            })
            .await
            .unwrap()
            .into_inner();
        r.found.then_some(r.content)
    }

    async fn kill(&mut self, t: &TaskSpec) -> bool {
        self.client
            .kill(KillRequest {
                task_instance_id: t.task_instance_id,
                attempt: t.attempt,
                workflow_instance_id: t.workflow_instance_id,
                owner_epoch: t.owner_epoch,
            })
            .await
            .unwrap()
            .into_inner()
            .found
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn task(id: i64, task_type: &str, command: &str, master: &str) -> TaskSpec {
    let definition = serde_json::json!({
        "name": format!("t{id}"),
        "type": task_type,
        "command": command,
        "priority": "medium",
        "worker_group": "default",
    });
    TaskSpec {
        task_instance_id: id,
        workflow_instance_id: 100,
        attempt: 1,
        name: format!("t{id}"),
        task_type: task_type.into(),
        definition_json: definition.to_string(),
        params: HashMap::new(),
        master_addr: master.into(),
        owner_epoch: 1,
        tenant: String::new(),
        ..Default::default()
    }
}

fn shell(id: i64, command: &str, master: &str) -> TaskSpec {
    task(id, "shell", command, master)
}

fn kinds(events: &[TaskEvent]) -> Vec<TaskEventKind> {
    events
        .iter()
        .map(|e| TaskEventKind::try_from(e.kind).unwrap())
        .collect()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo failed"
    );
}

/// Reads one line a task writes into a FIFO (blocks until the task opens it).
async fn read_fifo(path: &Path) -> String {
    let p = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(p).unwrap());
    match tokio::time::timeout(WAIT, read).await {
        Ok(text) => text.unwrap(),
        Err(_) => {
            release_fifo(path, false);
            panic!("task never wrote the fifo")
        }
    }
}

/// Writes one line into a FIFO a task reads (blocks until the task opens it).
async fn write_fifo(path: &Path, line: &str) {
    let (p, line) = (path.to_path_buf(), line.to_string());
    let write = tokio::task::spawn_blocking(move || std::fs::write(p, line).unwrap());
    match tokio::time::timeout(WAIT, write).await {
        Ok(done) => done.unwrap(),
        Err(_) => {
            release_fifo(path, true);
            panic!("task never read the fifo")
        }
    }
}

/// Opens and closes the other end of a FIFO that a blocking thread of the test waits on
/// (`read_end`: the thread waits to write), so that the thread ends and the failing test
/// fails rather than hangs: a runtime waits for its blocking threads when it is dropped.
fn release_fifo(path: &Path, read_end: bool) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .read(read_end)
        .write(!read_end)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
}

/// True while `pid` exists and is not a zombie (a killed orphan waits for its new parent
/// to reap it, which counts as gone here).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The death of another process signals nothing we could wait on, so this polls (bounded).
async fn wait_gone(pid: i32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the registry shows this worker with `running` tasks.
async fn wait_running(watch: &mut NodeWatch, addr: &str, running: u32) {
    tokio::time::timeout(WAIT, async {
        loop {
            if watch
                .current()
                .iter()
                .any(|n| n.addr == addr && n.running == running)
            {
                return;
            }
            watch.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("worker never showed running={running}"));
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn shell_task_succeeds_with_output_params_and_a_readable_log() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let mut t = shell(
        1,
        r#"echo hello
echo '${setValue(x=1)}'
echo "\${setValue(greeting=$greeting)}"
echo "bad name exported: $(env | grep -c '^bad-name=')"
echo oops >&2"#,
        &master.addr,
    );
    t.params.insert("greeting".into(), "hi there".into());
    t.params.insert("bad-name".into(), "ignored".into());

    let r = w.dispatch(vec![t.clone()]).await;
    assert_eq!(r.accepted, [1]);
    assert!(r.rejected.is_empty());

    let events = master.until_done(1).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
    assert!(events[0].seq < events[1].seq);
    assert!(
        events
            .iter()
            .all(|e| e.workflow_instance_id == 100 && e.attempt == 1 && e.at_ms > 0)
    );
    let out = &events[1].output;
    assert_eq!(out.get("x").map(String::as_str), Some("1"));
    assert_eq!(out.get("greeting").map(String::as_str), Some("hi there"));
    assert_eq!(out.len(), 2, "{out:?}");

    let log = String::from_utf8(w.read_log(&t, 0, 0).await.expect("log found")).unwrap();
    assert!(log.starts_with("hello\n"), "{log}");
    assert!(log.contains("${setValue(x=1)}\n"), "{log}");
    assert!(log.contains("bad name exported: 0\n"), "{log}");
    assert!(log.contains("oops\n"), "{log}");
    assert_eq!(w.read_log(&t, 1, 4).await.unwrap(), b"ello");
    assert!(w.path("data/logs/100/1_1.log").is_file());
    // The end of the log (all of this one) travels with the end, for the master to keep.
    assert_eq!(events[1].log, log.as_bytes());
    assert_eq!(events[1].log_size, log.len() as u64);

    let mut other = t.clone();
    other.attempt = 2;
    assert_eq!(w.read_log(&other, 0, 0).await, None);
    master.assert_quiet().await;
}

#[tokio::test]
async fn nonzero_exit_is_a_failure_with_its_exit_code() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = shell(2, "echo before; exit 3", &master.addr);
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [2]);

    let events = master.until_done(2).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Failure]
    );
    assert_eq!(events[1].exit_code, 3);
    assert!(events[1].message.contains('3'), "{}", events[1].message);
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert!(log.starts_with("before\n"), "{log}");
}

#[tokio::test]
async fn killed_task_reports_killed_and_its_process_group_is_gone() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let fifo = w.path("pids");
    mkfifo(&fifo);
    let t = shell(
        3,
        &format!("sleep 30 &\necho \"$$ $!\" > '{}'\nwait", fifo.display()),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [3]);

    let pids = read_fifo(&fifo).await;
    let pids: Vec<i32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(pids.iter().all(|p| alive(*p)));
    let running = master.next().await;
    assert_eq!(running.kind, TaskEventKind::Running as i32);

    assert!(w.kill(&t).await);
    let events = master.until_done(3).await;
    assert_eq!(kinds(&events), [TaskEventKind::Killed]);
    for pid in pids {
        wait_gone(pid).await;
    }
    assert!(!w.kill(&t).await, "a finished task is not found");
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert!(log.contains("task killed"), "{log}");
}

#[tokio::test]
async fn tasks_beyond_the_slots_are_rejected() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(1).await;
    let long = shell(4, "sleep 30", &master.addr);
    let quick = task(5, "noop", "", &master.addr);

    let r = w.dispatch(vec![long.clone(), quick.clone()]).await;
    assert_eq!(r.accepted, [4]);
    assert_eq!(r.rejected, [5]);
    assert!(r.reason.contains("slot"), "{}", r.reason);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);

    let r = w.dispatch(vec![quick.clone()]).await;
    assert_eq!(r.rejected, [5]);

    assert!(w.kill(&long).await);
    assert_eq!(kinds(&master.until_done(4).await), [TaskEventKind::Killed]);
    // The slot is free by the time the terminal event reaches the master.
    let r = w.dispatch(vec![quick.clone()]).await;
    assert_eq!(r.accepted, [5]);
    assert_eq!(
        kinds(&master.until_done(5).await),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
}

#[tokio::test]
async fn a_worker_short_of_disk_space_refuses_new_tasks_and_says_why() {
    let master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = launch(Launch {
        min_free_disk: u64::MAX,
        ..Launch::default()
    })
    .await;
    let r = w.dispatch(vec![shell(6, "echo hi", &master.addr)]).await;
    assert_eq!(r.rejected, [6]);
    assert!(r.reason.contains("--min-free-disk"), "{}", r.reason);
    assert!(
        r.reason.contains(&w.path("data").display().to_string()),
        "names the directory: {}",
        r.reason
    );
}

#[tokio::test]
async fn noop_unknown_types_and_duplicates() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;

    let noop = task(6, "noop", "", &master.addr);
    assert_eq!(w.dispatch(vec![noop.clone()]).await.accepted, [6]);
    assert_eq!(
        kinds(&master.until_done(6).await),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
    // Same (task_instance_id, attempt) again: accepted, not run twice.
    assert_eq!(w.dispatch(vec![noop.clone()]).await.accepted, [6]);
    master.assert_quiet().await;
    // A new attempt is a new run.
    let mut retry = noop.clone();
    retry.attempt = 2;
    assert_eq!(w.dispatch(vec![retry]).await.accepted, [6]);
    assert_eq!(
        kinds(&master.until_done(6).await),
        [TaskEventKind::Running, TaskEventKind::Success]
    );

    let unknown = task(7, "flink", "flink run x.jar", &master.addr);
    assert_eq!(w.dispatch(vec![unknown.clone()]).await.accepted, [7]);
    let events = master.until_done(7).await;
    assert_eq!(kinds(&events), [TaskEventKind::Failure]);
    assert!(
        events[0].message.contains("unknown task type 'flink'"),
        "{}",
        events[0].message
    );
    let log = String::from_utf8(w.read_log(&unknown, 0, 0).await.unwrap()).unwrap();
    assert!(log.contains("unknown task type"), "{log}");

    let empty = shell(8, "  ", &master.addr);
    assert_eq!(w.dispatch(vec![empty]).await.accepted, [8]);
    let events = master.until_done(8).await;
    assert_eq!(kinds(&events), [TaskEventKind::Failure]);
    assert!(
        events[0].message.contains("no command"),
        "{}",
        events[0].message
    );

    let mut lost = task(9, "noop", "", "");
    lost.master_addr = String::new();
    let r = w.dispatch(vec![lost]).await;
    assert_eq!(r.rejected, [9]);
    assert!(r.reason.contains("master address"), "{}", r.reason);
}

#[tokio::test]
async fn events_are_resent_until_a_late_master_acks_them_once() {
    let master_addr = free_addr();
    let mut w = start_worker(4).await;
    let mut nodes = w
        .registry
        .watch(Role::Worker, w.shutdown.clone())
        .await
        .unwrap();
    let fifo = w.path("go");
    mkfifo(&fifo);
    let t = shell(
        10,
        &format!("read line < '{}'\necho \"got $line\"", fifo.display()),
        &master_addr.to_string(),
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [10]);

    // The task runs (and its RUNNING event cannot be delivered); let it finish.
    wait_running(&mut nodes, &w.addr, 1).await;
    write_fifo(&fifo, "go\n").await;
    wait_running(&mut nodes, &w.addr, 0).await;
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert_eq!(log, "got go\n");

    // Only now does the master come up, on the address the task names.
    let mut master = start_master(master_addr).await;
    let events = master.until_done(10).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
    master.assert_quiet().await;

    // Later events flow normally and no acked seq comes back.
    let next = task(11, "noop", "", &master.addr);
    assert_eq!(w.dispatch(vec![next]).await.accepted, [11]);
    let later = master.until_done(11).await;
    assert_eq!(
        kinds(&later),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
    let mut seqs: Vec<u64> = events.iter().chain(&later).map(|e| e.seq).collect();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "a seq arrived twice: {events:?} {later:?}");
    master.assert_quiet().await;
}

#[tokio::test]
async fn redispatch_by_a_new_owner_reroutes_undelivered_events() {
    let dead = free_addr().to_string();
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let mut nodes = w
        .registry
        .watch(Role::Worker, w.shutdown.clone())
        .await
        .unwrap();
    let t = task(12, "noop", "", &dead);
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [12]);
    wait_running(&mut nodes, &w.addr, 0).await;

    // An older epoch is refused and moves nothing.
    let mut stale = t.clone();
    stale.master_addr = master.addr.clone();
    stale.owner_epoch = 0;
    assert_eq!(w.dispatch(vec![stale]).await.rejected, [12]);
    master.assert_quiet().await;

    let mut adopted = t.clone();
    adopted.master_addr = master.addr.clone();
    adopted.owner_epoch = 2;
    assert_eq!(w.dispatch(vec![adopted]).await.accepted, [12]);
    assert_eq!(
        kinds(&master.until_done(12).await),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
    master.assert_quiet().await;
}

/// A worker shared by teams (no --single-team) runs no task as its own OS user: a task
/// without a tenant fails, naming the flags that fix it, unless a default tenant is set.
#[tokio::test]
async fn a_shared_worker_runs_tasks_as_their_tenant_never_as_itself() {
    use std::os::unix::fs::PermissionsExt;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut shared = launch(Launch {
        single_team: false,
        ..Launch::default()
    })
    .await;
    let t = shell(51, "echo should not run", &master.addr);
    assert_eq!(shared.dispatch(vec![t.clone()]).await.accepted, [51]);
    let end = master.until_done(51).await.pop().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32);
    assert!(
        end.message.contains("names no tenant")
            && end.message.contains("--default-tenant")
            && end.message.contains("--single-team"),
        "{}",
        end.message
    );
    let log = String::from_utf8(shared.read_log(&t, 0, 0).await.unwrap_or_default()).unwrap();
    assert!(!log.contains("should not run"), "{log}");

    let mut defaulted = launch(Launch {
        single_team: false,
        default_tenant: Some(TENANT.into()),
        ..Launch::default()
    })
    .await;
    // The tenant reaches its work directory through the test's (private) directory.
    let dir = defaulted.dir.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = shell(52, r#"echo "\${setValue(who=$(id -un))}""#, &master.addr);
    assert_eq!(defaulted.dispatch(vec![t]).await.accepted, [52]);
    let end = master.until_done(52).await.pop().unwrap();
    assert_eq!(end.kind, TaskEventKind::Success as i32, "{}", end.message);
    assert_eq!(end.output["who"], TENANT);
}

/// The OS user the tenant tests run tasks as: Debian's unprivileged `nobody`. Switching
/// to it needs a worker running as root, as CI's does.
const TENANT: &str = "nobody";

#[tokio::test]
async fn a_tenant_s_tasks_run_as_that_user_and_unknown_or_root_tenants_fail() {
    use std::os::unix::fs::PermissionsExt;
    let user = TENANT;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    // The tenant reaches its work directory through the test's (private) directory.
    std::fs::set_permissions(w.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut sh = shell(
        41,
        r#"echo "\${setValue(who=$(id -un))}"; echo "\${setValue(groups=$(id -G))}"; touch written_here && echo "\${setValue(home=$HOME)}"; echo "\${setValue(dir=$PWD)}""#,
        &master.addr,
    );
    sh.tenant = user.into();
    let script =
        "import os, pwd\nprint('${setValue(who=' + pwd.getpwuid(os.getuid()).pw_name + ')}')";
    let mut py = task(42, "python", "", &master.addr);
    py.definition_json = serde_json::json!({"type": "python", "script": script}).to_string();
    py.tenant = user.into();
    assert_eq!(w.dispatch(vec![sh, py]).await.accepted, [41, 42]);
    let mut outputs = HashMap::new();
    for _ in 0..4 {
        let e = master.next().await;
        if e.kind == TaskEventKind::Success as i32 || e.kind == TaskEventKind::Failure as i32 {
            outputs.insert(e.task_instance_id, (e.kind, e.output, e.message));
        }
    }
    let (kind, out, message) = &outputs[&41];
    assert_eq!(*kind, TaskEventKind::Success as i32, "{message}");
    assert_eq!(out["who"], user);
    let gid = std::process::Command::new("id")
        .args(["-g", user])
        .output()
        .unwrap();
    assert_eq!(
        out["groups"],
        String::from_utf8_lossy(&gid.stdout).trim(),
        "no root groups"
    );
    let (kind, out, message) = &outputs[&42];
    assert_eq!(*kind, TaskEventKind::Success as i32, "{message}");
    assert_eq!(out["who"], user);
    // The tenant's work directory goes when its task ends: no later task gets it.
    let dir = PathBuf::from(&outputs[&41].1["dir"]);
    assert!(dir.starts_with(w.path("data/work")), "{}", dir.display());
    let deadline = tokio::time::Instant::now() + WAIT;
    while dir.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} left",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    for (id, tenant, says) in [
        (
            43,
            "no_such_tenant_x",
            "'no_such_tenant_x' is not an OS user",
        ),
        (44, "root", "--allow-root-tenant"),
    ] {
        let mut t = shell(id, "echo should not run", &master.addr);
        t.tenant = tenant.into();
        assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [id]);
        let events = master.until_done(id).await;
        let end = events.last().unwrap();
        assert_eq!(end.kind, TaskEventKind::Failure as i32, "{tenant}");
        assert!(end.message.contains(says), "{tenant}: {}", end.message);
        let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap_or_default()).unwrap();
        assert!(!log.contains("should not run"), "{log}");
    }
}
