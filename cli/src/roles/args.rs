//! Each role's command-line arguments, and `--dump-config`.

use super::metrics::{MASTER_METRICS_PORT, WORKER_METRICS_PORT};
use super::options::{
    ExecArgs, HttpsArgs, LimitArgs, OverloadArgs, ProxyArgs, TlsArgs, masked, masked_url,
    not_masked, serialize_duration,
};
use clap::Args;
use serde::Serialize;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Serialize, Debug)]
pub struct Common {
    /// TOML file with any of these settings (keys are the long flag names).
    #[arg(long, env = "SHOAL_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration and exit.
    #[arg(long)]
    #[serde(skip)]
    pub dump_config: bool,
}

#[derive(Args, Serialize, Debug)]
pub struct StandaloneArgs {
    /// Where the SQLite database, task logs and work files live.
    #[arg(long, env = "SHOAL_DATA_DIR", default_value = "./shoal-data")]
    pub data_dir: PathBuf,
    /// Port of the REST API, web UI and Prometheus' `GET /metrics`; 0 picks a free one
    /// (logged).
    #[arg(long, env = "SHOAL_PORT", default_value_t = 12345)]
    pub port: u16,
    #[arg(long, env = "SHOAL_BIND", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// The URL outside systems reach the API on, for callback tasks' callback URLs
    /// (default: http://BIND:PORT).
    #[arg(long, env = "SHOAL_API_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// Require API tokens (users, projects and roles, as in a cluster). The first start
    /// with it creates the global admin `admin` and prints its token. Needed when --bind is
    /// not a loopback address.
    #[arg(long, env = "SHOAL_AUTH")]
    pub auth: bool,
    /// A token accepted as a global admin's (implies --auth); the way in before any user
    /// exists, or back in when their tokens are lost.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_TOKEN", hide_env_values = true, value_parser = not_masked)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub token: Option<String>,
    /// Serve the API on a non-loopback --bind without auth: anyone who reaches the port
    /// can then start workflows, which run commands. Warns at start.
    #[arg(long, env = "SHOAL_INSECURE")]
    pub insecure: bool,
    /// Without auth, a host name (besides IP addresses, localhost and the host of
    /// --api-url) the API may be reached by; requests to any other name are refused, so
    /// that a web page cannot reach the API through a name of its own (DNS rebinding).
    /// Repeat the flag or separate with commas.
    #[arg(
        long = "allowed-host",
        value_name = "NAME",
        env = "SHOAL_ALLOWED_HOST",
        value_delimiter = ','
    )]
    #[serde(rename = "allowed_host", skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub https: HttpsArgs,
    /// Tasks the embedded worker runs at once.
    #[arg(long, env = "SHOAL_SLOTS", default_value_t = 100)]
    pub slots: u32,
    /// Key of the project secrets (64 hex digits, e.g. `openssl rand -hex 32`);
    /// default: `<data-dir>/secret.key`, made on the first start.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_SECRET_KEY", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub secret_key: Option<String>,

    #[command(flatten)]
    #[serde(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub proxies: ProxyArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub overload: OverloadArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub common: Common,
}

#[derive(Args, Serialize, Debug)]
pub struct ApiServerArgs {
    /// Postgres or MySQL/MariaDB URL, e.g. postgres://postgres@127.0.0.1:5432/shoal or
    /// mysql://root@127.0.0.1:3306/shoal
    #[arg(long, env = "SHOAL_DATABASE_URL")]
    #[serde(serialize_with = "masked_url")]
    pub database_url: String,
    /// Port of the REST API and Prometheus' `GET /metrics`; 0 picks a free one (logged).
    #[arg(long, env = "SHOAL_PORT", default_value_t = 12345)]
    pub port: u16,
    #[arg(long, env = "SHOAL_BIND", default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// A token accepted as a global admin's, besides users' tokens (every request needs
    /// one). Without it, the first start of a cluster creates the global admin `admin` and
    /// prints its token once.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_TOKEN", hide_env_values = true, value_parser = not_masked)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub token: Option<String>,
    /// etcd endpoints, comma separated; lets `GET /cluster` (`shoal cluster`) list nodes.
    #[arg(long, env = "SHOAL_ETCD", value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub etcd: Vec<String>,
    /// The cluster's secret, carried by the calls to masters (stop, pause) and workers
    /// (task logs); the same on every node.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_CLUSTER_SECRET", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub cluster_secret: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub https: HttpsArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsArgs,
    /// Key of the project secrets (64 hex digits, e.g. `openssl rand -hex 32`): the api-server
    /// encrypts them with it, masters decrypt them; the same on both. Without it, secrets
    /// cannot be set.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_SECRET_KEY", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub secret_key: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub proxies: ProxyArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub common: Common,
}

