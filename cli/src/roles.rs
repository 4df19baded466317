//! The server roles of the `shoal` binary: standalone, api-server, master and worker.

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use shoal_api_server::{ApiState, Auth, Https, Limits};
use shoal_common::access::{new_token, token_hash};
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::cluster_tls::ClusterTls;
use shoal_common::definition::valid_name;
use shoal_common::redact::without_password;
use shoal_common::registry::Registry;
use shoal_common::secret_key::SecretKey;
use shoal_common::trigger::cidr::Cidr;
use shoal_master::MasterConfig;
use shoal_store::{BOOTSTRAP_ADMIN, Store};
use shoal_worker::WorkerConfig;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Default `--metrics-port` of `shoal master`.
const MASTER_METRICS_PORT: u16 = 9700;
/// Default `--metrics-port` of `shoal worker`.
const WORKER_METRICS_PORT: u16 = 9701;

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

/// How a worker runs tasks (shared by `worker` and `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct ExecArgs {
    /// Interpreter for python tasks.
    #[arg(long, env = "SHOAL_PYTHON", default_value = "python3")]
    pub python: String,
    /// A variable of this process's environment that shell and python tasks get too (e.g.
    /// JAVA_HOME); repeat the flag or separate with commas. Tasks get PATH, HOME, USER,
    /// LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TZ, TMPDIR and TERM, their own parameters, and
    /// nothing else (never SHOAL_*).
    #[arg(
        long = "task-env",
        value_name = "NAME",
        env = "SHOAL_TASK_ENV",
        value_delimiter = ','
    )]
    #[serde(rename = "task_env", skip_serializing_if = "Vec::is_empty")]
    pub task_env: Vec<String>,
    /// A datasource sql tasks can name: NAME@PROJECTS=URL (postgres://… or sqlite://…),
    /// PROJECTS the projects that may use it, comma separated, or * for every project;
    /// NAME=URL serves every project on a --single-team worker (or a standalone without
    /// auth) and is refused on another. Repeat the flag for more (URLs may contain commas,
    /// so there is no list syntax).
    #[arg(long = "datasource", value_parser = parse_datasource)]
    #[serde(
        rename = "datasource",
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "masked_datasources"
    )]
    pub datasources: Vec<Datasource>,
    /// The OS user shell and python tasks of workflows without a `tenant` run as (an
    /// unprivileged user, e.g. nobody; the worker runs as root to switch to it).
    #[arg(long, env = "SHOAL_DEFAULT_TENANT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_tenant: Option<String>,
    /// Every user of this shoal may act as its admin: tasks of workflows without a tenant
    /// run as this process's own OS user (which can read its data dir and keys), and a
    /// --datasource without projects serves every project. Without it (and on a standalone
    /// with auth) such tasks fail, naming this flag and --default-tenant.
    #[arg(long, env = "SHOAL_SINGLE_TEAM")]
    pub single_team: bool,
    /// Let workflows name root as their tenant (by default their shell and python tasks
    /// fail instead of running as root).
    #[arg(long, env = "SHOAL_ALLOW_ROOT_TENANT")]
    pub allow_root_tenant: bool,
    /// Take no new task while the data dir's disk has less free space than this (e.g.
    /// 100MiB, 2GiB; 0 turns the check off): masters send the tasks to other workers of
    /// their group, and a task is not started where its log and script would not fit.
    #[arg(long, env = "SHOAL_MIN_FREE_DISK", default_value = "100MiB", value_parser = parse_free_disk)]
    pub min_free_disk: u64,
    /// Delete the task logs of an instance on this worker once nothing was written to them
    /// for this long (e.g. 30d); 0 keeps them for ever. The master keeps each log's end
    /// apart from this (see --retention).
    #[arg(long, env = "SHOAL_LOG_RETENTION", default_value = "0", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub log_retention: Duration,
}

/// `--min-free-disk`: a size, or 0 for no check.
fn parse_free_disk(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_size(s).map(|n| n as u64)
}

/// How the API of `role` authenticates. Without auth, only a loopback --bind is accepted,
/// unless --insecure.
fn api_auth(role: &str, bind: IpAddr, on: bool, insecure: bool) -> anyhow::Result<()> {
    guard_public_bind(
        role,
        bind,
        on,
        insecure,
        Need {
            what: "auth",
            risk: "start workflows (which run commands)",
            fix: "pass --auth (or set SHOAL_TOKEN)",
        },
    )
}

