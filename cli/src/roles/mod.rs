//! The server roles of the `shoal` binary: standalone, api-server, master and worker.

mod args;
mod metrics;
mod options;
mod security;

use anyhow::Context;
use args::TimingArgs;
pub use args::{ApiServerArgs, MasterArgs, StandaloneArgs, WorkerArgs, dump_config};
use metrics::{MASTER_METRICS_PORT, WORKER_METRICS_PORT, metrics_listener, spawn_metrics};
use options::worker_datasources;
use security::{api_auth, given_secret, given_secret_key, standalone_secret_key, token_auth};
use shoal_api_server::{ApiState, Auth};
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::registry::Registry;
use shoal_common::secret_key::SecretKey;
use shoal_master::MasterConfig;
use shoal_store::Store;
use shoal_worker::WorkerConfig;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Cancels `shutdown` on Ctrl-C or SIGTERM.
fn cancel_on_signal(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
        info!("shutting down");
        shutdown.cancel();
    });
}

/// Where a master listens and how it is reached.
struct Listen<'a> {
    bind: IpAddr,
    port: u16,
    advertise_host: &'a str,
}

fn master_config(
    listen: Listen<'_>,
    claim_batch: usize,
    timing: &TimingArgs,
    secret: ClusterSecret,
    secret_key: Option<SecretKey>,
    api_url: Option<String>,
    event_retention: Duration,
) -> MasterConfig {
    MasterConfig {
        api_url,
        event_retention,
        overload: Default::default(),
        listen: SocketAddr::new(listen.bind, listen.port),
        advertise_host: listen.advertise_host.to_string(),
        claim_batch,
        poll: timing.command_poll,
        failover_poll: timing.failover_poll,
        reconcile: timing.reconcile_interval,
        secret,
        secret_key,
        retention: Some(timing.retention).filter(|d| !d.is_zero()),
    }
}

pub async fn standalone(args: StandaloneArgs) -> anyhow::Result<()> {
    let auth_on = args.auth || args.token.as_deref().is_some_and(|t| !t.is_empty());
    api_auth("standalone", args.bind, auth_on, args.insecure)?;
    let db = args.data_dir.join("shoal.db");
    shoal_worker::data_dir::prepare(&args.data_dir)
        .and_then(|()| shoal_worker::data_dir::create_private_file(&db))
        .with_context(|| format!("cannot prepare data dir {}", args.data_dir.display()))?;
    let store = Store::connect(&format!("sqlite://{}", db.display())).await?;
    let auth = match auth_on {
        true => token_auth(&store, args.token).await?,
        false => Auth::Off,
    };
    let registry = Registry::local();
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let loopback = IpAddr::from([127, 0, 0, 1]);
    // Its master and worker listen on loopback ports; a secret of its own keeps other local
    // users from calling them. Between themselves they call in process.
    let secret = ClusterSecret::random()
        .context("cannot read /dev/urandom")?
        .in_process();
    let secret_key = standalone_secret_key(args.secret_key.as_deref(), &args.data_dir)?;
    let https = args.https.load()?;
    let scheme = if https.is_some() { "https" } else { "http" };
    let listen = SocketAddr::new(args.bind, args.port);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!("cannot listen on {listen}: is another shoal running? pick another --port")
        })?;
    let bound = listener.local_addr()?;
    // Callback tasks hand out callback URLs on the API's own port.
    let api_url = args.api_url.clone().unwrap_or_else(|| {
        let host = match bound.ip().is_unspecified() {
            true => loopback,
            false => bound.ip(),
        };
        format!("{scheme}://{}", SocketAddr::new(host, bound.port()))
    });
    // Outside systems call callback URLs by the host of --api-url.
    let allowed_hosts: Vec<String> = args
        .allowed_hosts
        .iter()
        .cloned()
        .chain(
            reqwest::Url::parse(&api_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string)),
        )
        .collect();
    let (datasources, datasource_grants) = worker_datasources(&args.exec.datasources);
    let worker = shoal_worker::start(
        WorkerConfig {
            listen: SocketAddr::new(loopback, 0),
            advertise_host: loopback.to_string(),
            groups: vec![shoal_common::definition::DEFAULT_WORKER_GROUP.to_string()],
            slots: args.slots,
            data_dir: args.data_dir.clone(),
            python: args.exec.python.clone(),
            spark_submit: args.exec.spark_submit.clone(),
            task_env: args.exec.task_env.clone(),
            datasources,
            datasource_grants,
            // Short: the embedded master stops at the same time, and a restart of standalone
            // runs again what its worker could not finish.
            grace_period: Duration::from_secs(5),
            secret: secret.clone(),
            allow_root_tenant: args.exec.allow_root_tenant,
            default_tenant: args.exec.default_tenant.clone(),
            // Without auth, whoever reaches the API is an admin already.
            single_team: args.exec.single_team || !auth_on,
            min_free_disk: args.exec.min_free_disk,
            log_retention: Some(args.exec.log_retention).filter(|d| !d.is_zero()),
            container_runtime: args.exec.container_runtime.clone(),
            container_volume_dirs: args.exec.container_volume_dirs.clone(),
        },
        registry.clone(),
        shutdown.clone(),
    )
    .await?;
    let master = shoal_master::start(
        MasterConfig {
            overload: args.overload.limits(),
            ..master_config(
                Listen {
                    bind: loopback,
                    port: 0,
                    advertise_host: &loopback.to_string(),
                },
                200,
                &args.timing,
                secret.clone(),
                Some(secret_key.clone()),
                Some(api_url),
                args.limits.event_retention,
            )
        },
        store.clone(),
        registry.clone(),
        shutdown.clone(),
    )
    .await?;
    info!(url = %format!("{scheme}://{bound}"), data_dir = %args.data_dir.display(), "shoal standalone ready");
    shoal_api_server::serve(
        listener,
        ApiState {
            store,
            auth,
            registry: Some(registry),
            secret,
            limits: args.limits.limits(),
            secret_key: Some(secret_key),
            trusted_proxies: args.proxies.trusted_proxies,
            allowed_hosts,
        },
        https,
        shutdown.clone(),
    )
    .await?;
    shutdown.cancel();
    master.join().await?;
    worker.join().await?;
    Ok(())
}

