//! Option groups several roles share (task execution, TLS, HTTPS, request limits,
//! proxies), their value parsers, and how `--dump-config` masks secrets in them.

use clap::Args;
use serde::Serialize;
use shoal_api_server::{Https, Limits};
use shoal_common::definition::{normalize, valid_name};
use shoal_common::redact::without_password;
use shoal_common::trigger::cidr::Cidr;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How a worker runs tasks (shared by `worker` and `standalone`).
#[derive(Args, Serialize, Debug)]
pub struct ExecArgs {
    /// Interpreter for python tasks.
    #[arg(long, env = "SHOAL_PYTHON", default_value = "python3")]
    pub python: String,
    /// The spark-submit spark tasks run; default: $SPARK_HOME/bin/spark-submit when
    /// SPARK_HOME is set, else spark-submit on the PATH.
    #[arg(long, env = "SHOAL_SPARK_SUBMIT", value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spark_submit: Option<PathBuf>,
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
    /// A datasource sql tasks can name: NAME@PROJECTS=URL (postgres://…, mysql://… or
    /// sqlite://…), PROJECTS the projects that may use it, comma separated, or * for every
    /// project; NAME=URL serves every project on a --single-team worker (or a standalone
    /// without auth) and is refused on another. Repeat the flag for more (URLs may contain
    /// commas, so there is no list syntax).
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
    /// What runs container tasks: podman or docker (a name in PATH or a path); by default
    /// the first of podman, docker found on PATH.
    #[arg(long, env = "SHOAL_CONTAINER_RUNTIME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_runtime: Option<String>,
    /// A host directory whose contents container tasks may mount as volumes (repeat it, or
    /// give a comma-separated list). Without one, a container task mounts no host path,
    /// unless shoal runs with --single-team (or is a standalone without auth), where its
    /// tasks run as the worker's user anyway and may mount any.
    #[arg(
        long = "container-volume-dir",
        env = "SHOAL_CONTAINER_VOLUME_DIRS",
        value_delimiter = ','
    )]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub container_volume_dirs: Vec<PathBuf>,
}

/// `--min-free-disk`: a size, or 0 for no check.
pub(super) fn parse_free_disk(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_size(s).map(|n| n as u64)
}

/// Durations are written as the flags take them (`30s`), not as serde's `{secs, nanos}`.
pub(super) fn serialize_duration<S: serde::Serializer>(
    d: &Duration,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&shoal_common::duration::format(*d))
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
    pub(super) fn load(&self) -> anyhow::Result<Option<Https>> {
        match (&self.https_cert, &self.https_key) {
            (Some(cert), Some(key)) => {
                Ok(Some(Https::load(cert, key).map_err(anyhow::Error::msg)?))
            }
            _ => Ok(None),
        }
    }
}

/// A token as given, unless it is the mask `--dump-config` printed for it, which would
/// otherwise become a global admin's token anyone can guess.
pub(super) fn not_masked(s: &str) -> Result<String, String> {
    match shoal_common::redact::is_masked(s) {
        true => Err(
            "*** is what --dump-config prints in place of the token; give the token itself".into(),
        ),
        false => Ok(s.to_string()),
    }
}

/// A secret in `--dump-config`'s output: that it is set, not its value.
pub(super) fn masked<S: serde::Serializer>(_: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(shoal_common::redact::MASK)
}

/// `--datasource` values as the flag takes them (`NAME@PROJECTS=URL`), a password in the
/// URL masked.
pub(super) fn masked_datasources<S: serde::Serializer>(
    list: &[Datasource],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|d| {
        let url = without_password(&d.url);
        match &d.projects {
            Some(projects) => format!("{}@{}={url}", d.name, projects.join(",")),
            None => format!("{}={url}", d.name),
        }
    }))
}

/// A URL with the password in it, if any, masked (`postgres://u:***@h/db`).
pub(super) fn masked_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
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

pub(super) fn parse_datasource(s: &str) -> Result<Datasource, String> {
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
            let projects: Vec<String> = projects.split(',').map(normalize).collect();
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
pub(super) type WorkerDatasources = (BTreeMap<String, String>, BTreeMap<String, Vec<String>>);

pub(super) fn worker_datasources(list: &[Datasource]) -> WorkerDatasources {
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
    /// How long an event (`shoal event send`) that completed no waiting task is kept for
    /// a wait that begins later (e.g. 1h, 2d); 0 keeps none.
    #[arg(long, env = "SHOAL_EVENT_RETENTION", default_value = "1h", value_parser = shoal_common::duration::parse)]
    #[serde(serialize_with = "serialize_duration")]
    pub event_retention: Duration,
}

impl LimitArgs {
    pub(super) fn limits(&self) -> Limits {
        Limits {
            body_bytes: self.max_body_bytes,
            tasks: self.max_tasks,
            event_retention: self.event_retention,
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
pub(super) fn parse_size(s: &str) -> Result<usize, String> {
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

/// A master's overload protection (shared by `master` and `standalone`): above the load or
/// below the memory reserve it claims no new commands; the runs it drives go on.
#[derive(Args, Serialize, Debug)]
pub struct OverloadArgs {
    /// Claim no new commands while the host's 1-minute load average (as `uptime` shows it)
    /// is above this, e.g. 8 on a 4-core host [default: off].
    #[arg(long, env = "SHOAL_MAX_CPU_LOAD", value_parser = positive_load)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_load: Option<f64>,
    /// Claim no new commands while the host's available memory is below this, e.g. 512MiB
    /// or 2GB [default: off].
    #[arg(long, env = "SHOAL_MIN_FREE_MEMORY", value_parser = size)]
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "display_size"
    )]
    pub min_free_memory: Option<bytesize::ByteSize>,
}

impl OverloadArgs {
    pub(super) fn limits(&self) -> shoal_master::overload::Limits {
        shoal_master::overload::Limits {
            max_cpu_load: self.max_cpu_load,
            min_free_memory: self.min_free_memory.map(|b| b.as_u64()),
        }
    }
}

fn positive_load(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(load) if load.is_finite() && load >= 0.0 => Ok(load),
        _ => Err(format!(
            "{s:?} is not a load average (a number such as 4 or 7.5)"
        )),
    }
}

fn size(s: &str) -> Result<bytesize::ByteSize, String> {
    s.parse()
        .map_err(|e| format!("{s:?} is not a size such as 512MiB or 2GB: {e}"))
}

fn display_size<S: serde::Serializer>(
    b: &Option<bytesize::ByteSize>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => s.collect_str(b),
        None => s.serialize_none(),
    }
}
