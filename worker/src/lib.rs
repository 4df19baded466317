//! The shoal worker: receives tasks from masters over gRPC, runs them, keeps their logs and
//! reports their state events back to the owning master through an outbox until acked.
//!
//! The worker never touches shoal's database. (Sql tasks connect to the user's datasources
//! configured on the worker, [`WorkerConfig::datasources`].) Its durable output is the task
//! log under `data_dir/logs`, and while a script task runs, a record of its process group
//! under `data_dir/running`; everything else (running tasks, unacked events) lives in
//! memory, and a worker that dies is handled by the masters' failover (its tasks are
//! re-submitted).
//!
//! Start-up: lock the data dir (one worker per data dir), kill the task processes a crashed
//! predecessor on this data dir left behind (their attempts run again elsewhere), then
//! serve and register.
//!
//! Shutdown (token cancelled):
//! 1. drain: refuse dispatches of new attempts and publish no free slots, so that masters
//!    stop picking this worker. It stays registered: a master runs the tasks of a worker
//!    that leaves again elsewhere, at once;
//! 2. let the running tasks finish for up to [`WorkerConfig::grace_period`]; their events
//!    go to their masters as usual;
//! 3. past it, abandon what is left: kill it and report nothing (a KILLED event would read
//!    as an operator's kill); the masters re-run those attempts as `need_fault_tolerance`
//!    when the worker leaves the registry in step 5;
//! 4. give the outbox up to [`OUTBOX_FLUSH_WAIT`] to deliver;
//! 5. leave the registry;
//! 6. stop the gRPC server; then [`WorkerHandle::join`] resolves.
//!
//! A lost registry lease (it expired before the worker could renew it, so the masters saw
//! the worker leave and re-run its attempts) abandons every task accepted before it.

pub mod data_dir;
mod disk;
mod executor;
pub use executor::{EVERY_PROJECT, TASK_ENV};
mod journal;
mod logs;
mod outbox;
mod service;

use executor::{
    Containers, Datasources, Executor, ExecutorConfig, ExecutorDirs, TaskEnvironment, Tenants,
};
use outbox::Outbox;
use service::WorkerService;
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::proto::worker_server::WorkerServer;
use shoal_common::registry::{Membership, NodeInfo, Registry, Role};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tracing::{error, info, warn};

/// How long shutdown waits for the tasks it abandoned to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long shutdown lets the outbox deliver what it still holds.
pub const OUTBOX_FLUSH_WAIT: Duration = Duration::from_secs(2);
/// How long shutdown waits for open gRPC connections to finish their calls.
const SERVER_STOP_WAIT: Duration = Duration::from_secs(5);
/// Weight published in the registry; masters use it for load-aware picking.
const DEFAULT_WEIGHT: u32 = 100;
/// The default interpreter of python tasks ([`WorkerConfig::python`]).
pub const DEFAULT_PYTHON: &str = "python3";
/// The default of [`WorkerConfig::grace_period`] for a cluster worker.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);