#[derive(Args, Serialize, Debug)]
pub struct ClusterArgs {
    /// etcd endpoints, comma separated.
    #[arg(
        long,
        env = "SHOAL_ETCD",
        default_value = "http://127.0.0.1:2379",
        value_delimiter = ','
    )]
    pub etcd: Vec<String>,
    /// Seconds a node's registration outlives its last heartbeat.
    #[arg(long, env = "SHOAL_LEASE_TTL", default_value_t = 10)]
    pub lease_ttl: i64,
    #[arg(long, env = "SHOAL_BIND", default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// Host other nodes use to reach this one.
    #[arg(long, env = "SHOAL_ADVERTISE_HOST", default_value = "127.0.0.1")]
    pub advertise_host: String,
    /// The cluster's secret (at least 16 characters, e.g. `openssl rand -hex 32`), the same
    /// on every node: every gRPC call between nodes carries it and every call without it is
    /// refused. Needed when --bind is not a loopback address.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_CLUSTER_SECRET", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub cluster_secret: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsArgs,
    /// Run without a cluster secret or TLS on a non-loopback --bind: anyone who reaches the
    /// gRPC port can then dispatch tasks to a worker. For trusted networks only; warns at
    /// start.
    #[arg(long, env = "SHOAL_INSECURE")]
    pub insecure: bool,
}

#[derive(Args, Serialize, Debug)]
pub struct MasterArgs {
    #[arg(long, env = "SHOAL_DATABASE_URL")]
    #[serde(serialize_with = "masked_url")]
    pub database_url: String,
    /// gRPC port workers report to.
    #[arg(long, env = "SHOAL_PORT", default_value_t = 5678)]
    pub port: u16,
    /// Commands claimed per transaction.
    #[arg(long, env = "SHOAL_CLAIM_BATCH", default_value_t = 200)]
    pub claim_batch: usize,
    /// Key of the project secrets (64 hex digits, e.g. `openssl rand -hex 32`), the api-server's:
    /// tasks that name a secret need it.
    /// Refused on the command line, where every local user can read it: set it in the
    /// environment or a --config file.
    #[arg(long, env = "SHOAL_SECRET_KEY", hide_env_values = true)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "masked")]
    pub secret_key: Option<String>,
    /// The api-server's URL that outside systems reach (e.g. http://shoal.example:8080):
    /// callback tasks hand out callback URLs on it.
    #[arg(long, env = "SHOAL_API_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// How long an event a broker trigger delivered that completed no waiting task is
    /// kept for a wait that begins later (e.g. 1h, 2d); 0 keeps none. Give it the
    /// api-server's value.
    #[arg(long, env = "SHOAL_EVENT_RETENTION", default_value = "1h", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub event_retention: Duration,

    /// Port of Prometheus' `GET /metrics` (on --bind); 0 turns it off. If this default
    /// port is taken (a second master on the host), the master runs without it and warns.
    #[arg(long, env = "SHOAL_METRICS_PORT", default_value_t = MASTER_METRICS_PORT)]
    pub metrics_port: u16,
    #[command(flatten)]
    #[serde(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub overload: OverloadArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub common: Common,
}

#[derive(Args, Serialize, Debug)]
pub struct WorkerArgs {
    /// gRPC port masters dispatch to.
    #[arg(long, env = "SHOAL_PORT", default_value_t = 1234)]
    pub port: u16,
    /// Worker groups this worker serves, comma separated.
    #[arg(
        long,
        env = "SHOAL_GROUPS",
        default_value = "default",
        value_delimiter = ','
    )]
    pub groups: Vec<String>,
    #[arg(long, env = "SHOAL_SLOTS", default_value_t = 100)]
    pub slots: u32,
    /// Where task logs and work files live.
    #[arg(long, env = "SHOAL_DATA_DIR", default_value = "./shoal-worker-data")]
    pub data_dir: PathBuf,
    /// Port of Prometheus' `GET /metrics` (on --bind); 0 turns it off. If this default
    /// port is taken (a second worker on the host), the worker runs without it and warns.
    #[arg(long, env = "SHOAL_METRICS_PORT", default_value_t = WORKER_METRICS_PORT)]
    pub metrics_port: u16,
    /// On shutdown, how long running tasks may finish (e.g. 30s, 5m); tasks still running
    /// then are killed and run again on another worker.
    #[arg(
        long,
        env = "SHOAL_GRACE_PERIOD",
        default_value = "30s",
        value_parser = shoal_common::duration::parse
    )]
    #[serde(serialize_with = "serialize_duration")]
    pub grace_period: Duration,
    #[command(flatten)]
    #[serde(flatten)]
    pub exec: ExecArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub common: Common,
}

/// Prints the effective configuration when `--dump-config` was given; true if it did.
pub fn dump_config<T: Serialize>(args: &T, common: &Common) -> anyhow::Result<bool> {
    if common.dump_config {
        print!("{}", toml::to_string(args)?);
    }
    Ok(common.dump_config)
}

/// How often a master looks for what nobody told it about (shared by `master` and
/// `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct TimingArgs {
    /// Poll for new commands when no notification arrives (e.g. 1s, 500ms).
    #[arg(long, env = "SHOAL_COMMAND_POLL", default_value = "1s", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub command_poll: Duration,
    /// Check for dead masters and workers; a membership change acts at once.
    #[arg(long, env = "SHOAL_FAILOVER_POLL", default_value = "5s", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub failover_poll: Duration,
    /// Check every worker's attempts against the store.
    #[arg(long, env = "SHOAL_RECONCILE_INTERVAL", default_value = "30s", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub reconcile_interval: Duration,
    /// Delete instances that succeeded, failed or were stopped longer ago than this (e.g.
    /// 30d), with their task rows and kept logs, in small batches by the leader master; 0
    /// keeps them for ever. Paused instances stay.
    #[arg(long, env = "SHOAL_RETENTION", default_value = "0", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub retention: Duration,
}