/// Auth on, with `token` (SHOAL_TOKEN) as a global admin's if given. Without one, the first
/// start on a store without users creates the global admin and prints its token, once.
async fn token_auth(store: &Store, token: Option<String>) -> anyhow::Result<Auth> {
    let token = token.filter(|t| !t.is_empty());
    if token.is_none() {
        let bootstrap = new_token().context("cannot read /dev/urandom")?;
        if store.bootstrap_admin(&token_hash(&bootstrap)).await? {
            info!(
                user = BOOTSTRAP_ADMIN,
                "created the first user, a global admin"
            );
            println!(
                "\nCreated the global admin '{BOOTSTRAP_ADMIN}'. Its API token, shown this once:\n\n    \
                 {bootstrap}\n\nSign in to the web UI with it, or `export SHOAL_TOKEN=...` for the CLI; \
                 `shoal user create` adds users, `shoal token create` more tokens.\n"
            );
        }
    }
    Ok(Auth::tokens(token))
}

/// What a listener on a public address needs, for the refusal and the warning.
struct Need {
    what: &'static str,
    risk: &'static str,
    fix: &'static str,
}

/// A `role` listening on a non-loopback `bind` without what it `needs` refuses to start,
/// unless `insecure`: then it warns, at every start.
fn guard_public_bind(
    role: &str,
    bind: IpAddr,
    protected: bool,
    insecure: bool,
    need: Need,
) -> anyhow::Result<()> {
    let Need { what, risk, fix } = need;
    if protected || bind.is_loopback() {
        return Ok(());
    }
    if !insecure {
        anyhow::bail!(
            "the {role} listens on {bind} without {what}, so anyone who reaches its port could \
             {risk}: {fix}, bind to 127.0.0.1, or pass --insecure on a trusted network"
        );
    }
    warn!(%bind, "{role} runs WITHOUT {what} (--insecure): anyone who reaches its port can {risk}; {fix}");
    Ok(())
}

/// Mutual TLS between the nodes (shared by `api-server`, `master` and `worker`).
#[derive(Args, Serialize, Debug)]
pub struct TlsArgs {
    /// This node's certificate (PEM), signed by the cluster's CA; with --tls-key and
    /// --tls-ca, every gRPC connection between nodes is mutual TLS.
    #[arg(long, env = "SHOAL_TLS_CERT", requires_all = ["tls_key", "tls_ca"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// This node's private key (PEM).
    #[arg(long, env = "SHOAL_TLS_KEY", requires_all = ["tls_cert", "tls_ca"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): only peers with a certificate it signed are
    /// accepted.
    #[arg(long, env = "SHOAL_TLS_CA", requires_all = ["tls_cert", "tls_key"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
}

/// HTTPS for the API and the web UI (shared by `api-server` and `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct HttpsArgs {
    /// Serve the API and the web UI over HTTPS with this certificate (PEM; intermediate
    /// certificates after it), with --https-key. Without it they are plain HTTP: put a TLS
    /// proxy in front when they are reached over a network (tokens travel in requests).
    #[arg(long, env = "SHOAL_HTTPS_CERT", requires = "https_key")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_cert: Option<PathBuf>,
    /// The private key (PEM) of --https-cert.
    #[arg(long, env = "SHOAL_HTTPS_KEY", requires = "https_cert")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_key: Option<PathBuf>,
}

impl HttpsArgs {
    /// The certificate and key given, loaded; none when not given.
    fn load(&self) -> anyhow::Result<Option<Https>> {
        match (&self.https_cert, &self.https_key) {
            (Some(cert), Some(key)) => {
                Ok(Some(Https::load(cert, key).map_err(anyhow::Error::msg)?))
            }
            _ => Ok(None),
        }
    }
}

/// The `--cluster-secret` given, checked (none when not given), with mutual TLS when
/// `tls` names the files.
fn given_secret(secret: Option<&str>, tls: &TlsArgs) -> anyhow::Result<ClusterSecret> {
    let secret = secret.map(ClusterSecret::new).transpose();
    let secret = secret
        .map_err(|e| anyhow::anyhow!("--cluster-secret: {e}"))?
        .unwrap_or_default();
    match (&tls.tls_cert, &tls.tls_key, &tls.tls_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            let tls = ClusterTls::load(cert, key, ca).map_err(anyhow::Error::msg)?;
            Ok(secret.with_tls(tls))
        }
        _ => Ok(secret),
    }
}

