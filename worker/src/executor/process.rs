//! Script tasks (shell, python): the script is written into the task's work directory and
//! run as `<interpreter> <script>` in its own process group. stdout and stderr share one
//! pipe, so the log keeps the order in which the task wrote (two streams reaching the log
//! by different paths interleave mid-line); the worker copies the pipe to the task log and
//! scans it for `${setValue(k=v)}` lines, on either stream as in DolphinScheduler, which
//! merges them too. Task parameters whose names are shell identifiers are exported as
//! environment variables.

use super::kill::{KillSwitch, kill_group};
use super::launch::{Launch, TaskChild, TaskEnvironment, candidates};
use super::set_value::OutputScanner;
use super::task_log::TaskLog;
use super::tenant::Tenant;
use shoal_common::mask::MaskStream;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tracing::warn;

/// File names of the scripts in a task's work directory.
pub(crate) const SHELL_SCRIPT: &str = "task.sh";
pub(crate) const PYTHON_SCRIPT: &str = "task.py";

/// What runs a script task.
pub(crate) struct Program<'a> {
    /// The interpreter: a path, or a name looked up in the worker's `PATH`.
    pub(crate) interpreter: &'a OsStr,
    /// File name of the script inside the work directory, e.g. `task.sh`.
    pub(crate) script_name: &'static str,
    /// What the task gets of the worker's environment.
    pub(crate) base: &'a TaskEnvironment,
    /// Environment set before the task's parameters (which may override it).
    pub(crate) env: &'a [(&'a str, &'a str)],
}

impl<'a> Program<'a> {
    /// `bash task.sh`.
    pub(crate) fn shell(base: &'a TaskEnvironment) -> Self {
        Program {
            interpreter: bash().as_os_str(),
            script_name: SHELL_SCRIPT,
            base,
            env: &[],
        }
    }

    /// `<python> task.py`, unbuffered so that prints reach the log as they happen (and are
    /// not lost when the task is killed) in order with what goes to stderr.
    pub(crate) fn python(interpreter: &'a str, base: &'a TaskEnvironment) -> Self {
        Program {
            interpreter: OsStr::new(interpreter),
            script_name: PYTHON_SCRIPT,
            base,
            env: &[("PYTHONUNBUFFERED", "1")],
        }
    }
}
/// After the task exited and its group was killed, how long to keep reading output held
/// open by a process that left the group (setsid) before giving up on it.
const STDOUT_DRAIN_WAIT: Duration = Duration::from_secs(2);

/// A started script task.
pub(crate) struct TaskProcess {
    child: TaskChild,
    /// Read end of the pipe that is the task's stdout and stderr.
    output: pipe::Receiver,
    /// Process id of the interpreter, which is also the id of the task's process group.
    pub(crate) pgid: i32,
}

/// How a script task ended.
pub(crate) struct TaskExit {
    pub(crate) status: std::io::Result<ExitStatus>,
    pub(crate) output: HashMap<String, String>,
    /// Some setValue parameters were dropped because the output grew too large.
    pub(crate) output_truncated: bool,
}