/// Errors of the worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid worker config: {0}")]
    Config(String),
    #[error("{0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "data dir {} is in use by another running worker (each worker needs its own)",
        path.display()
    )]
    DataDirInUse { path: PathBuf },
    #[error("invalid master address '{addr}': {reason}")]
    MasterAddr { addr: String, reason: String },
    #[error("registry: {0}")]
    Registry(#[from] shoal_common::Error),
    #[error("grpc server failed: {0}")]
    Server(#[from] tonic::transport::Error),
    #[error("worker task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tonic::Status {
    /// The one place worker errors become gRPC statuses.
    fn from(e: Error) -> Self {
        match e {
            Error::Config(_) | Error::MasterAddr { .. } => {
                tonic::Status::invalid_argument(e.to_string())
            }
            _ => tonic::Status::internal(e.to_string()),
        }
    }
}

/// How to run one worker.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Where the gRPC server listens; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Host part of the address registered and reported, e.g. "127.0.0.1".
    pub advertise_host: String,
    /// Worker groups this worker serves; empty means `["default"]`.
    pub groups: Vec<String>,
    /// Maximum number of concurrently running tasks (at least 1).
    pub slots: u32,
    /// Logs go under `data_dir/logs`, task scripts and work dirs under `data_dir/work`.
    pub data_dir: PathBuf,
    /// Interpreter of python tasks (`--python`; default [`DEFAULT_PYTHON`]): a name looked up
    /// in `PATH` or a path, e.g. a virtualenv's `bin/python`. It runs `task.py` in the task's
    /// work directory with `PYTHONUNBUFFERED=1` and the task's parameters in the environment.
    pub python: String,
    /// The spark-submit of spark tasks (`--spark-submit`); none: `$SPARK_HOME/bin/spark-submit`
    /// when the worker's environment sets SPARK_HOME, else `spark-submit` on its PATH.
    pub spark_submit: Option<PathBuf>,
    /// Names of variables of the worker's environment that script tasks get besides
    /// `PATH`, `HOME`, `LANG`, `LC_*` and the others of [`TASK_ENV`] (`--task-env`, e.g.
    /// `JAVA_HOME`); never `SHOAL_*`. Nothing else of the worker's environment reaches a task.
    pub task_env: Vec<String>,
    /// Datasources of sql tasks by name (`--datasource NAME@PROJECTS=URL`, repeated):
    /// `postgres://...` or `sqlite://PATH` URLs (`?mode=rwc` lets SQLite create a missing file; by default a
    /// missing file is an error, so a typo does not silently create an empty database).
    /// Checked at start (nothing is connected until a task uses one); each gets a pool of up
    /// to `min(slots, 8)` connections.
    pub datasources: BTreeMap<String, String>,
    /// The projects each datasource serves (`--datasource NAME@P1,P2=URL`; `*`: every
    /// project). One without an entry serves every project on a [`single_team`] worker,
    /// and is refused at start on another.
    ///
    /// [`single_team`]: WorkerConfig::single_team
    pub datasource_grants: BTreeMap<String, Vec<String>>,
    /// How long shutdown lets running tasks finish (`--grace-period`, default
    /// [`DEFAULT_GRACE_PERIOD`]). Tasks still running then are killed without an event and
    /// run again elsewhere (`need_fault_tolerance`) once the worker has left the registry.
    pub grace_period: Duration,
    /// Required of every call to this worker, and carried by its calls to masters.
    pub secret: ClusterSecret,
    /// Whether a workflow's tenant may be root (`--allow-root-tenant`); by default a task
    /// of a workflow whose tenant is root fails.
    pub allow_root_tenant: bool,
    /// The OS user script tasks of workflows without a `tenant` run as
    /// (`--default-tenant`).
    pub default_tenant: Option<String>,
    /// Whether every user of this shoal may act as its admin (`--single-team`; a standalone
    /// without auth): then a task without a tenant runs as the worker's own OS user, and a
    /// datasource without a grant serves every project. Otherwise such a task fails, with
    /// the reason, as does one whose tenant is the worker's own user.
    pub single_team: bool,
    /// Least free space (bytes) of the data dir's disk for taking a new task
    /// (`--min-free-disk`, default 100 MiB; 0: no check). Below it, dispatches are refused
    /// with the reason and masters send the tasks elsewhere.
    pub min_free_disk: u64,
    /// How long task logs are kept on this worker (`--log-retention`; None: for ever): an
    /// instance's log directory goes once nothing was written in it for this long.
    pub log_retention: Option<Duration>,
    /// What runs container tasks (`--container-runtime`): `podman` or `docker`, a name
    /// looked up in `PATH` or a path; None: the first of podman, docker on `PATH`.
    pub container_runtime: Option<String>,
    /// The host directories container tasks may mount from (`--container-volume-dir`,
    /// repeated; each must exist). None: a container task mounts no host path, unless the
    /// worker is [`single_team`](WorkerConfig::single_team), where it mounts any.
    pub container_volume_dirs: Vec<PathBuf>,
}

/// A started worker.
pub struct WorkerHandle {
    /// `advertise_host:actual_port`, as registered and sent to masters.
    pub addr: String,
    join: JoinHandle<Result<()>>,
}

impl WorkerHandle {
    /// Resolves after shutdown has completed (or the gRPC server failed).
    pub async fn join(self) -> Result<()> {
        self.join.await?
    }
}