/// A token as given, unless it is the mask `--dump-config` printed for it, which would
/// otherwise become a global admin's token anyone can guess.
fn not_masked(s: &str) -> Result<String, String> {
    match shoal_common::redact::is_masked(s) {
        true => Err(
            "*** is what --dump-config prints in place of the token; give the token itself".into(),
        ),
        false => Ok(s.to_string()),
    }
}

/// A secret in `--dump-config`'s output: that it is set, not its value.
fn masked<S: serde::Serializer>(_: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(shoal_common::redact::MASK)
}

/// `--datasource` values as the flag takes them (`NAME@PROJECTS=URL`), a password in the
/// URL masked.
fn masked_datasources<S: serde::Serializer>(list: &[Datasource], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|d| {
        let url = without_password(&d.url);
        match &d.projects {
            Some(projects) => format!("{}@{}={url}", d.name, projects.join(",")),
            None => format!("{}={url}", d.name),
        }
    }))
}

/// A URL with the password in it, if any, masked (`postgres://u:***@h/db`).
fn masked_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&without_password(url))
}

/// A `--datasource`: its name, the projects it serves (`*`: every one; none said: every
/// one on a single-team worker), its URL.
#[derive(Debug, Clone)]
pub struct Datasource {
    name: String,
    projects: Option<Vec<String>>,
    url: String,
}

fn parse_datasource(s: &str) -> Result<Datasource, String> {
    // Naming what comes before the URL only: the URL may hold a password.
    let wrong = || {
        let head = s.split_once('=').map_or("", |(head, _)| head);
        format!(
            "datasource '{head}=...' must look like NAME@PROJECT,...=URL (or NAME@*=URL for \
             every project), e.g. warehouse@sales=postgres://user@host/db"
        )
    };
    let Some((head, url)) = s.split_once('=').filter(|(_, url)| !url.is_empty()) else {
        return Err(wrong());
    };
    let (name, projects) = match head.split_once('@') {
        Some((name, projects)) => {
            let projects: Vec<String> = projects.split(',').map(str::to_string).collect();
            let valid = |p: &String| p == shoal_worker::EVERY_PROJECT || valid_name(p);
            if !projects.iter().all(valid) {
                return Err(wrong());
            }
            (name, Some(projects))
        }
        None => (head, None),
    };
    if name.is_empty() {
        return Err(wrong());
    }
    Ok(Datasource {
        name: name.to_string(),
        projects,
        url: url.to_string(),
    })
}

/// A worker's datasources as it takes them: URLs and grants by name.
type WorkerDatasources = (BTreeMap<String, String>, BTreeMap<String, Vec<String>>);

fn worker_datasources(list: &[Datasource]) -> WorkerDatasources {
    let urls = list.iter().map(|d| (d.name.clone(), d.url.clone()));
    let grants = (list.iter()).filter_map(|d| Some((d.name.clone(), d.projects.clone()?)));
    (urls.collect(), grants.collect())
}

/// What one API request may ask (shared by `api-server` and `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct LimitArgs {
    /// Largest request body, in bytes (`8MiB`, `512KiB` also work); larger ones get 413.
    #[arg(long, env = "SHOAL_MAX_BODY_BYTES", default_value = "8MiB", value_parser = parse_size)]
    pub max_body_bytes: usize,
    /// Most tasks one workflow definition may have (the largest DAG shoal is built for).
    #[arg(long, env = "SHOAL_MAX_TASKS", default_value_t = 100_000)]
    pub max_tasks: usize,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            body_bytes: self.max_body_bytes,
            tasks: self.max_tasks,
        }
    }
}

/// Who a caller is behind a proxy (shared by `api-server` and `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct ProxyArgs {
    /// A reverse proxy (address or CIDR) whose X-Forwarded-For header names the caller: of
    /// a webhook trigger, for its allow_ips, and of every change in the audit log; repeat
    /// the flag or separate with commas. Without it, the caller is the TCP peer and
    /// X-Forwarded-For is ignored.
    #[arg(long = "trusted-proxy", value_name = "CIDR", env = "SHOAL_TRUSTED_PROXY", value_delimiter = ',', value_parser = str::parse::<Cidr>)]
    #[serde(rename = "trusted_proxy", skip_serializing_if = "Vec::is_empty")]
    pub trusted_proxies: Vec<Cidr>,
}

/// `123`, `64KiB`, `8MiB` or `1GiB` as bytes.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}': use B, KiB, MiB or GiB"
            ));
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("'{s}' is not a size: use e.g. 8MiB or 1048576"))
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
    pub exec: ExecArgs,
    #[command(flatten)]
    #[serde(skip)]
    pub common: Common,
}

