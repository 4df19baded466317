//! Container tasks: `<runtime> run --rm --name shoal-<task_instance_id> ... IMAGE ARGV`,
//! with podman or docker, started like a script task (own process group, output on one
//! pipe into the task log, `${setValue(..)}` lines read from it, the runtime's exit code,
//! which is the container's, as the task's).
//!
//! The argv is built here, one argument per field: no shell sees the definition's texts.
//! No value shows in a process list: the container's `env` goes in an `--env-file` only
//! the worker's user reads (in the client's environment, a name such as `LD_PRELOAD` or
//! `CONTAINERS_CONF` would configure the runtime itself), and the task's values
//! (`SHOAL_PARAM_*`, `SHOAL_SECRET_*`, which the master's guarded expansion of a `sh -c`
//! script refers to) as `--env NAME`, their values in the client's environment under
//! names the runtime does not read.
//!
//! The runtime runs as the worker's user, so what the expanded spec may ask of it is
//! checked first ([`check`]): a host path is mounted only from a `--container-volume-dir`.
//!
//! Killing the runtime's client does not stop the container (podman's conmon and docker's
//! daemon hold it), so a stopped task (kill, timeout) is also `rm --force`d by its name, as
//! is a container of the same name left by an earlier run of this attempt on this worker.

use super::launch::candidates;
use super::process::{self, Command, is_executable};
use super::table::RunningTask;
use super::task_log::TaskLog;
use super::{Executor, Outcome, script};
use shoal_common::definition::{ContainerSpec, PullPolicy, volume_parts};
use shoal_common::params::is_value_var;
use shoal_common::proto::TaskSpec;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::warn;

/// Runtimes tried, in order, when the worker names none.
const RUNTIMES: [&str; 2] = ["podman", "docker"];

/// Variables of the worker's environment that configure the runtime (not the container,
/// which gets only its `env`): where its configuration, daemon and credentials are.
const RUNTIME_ENV: [&str; 7] = [
    "CONTAINERS_CONF",
    "CONTAINER_HOST",
    "REGISTRY_AUTH_FILE",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
];

/// How long removing a stopped task's container may take.
const REMOVE_WAIT: Duration = Duration::from_secs(30);

/// How this worker runs container tasks (`--container-runtime`, `--container-volume-dir`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Containers {
    /// None: podman or docker, whichever is on `PATH`.
    pub(crate) runtime: Option<String>,
    /// The directories (canonical) whose contents a task may mount.
    pub(crate) volume_dirs: Vec<PathBuf>,
    /// Any host path may be mounted: a single-team worker given no volume dir, whose tasks
    /// run as the worker's user anyway.
    pub(crate) any_volume: bool,
}