/// Starts a worker: binds its gRPC server, registers it and returns once it serves.
pub async fn start(
    config: WorkerConfig,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<WorkerHandle> {
    if config.slots == 0 {
        return Err(Error::Config("slots must be at least 1".into()));
    }
    if config.python.trim().is_empty() {
        return Err(Error::Config("python interpreter must not be empty".into()));
    }
    let datasources = Datasources::new(
        &config.datasources,
        &config.datasource_grants,
        config.single_team,
        config.slots,
    )
    .map_err(Error::Config)?;
    let task_env = TaskEnvironment::of_worker(&config.task_env).map_err(Error::Config)?;
    let containers = Containers::new(
        config.container_runtime.clone(),
        &config.container_volume_dirs,
        config.single_team,
    )
    .map_err(Error::Config)?;
    let groups = if config.groups.is_empty() {
        vec![shoal_common::definition::DEFAULT_WORKER_GROUP.to_string()]
    } else {
        config.groups.clone()
    };
    let dirs = ExecutorDirs {
        logs: config.data_dir.join("logs"),
        work: config.data_dir.join("work"),
        running: config.data_dir.join("running"),
    };
    data_dir::prepare(&config.data_dir).map_err(|source| Error::Io {
        path: config.data_dir.clone(),
        source,
    })?;
    let lock = lock_data_dir(&config.data_dir)?;
    // Before serving: whatever is recorded there belongs to a previous run of this worker.
    let leftovers = executor::kill_leftovers(&dirs.running).map_err(|source| Error::Io {
        path: dirs.running.clone(),
        source,
    })?;
    if leftovers > 0 {
        warn!(
            process_groups = leftovers,
            "killed task processes a previous run of this worker left behind"
        );
    }
    // Their work directories too, now that nothing of theirs runs.
    executor::clear_work_dirs(&dirs.work).map_err(|source| Error::Io {
        path: dirs.work.clone(),
        source,
    })?;

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
    let port = listener
        .local_addr()
        .map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?
        .port();
    let addr = host_port(&config.advertise_host, port);

    let journal_path = config.data_dir.join("outbox.journal");
    let (journal, unacked) = journal::Journal::open(&journal_path).map_err(|source| Error::Io {
        path: journal_path.clone(),
        source,
    })?;
    let outbox = Outbox::new(addr.clone(), config.secret.clone(), Some(journal));
    let executor = Executor::new(
        ExecutorConfig {
            slots: config.slots,
            dirs: dirs.clone(),
            python: config.python.clone(),
            spark_submit: executor::spark_submit(
                config.spark_submit.as_deref(),
                std::env::var_os("SPARK_HOME"),
            ),
            containers,
            task_env,
            datasources,
            tenants: Tenants {
                default: config.default_tenant.clone(),
                single_team: config.single_team,
                allow_root: config.allow_root_tenant,
            },
            min_free_disk: config.min_free_disk,
            data_dir: config.data_dir.clone(),
        },
        outbox.clone(),
    );
    // Before registering: a master that sees this worker back asks it about its attempts.
    executor.resume_finished(unacked);

    // Leaving the registry is a late step of shutdown (see the crate docs), also taken when
    // the server dies on its own: the supervisor cancels `node_stop`. `drain` tells the
    // masters, through the registry entry, that the worker takes nothing new.
    let node_stop = CancellationToken::new();
    let drain = CancellationToken::new();
    let membership = registry
        .register(
            NodeInfo {
                role: Role::Worker,
                addr: addr.clone(),
                groups: groups.clone(),
                slots: config.slots,
                running: 0,
                weight: DEFAULT_WEIGHT,
                started_at: shoal_common::types::now_ms(),
                lapses: 0,
                overloaded: None,
            },
            node_stop.clone(),
        )
        .await?;
    executor.follow_lease(membership.lost(), membership.gate());
    let lease_watch = tokio::spawn(executor::abandon_on_lease_loss(
        executor.clone(),
        membership.lost(),
        node_stop.clone(),
    ));
    let heartbeat = tokio::spawn(keep_membership(
        membership,
        executor.running(),
        drain.clone(),
        node_stop.clone(),
    ));

    if let Some(keep) = config.log_retention {
        let running = executor.clone();
        tokio::spawn(logs::prune_every(
            dirs.logs.clone(),
            keep,
            move || running.running_attempts(),
            node_stop.clone(),
        ));
    }
    let server_stop = CancellationToken::new();
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = WorkerService::new(executor.clone(), dirs.logs.clone());
    let service = WorkerServer::with_interceptor(service, config.secret.guard());
    let in_process = (config.secret).serve_in_process(&addr, Routes::new(service.clone()));
    let mut builder = config.secret.server().map_err(Error::Tls)?;
    let serving = builder
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, server_stop.clone().cancelled_owned());
    let server = tokio::spawn(async move {
        let served = serving.await;
        drop(in_process);
        served
    });

    info!(
        %addr,
        slots = config.slots,
        groups = ?groups,
        data_dir = %config.data_dir.display(),
        python = %config.python,
        single_team = config.single_team,
        default_tenant = config.default_tenant.as_deref().unwrap_or(""),
        datasources = ?config.datasources.keys().collect::<Vec<_>>(),
        grace_period = %shoal_common::duration::format(config.grace_period),
        "worker started"
    );
    let join = tokio::spawn(supervise(Supervised {
        shutdown,
        drain,
        grace_period: config.grace_period,
        node_stop,
        executor,
        outbox,
        server_stop,
        server,
        heartbeat,
        lease_watch,
        lock,
    }));
    Ok(WorkerHandle { addr, join })
}