#[derive(Args, Serialize, Debug)]
pub struct ApiServerArgs {
    /// Postgres URL, e.g. postgres://postgres@127.0.0.1:5432/shoal
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

impl ClusterArgs {
    /// The secret this node requires and carries. Without one, only a loopback --bind is
    /// accepted, unless --insecure.
    fn secret(&self, role: &str) -> anyhow::Result<ClusterSecret> {
        let secret = given_secret(self.cluster_secret.as_deref(), &self.tls)?;
        guard_public_bind(
            role,
            self.bind,
            secret.is_set(),
            self.insecure,
            Need {
                what: "a cluster secret",
                risk: "call it",
                fix: "set SHOAL_CLUSTER_SECRET (the same on every node, e.g. `openssl rand -hex 32`) or SHOAL_TLS_CERT, SHOAL_TLS_KEY and SHOAL_TLS_CA",
            },
        )?;
        Ok(secret)
    }
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

    /// Port of Prometheus' `GET /metrics` (on --bind); 0 turns it off. If this default
    /// port is taken (a second master on the host), the master runs without it and warns.
    #[arg(long, env = "SHOAL_METRICS_PORT", default_value_t = MASTER_METRICS_PORT)]
    pub metrics_port: u16,
    #[command(flatten)]
    #[serde(flatten)]
    pub timing: TimingArgs,
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

/// Durations are written as the flags take them (`30s`), not as serde's `{secs, nanos}`.
fn serialize_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&shoal_common::duration::format(*d))
}

/// Prints the effective configuration when `--dump-config` was given; true if it did.
pub fn dump_config<T: Serialize>(args: &T, common: &Common) -> anyhow::Result<bool> {
    if common.dump_config {
        print!("{}", toml::to_string(args)?);
    }
    Ok(common.dump_config)
}

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

/// Binds the `/metrics` listener of a master or worker. None when `port` is 0, or when it
/// is the role's `default` port and that is taken: several masters or workers on one host
/// all start with the default, and a missing scrape target should not stop scheduling. A
/// port chosen on purpose must be free.
async fn metrics_listener(
    bind: IpAddr,
    port: u16,
    default: u16,
) -> anyhow::Result<Option<TcpListener>> {
    if port == 0 {
        return Ok(None);
    }
    let addr = SocketAddr::new(bind, port);
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if port == default && e.kind() == std::io::ErrorKind::AddrInUse => {
            warn!(
                %addr,
                "default metrics port in use (another shoal on this host?), metrics not served; set --metrics-port"
            );
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| {
            format!("cannot listen for metrics on {addr}: pick another --metrics-port, or 0 to turn metrics off")
        }),
    }
}

/// Serves `/metrics` on `listener` (if any) until `shutdown` is cancelled.
fn spawn_metrics(
    listener: Option<TcpListener>,
    shutdown: CancellationToken,
) -> JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        if let Some(listener) = listener {
            shoal_api_server::serve_metrics(listener, shutdown).await?;
        }
        Ok(())
    })
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
) -> MasterConfig {
    MasterConfig {
        api_url,
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

/// The `--secret-key` given, checked; none when not given.
fn given_secret_key(key: Option<&str>) -> anyhow::Result<Option<SecretKey>> {
    key.filter(|k| !k.is_empty())
        .map(SecretKey::from_hex)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--secret-key: {e}"))
}

/// Standalone's key: the one given, else `<data-dir>/secret.key`, made on the first start
/// (readable by its owner only). Lose it and the stored secrets cannot be read.
fn standalone_secret_key(
    given: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<SecretKey> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(key) = given_secret_key(given)? {
        return Ok(key);
    }
    let path = data_dir.join("secret.key");
    if !path.exists() {
        let key = SecretKey::generate().map_err(anyhow::Error::msg)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        std::io::Write::write_all(&mut file, key.as_bytes())?;
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the secret key {}", path.display()))?;
    SecretKey::from_hex(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
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
        },
        registry.clone(),
        shutdown.clone(),
    )
    .await?;
    let master = shoal_master::start(
        master_config(
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
        ),
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
        master_config(
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
        ),
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

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_a_binary_unit() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size(" 512KiB "), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("8MB").unwrap_err().contains("unknown unit 'MB'"));
        assert!(parse_size("0").unwrap_err().contains("not a size"));
        assert!(parse_size("MiB").unwrap_err().contains("not a size"));
    }
}
