//! The shoal worker: receives tasks from masters over gRPC, runs them, keeps their logs and
//! reports their state events back to the owning master through an outbox until acked.
//!
//! The worker never touches shoal's database. (Sql tasks connect to the user's datasources
//! configured on the worker, [`WorkerConfig::datasources`].) Its only durable output is the
//! task log under `data_dir/logs`; everything else (running tasks, unacked events) lives in
//! memory, and a worker that dies is handled by the masters' failover (its tasks are
//! re-submitted).
//!
//! Shutdown order (token cancelled): leave the registry and refuse new dispatches, kill the
//! running process groups and wait for their KILLED events, give the outbox up to
//! [`OUTBOX_FLUSH_WAIT`] to deliver, stop the gRPC server, then [`WorkerHandle::join`]
//! resolves.

mod executor;
mod logs;
mod outbox;
mod service;

use executor::{Datasources, Executor, ExecutorConfig, ExecutorDirs};
use outbox::Outbox;
use service::WorkerService;
use shoal_common::proto::worker_server::WorkerServer;
use shoal_common::registry::{Membership, NodeInfo, Registry, Role};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tracing::{error, info, warn};

/// How long shutdown waits for killed tasks to be reaped and report KILLED.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long shutdown lets the outbox deliver what it still holds.
pub const OUTBOX_FLUSH_WAIT: Duration = Duration::from_secs(2);
/// How long shutdown waits for open gRPC connections to finish their calls.
const SERVER_STOP_WAIT: Duration = Duration::from_secs(5);
/// Weight published in the registry; masters use it for load-aware picking.
const DEFAULT_WEIGHT: u32 = 100;
/// The default interpreter of python tasks ([`WorkerConfig::python`]).
pub const DEFAULT_PYTHON: &str = "python3";

/// Errors of the worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid worker config: {0}")]
    Config(String),
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
    /// Datasources of sql tasks by name (`--datasource NAME=URL`, repeated): `postgres://...`
    /// or `sqlite://PATH` URLs (`?mode=rwc` lets SQLite create a missing file; by default a
    /// missing file is an error, so a typo does not silently create an empty database).
    /// Checked at start (nothing is connected until a task uses one); each gets a pool of up
    /// to `min(slots, 8)` connections.
    pub datasources: BTreeMap<String, String>,
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
    let datasources = Datasources::new(&config.datasources, config.slots).map_err(Error::Config)?;
    let groups = if config.groups.is_empty() {
        vec![shoal_common::definition::DEFAULT_WORKER_GROUP.to_string()]
    } else {
        config.groups.clone()
    };
    let dirs = ExecutorDirs {
        logs: config.data_dir.join("logs"),
        work: config.data_dir.join("work"),
    };
    for dir in [&dirs.logs, &dirs.work] {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
    }

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

    let outbox = Outbox::new(addr.clone());
    let executor = Executor::new(
        ExecutorConfig {
            slots: config.slots,
            dirs: dirs.clone(),
            python: config.python.clone(),
            datasources,
        },
        outbox.clone(),
    );

    // Leaving the registry is the first step of shutdown, and also happens if the server
    // dies on its own: `node_stop` is a child of `shutdown` that the supervisor cancels.
    let node_stop = shutdown.child_token();
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
            },
            node_stop.clone(),
        )
        .await?;
    let heartbeat = tokio::spawn(publish_running(
        executor.running(),
        membership,
        node_stop.clone(),
    ));

    let server_stop = CancellationToken::new();
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = WorkerService::new(executor.clone(), dirs.logs.clone());
    let server = tokio::spawn(
        Server::builder()
            .add_service(WorkerServer::new(service))
            .serve_with_incoming_shutdown(incoming, server_stop.clone().cancelled_owned()),
    );

    info!(
        %addr,
        slots = config.slots,
        groups = ?groups,
        data_dir = %config.data_dir.display(),
        python = %config.python,
        datasources = ?config.datasources.keys().collect::<Vec<_>>(),
        "worker started"
    );
    let join = tokio::spawn(supervise(Supervised {
        shutdown,
        node_stop,
        executor,
        outbox,
        server_stop,
        server,
        heartbeat,
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

/// Publishes the running count in the registry heartbeat whenever it changes. Holds the
/// membership: dropping it leaves the registry.
async fn publish_running(
    mut running: watch::Receiver<u32>,
    membership: Membership,
    stop: CancellationToken,
) {
    loop {
        // Cancellation-safe: `cancelled` and `watch::Receiver::changed` keep no partial state;
        // a change made while we publish is seen by the next `changed`.
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = running.changed() => if changed.is_err() { break },
        }
        let n = *running.borrow_and_update();
        membership.update(|node| node.running = n);
    }
}

struct Supervised {
    shutdown: CancellationToken,
    node_stop: CancellationToken,
    executor: std::sync::Arc<Executor>,
    outbox: Outbox,
    server_stop: CancellationToken,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
    heartbeat: JoinHandle<()>,
}

/// Waits for shutdown (or a dead server) and runs the shutdown sequence.
async fn supervise(s: Supervised) -> Result<()> {
    let Supervised {
        shutdown,
        node_stop,
        executor,
        outbox,
        server_stop,
        mut server,
        heartbeat,
    } = s;
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
    node_stop.cancel();

    if !executor.shutdown(KILL_WAIT).await {
        warn!(wait = ?KILL_WAIT, "some killed tasks did not finish in time");
    }
    if !outbox.flush(OUTBOX_FLUSH_WAIT).await {
        warn!(
            pending = outbox.pending(),
            "outbox not fully delivered at shutdown; events dropped"
        );
    }

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
    info!("worker stopped");
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