/// `host:port`, bracketing a bare IPv6 host.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Takes the data dir's lock for as long as the worker runs (the kernel releases it when the
/// process dies). Two workers on one data dir would kill each other's tasks at start-up.
fn lock_data_dir(data_dir: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join("worker.lock");
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io)?;
    // SAFETY: flock(2) on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => Error::DataDirInUse {
                path: data_dir.to_path_buf(),
            },
            _ => io(e),
        });
    }
    Ok(file)
}

/// Keeps the registry entry current until `stop` is cancelled: the running count whenever
/// it changes, and no free slots once `drain` is cancelled, so that masters stop picking
/// this worker while it stays registered. (The entry itself lives until `stop`.)
async fn keep_membership(
    membership: Membership,
    mut running: watch::Receiver<u32>,
    drain: CancellationToken,
    stop: CancellationToken,
) {
    let mut draining = false;
    loop {
        // Cancellation-safe: `cancelled` and `watch::Receiver::changed` keep no partial state;
        // a change made while we publish is seen by the next `changed`.
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = drain.cancelled(), if !draining => {
                draining = true;
                membership.update(|node| node.slots = 0);
            }
            changed = running.changed() => {
                if changed.is_err() {
                    break;
                }
                let n = *running.borrow_and_update();
                membership.update(|node| node.running = n);
            }
        }
    }
}

struct Supervised {
    shutdown: CancellationToken,
    drain: CancellationToken,
    grace_period: Duration,
    node_stop: CancellationToken,
    executor: std::sync::Arc<Executor>,
    outbox: Outbox,
    server_stop: CancellationToken,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
    heartbeat: JoinHandle<()>,
    lease_watch: JoinHandle<()>,
    /// The data dir lock, released when the worker has stopped.
    lock: File,
}

/// Waits for shutdown (or a dead server) and runs the shutdown sequence.
async fn supervise(s: Supervised) -> Result<()> {
    let Supervised {
        shutdown,
        drain,
        grace_period,
        node_stop,
        executor,
        outbox,
        server_stop,
        mut server,
        heartbeat,
        lease_watch,
        lock,
    } = s;
    // Whatever happens to this task (a panic), the node leaves the registry.
    let _leave = node_stop.clone().drop_guard();
    let mut outcome = Ok(());
    let mut server_done = false;
    tokio::select! {
        _ = shutdown.cancelled() => info!("worker shutting down"),
        res = &mut server => {
            server_done = true;
            outcome = match res {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(Error::Server(e)),
                Err(e) => Err(Error::Join(e)),
            };
            error!(result = ?outcome, "worker grpc server stopped unexpectedly, shutting down");
        }
    }
    executor.drain();
    drain.cancel();

    let grace = shoal_common::duration::format(grace_period);
    let running = *executor.running().borrow();
    if running > 0 {
        info!(running, grace_period = %grace, "letting running tasks finish");
    }
    if !executor.wait_idle(grace_period).await {
        let abandoned = executor.abandon_all();
        warn!(
            abandoned,
            grace_period = %grace,
            "grace period over: killed the tasks still running, without reporting them; \
             the masters run them again once this worker has left the registry"
        );
        if !executor.wait_idle(KILL_WAIT).await {
            warn!(wait = ?KILL_WAIT, "some killed tasks did not end in time");
        }
    }
    executor.close().await;
    if !outbox.flush(OUTBOX_FLUSH_WAIT).await {
        warn!(
            pending = outbox.pending(),
            "outbox not fully delivered at shutdown; events dropped"
        );
    }

    // Only now: masters re-run whatever a worker that left was running.
    node_stop.cancel();
    server_stop.cancel();
    if !server_done {
        match tokio::time::timeout(SERVER_STOP_WAIT, &mut server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => outcome = Err(Error::Server(e)),
            Ok(Err(e)) => outcome = Err(Error::Join(e)),
            Err(_) => {
                warn!("grpc connections still open after shutdown wait, closing them");
                server.abort();
            }
        }
    }
    outbox.stop().await;
    if let Err(e) = heartbeat.await {
        warn!(error = %e, "heartbeat publisher failed");
    }
    if let Err(e) = lease_watch.await {
        warn!(error = %e, "lease watch failed");
    }
    info!("worker stopped");
    drop(lock);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the unit tests that check the process-wide worker metrics
    /// ([`shoal_common::metrics`]), so that their counts are exact.
    pub(crate) static METRICS_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[test]
    fn advertised_address_brackets_ipv6() {
        assert_eq!(host_port("127.0.0.1", 7000), "127.0.0.1:7000");
        assert_eq!(host_port("::1", 7000), "[::1]:7000");
        assert_eq!(host_port("[::1]", 7000), "[::1]:7000");
        assert_eq!(host_port("worker-1.example", 1), "worker-1.example:1");
    }
}