/// The bash executable, looked up in `PATH` once: a name is looked up on each start.
fn bash() -> &'static Path {
    static BASH: OnceLock<PathBuf> = OnceLock::new();
    BASH.get_or_init(|| {
        candidates(OsStr::new("bash"))
            .into_iter()
            .find(|candidate| is_executable(candidate))
            .unwrap_or_else(|| "/bin/bash".into())
    })
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True for names a shell accepts as variable names (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_shell_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Writes `script` into `work_dir` and starts `program` on it ([`super::launch`]). An
/// `environment` (shell lines; empty: none) runs first in the same bash, so what it exports
/// or activates holds for the script: a shell script begins with it; a python script runs
/// as `bash task.sh`, which runs it and then `exec`s the interpreter on `task.py` (a
/// virtualenv's `activate` picks the interpreter a name resolves to).
///
/// The file system calls here are small and local (one short write); they run
/// inline rather than on the blocking pool because a hop there costs more than they do and
/// dispatch latency matters.
pub(crate) fn spawn(
    program: &Program<'_>,
    work_dir: &Path,
    script: &str,
    environment: &str,
    params: &HashMap<String, String>,
    tenant: Option<&Tenant>,
) -> Result<TaskProcess, String> {
    let write = |name: &str, parts: &[&str]| {
        let path = work_dir.join(name);
        let mut text = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
        for part in parts {
            text.push_str(part);
            text.push('\n');
        }
        write_script(&path, text.as_bytes(), tenant)
            .map_err(|e| format!("cannot write script {}: {e}", path.display()))
    };
    let python_in_environment = !environment.is_empty() && program.script_name != SHELL_SCRIPT;
    let command = if python_in_environment {
        write(program.script_name, &[script])?;
        let exec = format!(
            "exec {} {}",
            shell_quoted(&program.interpreter.to_string_lossy()),
            program.script_name
        );
        write(SHELL_SCRIPT, &[environment, &exec])?;
        Command {
            program: bash().as_os_str(),
            args: vec![OsStr::new(SHELL_SCRIPT)],
            base: program.base,
            env: program.env,
        }
    } else {
        match environment.is_empty() {
            true => write(program.script_name, &[script])?,
            false => write(program.script_name, &[environment, script])?,
        }
        Command {
            program: program.interpreter,
            args: vec![OsStr::new(program.script_name)],
            base: program.base,
            env: program.env,
        }
    };
    start(&command, work_dir, params, tenant)
}

/// `text` as one bash word: single-quoted, its own single quotes spelled `'\''`.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A program and its arguments, each passed as it is (no shell reads them).
pub(crate) struct Command<'a> {
    /// A path, or a name looked up in the worker's `PATH`.
    pub(crate) program: &'a OsStr,
    pub(crate) args: Vec<&'a OsStr>,
    /// What the task gets of the worker's environment.
    pub(crate) base: &'a TaskEnvironment,
    /// Environment set before the task's parameters (which may override it).
    pub(crate) env: &'a [(&'a str, &'a str)],
}

/// Starts `command` in `work_dir` (handed to the tenant), in a process group of its own,
/// its stdout and stderr one pipe, the task's parameters in its environment.
pub(crate) fn start(
    command: &Command<'_>,
    work_dir: &Path,
    params: &HashMap<String, String>,
    tenant: Option<&Tenant>,
) -> Result<TaskProcess, String> {
    if let Some(t) = tenant {
        std::os::unix::fs::chown(work_dir, Some(t.uid), Some(t.gid)).map_err(|e| {
            let dir = work_dir.display();
            format!("cannot hand {dir} to tenant '{}': {e}", t.name)
        })?;
    }
    // Both ends are close-on-exec: only the task's own stdout/stderr (dup2'ed) stay open in
    // it, and no other task spawned concurrently inherits them.
    let (reader, writer) =
        std::io::pipe().map_err(|e| format!("cannot create the output pipe: {e}"))?;
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| format!("cannot read the output pipe: {e}"))?;

    let name = command.program.to_string_lossy();
    let mut launch = Launch::new(command.program, work_dir, command.base);
    for arg in &command.args {
        launch.arg(arg);
    }
    for (key, value) in command.env {
        launch.env(OsStr::new(key), OsStr::new(value));
    }
    if let Some(t) = tenant {
        launch.ids(t.uid, t.gid);
        for (key, value) in [("USER", &t.name), ("LOGNAME", &t.name), ("HOME", &t.home)] {
            launch.env(OsStr::new(key), OsStr::new(value));
        }
    }
    // The task's own variables, over everything else.
    for (key, value) in params.iter().filter(|(k, _)| is_shell_identifier(k)) {
        launch.env(OsStr::new(key), OsStr::new(value));
    }
    let child = launch
        .start(&OwnedFd::from(writer))
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let pgid = child.id();
    Ok(TaskProcess {
        child,
        output,
        pgid,
    })
}