pub async fn api_server(args: ApiServerArgs) -> anyhow::Result<()> {
    let secret = given_secret(args.cluster_secret.as_deref(), &args.tls)?;
    let https = args.https.load()?;
    let store = Store::connect(&args.database_url).await?;
    let auth = token_auth(&store, args.token).await?;
    let registry = match args.etcd.is_empty() {
        true => None,
        false => Some(Registry::etcd(&args.etcd, 10).await?),
    };
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let listen = SocketAddr::new(args.bind, args.port);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    info!(listen = %listener.local_addr()?, "api-server ready");
    shoal_api_server::serve(
        listener,
        ApiState {
            store,
            auth,
            registry,
            secret,
            limits: args.limits.limits(),
            secret_key: given_secret_key(args.secret_key.as_deref())?,
            trusted_proxies: args.proxies.trusted_proxies,
            // Every request carries a token (see shoal_api_server::drive_by).
            allowed_hosts: Vec::new(),
        },
        https,
        shutdown,
    )
    .await?;
    Ok(())
}

pub async fn master(args: MasterArgs) -> anyhow::Result<()> {
    let secret = args.cluster.secret("master")?;
    let store = Store::connect_retrying(&args.database_url).await?;
    let registry = Registry::etcd(&args.cluster.etcd, args.cluster.lease_ttl).await?;
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let c = &args.cluster;
    let listener = metrics_listener(c.bind, args.metrics_port, MASTER_METRICS_PORT).await?;
    let metrics = spawn_metrics(listener, shutdown.clone());
    let handle = shoal_master::start(
        MasterConfig {
            overload: args.overload.limits(),
            ..master_config(
                Listen {
                    bind: c.bind,
                    port: args.port,
                    advertise_host: &c.advertise_host,
                },
                args.claim_batch,
                &args.timing,
                secret,
                given_secret_key(args.secret_key.as_deref())?,
                args.api_url.clone(),
                args.event_retention,
            )
        },
        store,
        registry,
        shutdown.clone(),
    )
    .await?;
    let outcome = handle.join().await;
    // The master may also stop on its own (an error): the metrics server goes with it.
    shutdown.cancel();
    metrics.await??;
    Ok(outcome?)
}

pub async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let secret = args.cluster.secret("worker")?;
    let registry = Registry::etcd(&args.cluster.etcd, args.cluster.lease_ttl).await?;
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let c = &args.cluster;
    let listener = metrics_listener(c.bind, args.metrics_port, WORKER_METRICS_PORT).await?;
    let metrics = spawn_metrics(listener, shutdown.clone());
    let (datasources, datasource_grants) = worker_datasources(&args.exec.datasources);
    let handle = shoal_worker::start(
        WorkerConfig {
            listen: SocketAddr::new(c.bind, args.port),
            advertise_host: c.advertise_host.clone(),
            groups: args.groups,
            slots: args.slots,
            data_dir: args.data_dir,
            python: args.exec.python,
            spark_submit: args.exec.spark_submit,
            task_env: args.exec.task_env,
            datasources,
            datasource_grants,
            grace_period: args.grace_period,
            secret,
            allow_root_tenant: args.exec.allow_root_tenant,
            default_tenant: args.exec.default_tenant,
            single_team: args.exec.single_team,
            min_free_disk: args.exec.min_free_disk,
            log_retention: Some(args.exec.log_retention).filter(|d| !d.is_zero()),
            container_runtime: args.exec.container_runtime.clone(),
            container_volume_dirs: args.exec.container_volume_dirs.clone(),
        },
        registry,
        shutdown.clone(),
    )
    .await?;
    let outcome = handle.join().await;
    shutdown.cancel();
    metrics.await??;
    Ok(outcome?)
}