impl Containers {
    /// Canonicalizes the volume dirs: each must exist.
    pub(crate) fn new(
        runtime: Option<String>,
        volume_dirs: &[PathBuf],
        single_team: bool,
    ) -> Result<Containers, String> {
        let volume_dirs = volume_dirs
            .iter()
            .map(|d| {
                std::fs::canonicalize(d)
                    .map_err(|e| format!("--container-volume-dir {}: {e}", d.display()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Containers {
            runtime,
            any_volume: single_team && volume_dirs.is_empty(),
            volume_dirs,
        })
    }

    /// Whether `host` may be mounted; else why not.
    async fn allows(&self, host: &str) -> Result<(), String> {
        if self.any_volume {
            return Ok(());
        }
        let path = Path::new(host);
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!("container volume host path '{host}' holds '..'"));
        }
        if self.volume_dirs.is_empty() {
            return Err(format!(
                "container volume '{host}': this worker mounts no host path (start it with \
                 --container-volume-dir DIR to let container tasks mount what is in DIR)"
            ));
        }
        // Symbolic links resolved: a link in an allowed dir may not lead out of it.
        let real = tokio::fs::canonicalize(path)
            .await
            .map_err(|e| format!("container volume host path '{host}': {e}"))?;
        if self.volume_dirs.iter().any(|d| real.starts_with(d)) {
            return Ok(());
        }
        let dirs: Vec<String> = self
            .volume_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        Err(format!(
            "container volume host path '{host}' is outside this worker's \
             --container-volume-dir ({})",
            dirs.join(", ")
        ))
    }
}

/// Refuses what a container task may not ask of the runtime once its values are in: an
/// image the runtime would read as an option, a volume that is malformed or mounts a host
/// path this worker does not allow, a relative workdir.
pub(super) async fn check(c: &ContainerSpec, containers: &Containers) -> Result<(), String> {
    // podman reads an image from a host path under these transports.
    const TRANSPORTS: [&str; 9] = [
        "containers-storage:",
        "dir:",
        "docker:",
        "docker-archive:",
        "docker-daemon:",
        "oci:",
        "oci-archive:",
        "ostree:",
        "sif:",
    ];
    let image = c.image.to_ascii_lowercase();
    if image.trim().is_empty()
        || image.starts_with('-')
        || TRANSPORTS.iter().any(|t| image.starts_with(t))
    {
        return Err(format!(
            "container image '{}' is not an image name (registry/name:tag)",
            c.image
        ));
    }
    for volume in &c.volumes {
        let (host, _) = volume_parts(volume).ok_or_else(|| {
            format!(
                "container volume '{volume}': use /host/path:/container/path or \
                 /host/path:/container/path:ro"
            )
        })?;
        containers.allows(host).await?;
    }
    match &c.workdir {
        Some(w) if !w.starts_with('/') => {
            Err(format!("container workdir '{w}' is not an absolute path"))
        }
        _ => Ok(()),
    }
}

/// The task's values the container gets besides its `env` (which wins on a clash): the
/// variables a guarded `sh -c` script refers to.
fn task_values<'a>(
    spec: &'a TaskSpec,
    c: &'a ContainerSpec,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    spec.params
        .iter()
        .filter(|(k, _)| is_value_var(k))
        .filter(|(k, _)| !c.env.contains_key(*k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

/// The container runtime to use: the configured one, else the first of [`RUNTIMES`] on
/// `PATH`.
pub(super) fn runtime(configured: Option<&str>) -> Result<PathBuf, String> {
    if let Some(name) = configured {
        return candidates(OsStr::new(name))
            .into_iter()
            .find(|p| is_executable(p))
            .ok_or_else(|| {
                format!("container runtime '{name}' (--container-runtime) is not on this worker")
            });
    }
    RUNTIMES
        .iter()
        .flat_map(|name| candidates(OsStr::new(name)))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            "no container runtime on this worker: neither podman nor docker is on its PATH \
             (install one, or name it with --container-runtime)"
                .to_string()
        })
}

/// The container's name: one per attempt (each attempt is its own task instance).
pub(super) fn container_name(spec: &TaskSpec) -> String {
    format!("shoal-{}", spec.task_instance_id)
}

/// The runtime's arguments for `run`: options from the spec's fields, then the image and
/// the command's argv.
pub(super) fn run_args(
    name: &str,
    spec: &TaskSpec,
    c: &ContainerSpec,
    env_file: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["run".into(), "--rm".into(), "--name".into(), name.into()];
    let pull = match c.pull {
        PullPolicy::Missing => "--pull=missing",
        PullPolicy::Never => "--pull=never",
    };
    args.push(pull.into());
    for (label, value) in [
        ("shoal.task_instance_id", spec.task_instance_id.to_string()),
        ("shoal.attempt", spec.attempt.to_string()),
        (
            "shoal.workflow_instance_id",
            spec.workflow_instance_id.to_string(),
        ),
    ] {
        args.push("--label".into());
        args.push(format!("{label}={value}").into());
    }
    for (key, _) in task_values(spec, c) {
        args.push("--env".into());
        args.push(key.into());
    }
    if !c.env.is_empty() {
        args.push("--env-file".into());
        args.push(env_file.into());
    }
    for volume in &c.volumes {
        args.push("--volume".into());
        args.push(volume.into());
    }
    if let Some(dir) = &c.workdir {
        args.push("--workdir".into());
        args.push(dir.into());
    }
    args.push(c.image.as_str().into());
    for arg in c.command.iter().flat_map(|c| c.argv()) {
        args.push(arg.into());
    }
    args
}

impl Executor {
    pub(super) async fn run_container(
        &self,
        spec: &TaskSpec,
        task: &RunningTask,
        c: &ContainerSpec,
        log: &TaskLog,
    ) -> Outcome {
        let fail = |message: String| {
            log.note(&message);
            warn!(task_instance_id = spec.task_instance_id, attempt = spec.attempt, error = %message, "container task could not start");
            Outcome::failure(message)
        };
        let runtime = match runtime(self.containers.runtime.as_deref()) {
            Ok(r) => r,
            Err(message) => return fail(message),
        };
        if let Err(message) = check(c, &self.containers).await {
            return fail(message);
        }
        let name = container_name(spec);
        // A container of this attempt left by a worker that died here before.
        remove(&runtime, &name, &self.task_env, true).await;
        if task.kill.requested() {
            return Outcome::killed();
        }
        let env_file = self
            .dirs
            .running
            .join(format!("container-{}.env", spec.task_instance_id));
        if let Err(message) = write_env_file(&env_file, c) {
            return fail(message);
        }
        let args = run_args(&name, spec, c, &env_file);
        // Variables that are not UTF-8 cannot be a definition's; the runtime's own are
        // skipped then too.
        let runtime_env: Vec<(&str, String)> = RUNTIME_ENV
            .iter()
            .filter_map(|k| Some((*k, std::env::var(k).ok()?)))
            .collect();
        let env: Vec<(&str, &str)> = runtime_env
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .chain(task_values(spec, c))
            .collect();
        let command = Command {
            program: runtime.as_os_str(),
            args: args.iter().map(OsString::as_os_str).collect(),
            base: &self.task_env,
            env: &env,
        };
        let what = runtime.display().to_string();
        // No other task parameters in the client's environment: they would stand in for
        // `env` entries of the same name (`--env NAME` reads the client's).
        let no_params = std::collections::HashMap::new();
        let process = process::start(&command, Path::new("/"), &no_params, None);
        let process = match process {
            Ok(p) => p,
            Err(message) => {
                remove_env_file(&env_file);
                return fail(message);
            }
        };
        let record = self
            .records
            .record(spec.task_instance_id, spec.attempt, process.pgid);
        task.kill.attach(process.pgid);
        self.started(spec, task, Some(process.pgid));
        let exit = process.wait(log, log.mask().stream(), &task.kill).await;
        remove_env_file(&env_file);
        if let Some(record) = record {
            self.records.forget(record);
        }
        if task.kill.requested() {
            // The client is gone; the container may still run.
            remove(&runtime, &name, &self.task_env, false).await;
            return Outcome::killed();
        }
        // podman and docker: 125 the runtime failed, 126 the command cannot be invoked,
        // 127 it was not found; else the container's own code.
        script::ended(exit, log, false, &what, |code| match code {
            125 => format!("{what} could not run the container (exit code 125)"),
            code => format!("container exited with code {code}"),
        })
    }
}

/// Writes the container's `env` as `--env-file` lines, readable by the worker's user
/// only (a leftover is removed with the other files of `running` when the worker starts).
fn write_env_file(path: &Path, c: &ContainerSpec) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if c.env.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for (name, value) in &c.env {
        if value.contains(['\n', '\r', '\0']) {
            return Err(format!(
                "container env {name}: its value holds a line break, which the runtime's \
                 --env-file cannot carry: pass it in a mounted file instead"
            ));
        }
        text.push_str(&format!("{name}={value}\n"));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| {
            format!(
                "cannot write the container's env file {}: {e}",
                path.display()
            )
        })
}