/// Writes the script over what the file (the script of an earlier task, see
/// [`super::scratch`]) holds, and cuts what is left beyond: truncating a file to nothing
/// makes ext4 write its new data out when it is closed (`auto_da_alloc`), a wait per task.
/// Never through a symlink; readable by the task's user alone (it may hold secrets).
pub(crate) fn write_script(
    path: &Path,
    bytes: &[u8],
    tenant: Option<&Tenant>,
) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::File::options()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all_at(bytes, 0)?;
    file.set_len(bytes.len() as u64)?;
    if let Some(t) = tenant {
        std::os::unix::fs::fchown(&file, Some(t.uid), Some(t.gid))?;
    }
    Ok(())
}

impl TaskProcess {
    /// Copies the output to `log` (through `mask`) until the task exits, then kills what
    /// is left of its process group: background processes of a finished task would hold
    /// its slot's resources with nobody left to track or kill them (and keep its output
    /// open).
    /// The group is killed before the task's process is reaped, and `kill` let go of it, so
    /// that neither kill can reach a process that took the id since.
    pub(crate) async fn wait(
        self,
        log: &TaskLog,
        mut mask: MaskStream,
        kill: &KillSwitch,
    ) -> TaskExit {
        let TaskProcess {
            mut child,
            mut output,
            pgid,
        } = self;
        let mut scanner = OutputScanner::default();
        let status;
        {
            let copy = async {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match output.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(n) => {
                            let shown = mask.feed(&buf[..n]);
                            log.append(&shown);
                            scanner.feed(&shown);
                        }
                        Err(e) => {
                            warn!(error = %e, "cannot read task output");
                            break;
                        }
                    }
                }
            };
            tokio::pin!(copy);
            let mut copied = false;
            let exited = {
                let exited = child.exited();
                tokio::pin!(exited);
                // Both arms are cancellation-safe: the exit wait and the copy future are
                // polled again on the next turn, never dropped mid-way.
                loop {
                    tokio::select! {
                        e = &mut exited => break e,
                        _ = &mut copy, if !copied => copied = true,
                    }
                }
            };
            // Unreaped, the task's process holds on to its id: the group is still the task's.
            kill_group(pgid);
            kill.detach();
            status = exited.and_then(|()| child.reap());
            if !copied
                && tokio::time::timeout(STDOUT_DRAIN_WAIT, &mut copy)
                    .await
                    .is_err()
            {
                warn!(
                    pgid,
                    "task output still open after the task exited; stopped reading it"
                );
            }
        }
        let rest = mask.finish();
        log.append(&rest);
        scanner.feed(&rest);
        let (output, output_truncated) = scanner.finish();
        TaskExit {
            status,
            output,
            output_truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interpreter_is_one_bash_word_whatever_it_holds() {
        assert_eq!(
            shell_quoted("/opt/my py/bin/python3"),
            "'/opt/my py/bin/python3'"
        );
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
    }

    #[test]
    fn bash_is_found() {
        assert!(bash().is_absolute(), "{}", bash().display());
    }

    #[test]
    fn shell_identifiers() {
        for ok in ["x", "_", "dt", "BIZ_DATE", "a1", "_x9"] {
            assert!(is_shell_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "a b", "ä", "x=1", "$x"] {
            assert!(!is_shell_identifier(bad), "{bad}");
        }
    }

    /// PR_SET_PDEATHSIG is in effect: the kernel kills the task process when the thread that
    /// spawned it ends, as it does when the worker process dies.
    #[test]
    fn the_task_process_dies_with_its_spawner() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().to_path_buf();
        let pid = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let base = TaskEnvironment::of_worker(&[]).unwrap();
                let shell = Program::shell(&base);
                let p = spawn(&shell, &work, "sleep 30", "", &HashMap::new(), None).unwrap();
                p.pgid
            })
        })
        .join()
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // Dead once it is a zombie (nobody reaps it any more) or gone.
        while super::super::orphans::proc_stat(pid).is_some_and(|s| !s.zombie) {
            assert!(
                std::time::Instant::now() < deadline,
                "task process {pid} outlived the thread that spawned it"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The signal reaches the direct child only: what it started lives on in its group
        // (the process group records handle that after a crash).
        kill_group(pid);
        let mut status = 0;
        // SAFETY: reaps our own child; WNOHANG never blocks.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    }
}
