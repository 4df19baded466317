//! The master: claims commands, drives workflow runtimes, queues and dispatches tasks to
//! workers, and applies the events they report. The leader among masters also fires cron
//! schedules and drives backfills.

pub mod alerts;
mod brokers;
mod clients;
pub mod cron;
pub mod dispatch;
pub mod engine;
mod environments;
pub mod failover;
pub mod intake;
pub mod overload;
pub mod queue;
mod retention;
pub mod runtime;
mod secrets;
mod service;
mod take_over;

use clients::Peers;
use cron::Cron;
use dispatch::{Dispatcher, LeaseCheck};
use engine::{Engine, EngineMsg};
use failover::Failover;
use intake::Intake;
use retention::Retention;
use service::MasterService;
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::proto::master_server::MasterServer;
use shoal_common::registry::{NodeInfo, Registry, Role};
use shoal_common::secret_key::SecretKey;
use shoal_common::types::now_ms;
use shoal_store::Store;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tracing::info;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Common(#[from] shoal_common::Error),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error("invalid address '{0}': {1}")]
    BadAddress(String, String),
    #[error("{0}")]
    Tls(String),
    #[error("master task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// Where the gRPC server listens; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Host part of the address workers report to.
    pub advertise_host: String,
    /// Commands claimed per transaction.
    pub claim_batch: usize,
    /// Fallback command poll when no notification arrives.
    pub poll: Duration,
    /// Fallback check for dead masters and workers (membership changes act at once).
    pub failover_poll: Duration,
    /// How often every worker's attempts are checked against the store.
    pub reconcile: Duration,
    /// Required of every call to this master, and carried by its calls to workers and
    /// other masters.
    pub secret: ClusterSecret,
    /// Opens project secrets (None: a task naming one fails, saying so).
    pub secret_key: Option<SecretKey>,
    /// The api-server's URL outside systems reach (None: callback tasks fail, saying so).
    pub api_url: Option<String>,
    /// How long ended instances are kept (`--retention`; None: for ever).
    pub retention: Option<Duration>,
    /// How long an event a broker trigger delivered that completed no wait is kept
    /// (`--event-retention`).
    pub event_retention: Duration,
    /// Above or below these the master claims no new commands.
    pub overload: overload::Limits,
}

pub struct MasterHandle {
    /// host:port workers report to; also the owner name of this master's instances.
    pub addr: String,
    tasks: Vec<JoinHandle<()>>,
}

impl MasterHandle {
    pub async fn join(self) -> Result<()> {
        for t in self.tasks {
            t.await?;
        }
        Ok(())
    }
}

pub async fn start(
    config: MasterConfig,
    store: Store,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<MasterHandle> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| Error::Listen(config.listen, e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Listen(config.listen, e))?
        .port();
    let addr = format!("{}:{port}", config.advertise_host);

    // Registered first: the dispatcher needs the lease to know when it may send work.
    let membership = registry
        .register(
            NodeInfo {
                role: Role::Master,
                addr: addr.clone(),
                groups: vec![],
                slots: 0,
                running: 0,
                weight: 100,
                started_at: now_ms(),
                lapses: 0,
                overloaded: None,
            },
            shutdown.clone(),
        )
        .await?;
    let (engine_tx, engine_rx) = mpsc::unbounded_channel();
    let (dispatch_tx, dispatch_rx) = mpsc::unbounded_channel();
    let clients = Peers::new(config.secret.clone());
    let workers = registry.watch(Role::Worker, shutdown.clone()).await?;

    let secrets = secrets::Secrets::new(store.clone(), config.secret_key.clone());
    let environments = environments::Environments::new(store.clone());
    let engine = Engine::new(
        store.clone(),
        secrets.clone(),
        addr.clone(),
        dispatch_tx,
        engine_tx.clone(),
        clients.clone(),
        workers.clone(),
    )
    .with_api_url(config.api_url.clone())
    .with_environments(environments.clone());
    let failover = Failover {
        store: store.clone(),
        me: addr.clone(),
        masters: registry.watch(Role::Master, shutdown.clone()).await?,
        workers: workers.clone(),
        poll: config.failover_poll,
        reconcile: config.reconcile,
    };
    let lease = LeaseCheck {
        gate: membership.gate(),
        lost: membership.lost(),
    };
    let to_engine = engine_tx.clone();
    let reports = Box::new(move |r: dispatch::Report| {
        let _ = to_engine.send(r.into());
    });
    let dispatcher = Dispatcher::new(workers, clients, reports, lease);
    let leadership = registry.lead("cron", &addr, shutdown.clone());
    // Housekeeping goes with the cron lead: one master does it.
    let retention = Retention {
        store: store.clone(),
        leadership: leadership.clone(),
        keep: config.retention,
    };
    // Broker triggers' consumers go with the cron lead too: one per trigger in the cluster.
    let brokers = brokers::Brokers::new(
        store.clone(),
        secrets.clone(),
        addr.clone(),
        config.event_retention,
        leadership.clone(),
    );
    let cron = Cron {
        store: store.clone(),
        leadership,
    };
    let alert_sender = alerts::Sender {
        store: store.clone(),
        me: addr.clone(),
        key: config.secret_key.clone(),
    };
    let intake = Intake {
        store: store.clone(),
        secrets: secrets.clone(),
        environments: environments.clone(),
        owner: addr.clone(),
        batch: config.claim_batch,
        poll: config.poll,
        overloaded: overload::watch(config.overload, &membership, shutdown.clone()),
    };

    // The builder's tcp_nodelay does not reach a listener we bind ourselves; without it,
    // Nagle's algorithm stalls acks by ~40 ms whenever several calls share a connection.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let service = MasterServer::with_interceptor(
        MasterService {
            engine: engine_tx.clone(),
        },
        config.secret.guard(),
    );
    let in_process = (config.secret).serve_in_process(&addr, Routes::new(service.clone()));
    let server = config
        .secret
        .server()
        .map_err(Error::Tls)?
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned());
    let mut tasks = vec![
        tokio::spawn(engine.run(engine_rx, shutdown.clone())),
        tokio::spawn(dispatcher.run(dispatch_rx, shutdown.clone())),
        tokio::spawn(failover.run(engine_tx.clone(), shutdown.clone())),
        tokio::spawn(intake.run(engine_tx.clone(), shutdown.clone())),
        tokio::spawn(cron.run(shutdown.clone())),
        tokio::spawn(retention.run(shutdown.clone())),
        tokio::spawn(brokers.run(shutdown.clone())),
        tokio::spawn(alert_sender.run(shutdown.clone())),
        tokio::spawn(secrets.run(shutdown.clone())),
        tokio::spawn(environments.run(shutdown.clone())),
        tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "master grpc server failed");
            }
            drop(in_process);
        }),
    ];
    // A lapsed lease means another master may have taken instances over.
    let mut lost = membership.lost();
    let engine = engine_tx;
    tasks.push(tokio::spawn(async move {
        while lost.changed().await.is_ok() {
            let generation = *lost.borrow_and_update();
            if engine
                .send(EngineMsg::CheckOwnership { generation })
                .is_err()
            {
                break;
            }
        }
    }));
    info!(%addr, "master started");
    Ok(MasterHandle { addr, tasks })
}