fn remove_env_file(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        warn!(file = %path.display(), error = %e, "cannot remove a container's env file");
    }
}

/// `<runtime> kill NAME` (SIGKILL: `rm --force` alone would wait for a container that
/// ignores SIGTERM, as a shell as PID 1 does), then `<runtime> rm --force NAME`. Quiet about
/// a missing container when `quiet`.
async fn remove(runtime: &Path, name: &str, env: &super::TaskEnvironment, quiet: bool) {
    run_runtime(runtime, &["kill", name], env, true).await;
    run_runtime(runtime, &["rm", "--force", name], env, quiet).await;
}

async fn run_runtime(runtime: &Path, args: &[&str], env: &super::TaskEnvironment, quiet: bool) {
    let name = args.last().copied().unwrap_or_default();
    let mut command = tokio::process::Command::new(runtime);
    command
        .args(args)
        .env_clear()
        .envs(env.pairs())
        .envs(
            RUNTIME_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k, v))),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(REMOVE_WAIT, command.output()).await {
        Ok(Ok(out)) if out.status.success() => {}
        Ok(Ok(out)) => {
            if !quiet {
                let stderr = String::from_utf8_lossy(&out.stderr);
                warn!(container = name, error = %stderr.trim(), "cannot remove container");
            }
        }
        Ok(Err(e)) => {
            warn!(container = name, error = %e, "cannot run the container runtime to remove a container")
        }
        Err(_) => warn!(container = name, "removing a container took too long"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::definition::ContainerCommand;

    #[test]
    fn the_argv_holds_each_field_as_one_argument_and_no_env_value() {
        let spec = TaskSpec {
            task_instance_id: 42,
            attempt: 2,
            workflow_instance_id: 7,
            ..Default::default()
        };
        let c = ContainerSpec {
            image: "localhost/img:1".into(),
            command: Some(ContainerCommand::Shell("echo $A; rm -rf x".into())),
            env: [("A".to_string(), "secret value".to_string())].into(),
            volumes: vec!["/data:/in:ro".into()],
            workdir: Some("/in".into()),
            pull: PullPolicy::Never,
        };
        let env_file = Path::new("/data/running/container-42.env");
        let args: Vec<String> = run_args(&container_name(&spec), &spec, &c, env_file)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--rm",
                "--name",
                "shoal-42",
                "--pull=never",
                "--label",
                "shoal.task_instance_id=42",
                "--label",
                "shoal.attempt=2",
                "--label",
                "shoal.workflow_instance_id=7",
                "--env-file",
                "/data/running/container-42.env",
                "--volume",
                "/data:/in:ro",
                "--workdir",
                "/in",
                "localhost/img:1",
                "sh",
                "-c",
                "echo $A; rm -rf x",
            ]
        );
    }

    #[test]
    fn a_missing_runtime_is_named() {
        let e = runtime(Some("/nonexistent/podman")).unwrap_err();
        assert!(e.contains("'/nonexistent/podman'"), "{e}");
    }
}
