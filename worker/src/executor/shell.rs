//! Shell tasks: the command is written to a script and run with `bash <script>` in its own
//! process group, in a per-task work directory. stderr goes straight to the task log;
//! stdout is copied to the log by the worker, which scans it for `${setValue(k=v)}` lines.

use super::kill::kill_group;
use super::set_value::OutputScanner;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdout, Command};
use tracing::warn;

/// Name of the script inside the task's work directory.
const SCRIPT: &str = "task.sh";
/// After the task exited and its group was killed, how long to keep reading stdout held
/// open by a process that left the group (setsid) before giving up on it.
const STDOUT_DRAIN_WAIT: Duration = Duration::from_secs(2);

/// A started shell task.
pub(crate) struct ShellProcess {
    child: Child,
    stdout: ChildStdout,
    /// Process id of bash, which is also the id of the task's process group.
    pub(crate) pgid: i32,
}

/// How a shell task ended.
pub(crate) struct ShellExit {
    pub(crate) status: std::io::Result<ExitStatus>,
    pub(crate) output: HashMap<String, String>,
    /// Some setValue parameters were dropped because the output grew too large.
    pub(crate) output_truncated: bool,
}

/// The bash executable, looked up in `PATH` once: spawning by bare name makes every spawn
/// try each `PATH` entry in turn.
fn bash() -> &'static Path {
    static BASH: OnceLock<PathBuf> = OnceLock::new();
    BASH.get_or_init(|| {
        std::env::var_os("PATH")
            .and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("bash"))
                    .find(|candidate| is_executable(candidate))
            })
            .unwrap_or_else(|| PathBuf::from("bash"))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True for names a shell accepts as variable names (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_shell_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Writes the script into `work_dir` and starts it. `log` receives stderr directly.
///
/// The file system calls here are small and local (one mkdir, one short write); they run
/// inline rather than on the blocking pool because a hop there costs more than they do and
/// dispatch latency matters.
pub(crate) fn spawn(
    work_dir: &Path,
    command: &str,
    params: &HashMap<String, String>,
    log: &File,
) -> Result<ShellProcess, String> {
    std::fs::create_dir_all(work_dir)
        .map_err(|e| format!("cannot create work directory {}: {e}", work_dir.display()))?;
    let script = work_dir.join(SCRIPT);
    let mut text = String::with_capacity(command.len() + 1);
    text.push_str(command);
    text.push('\n');
    std::fs::write(&script, text)
        .map_err(|e| format!("cannot write script {}: {e}", script.display()))?;
    let stderr = log
        .try_clone()
        .map_err(|e| format!("cannot share the task log with the task: {e}"))?;

    let mut cmd = Command::new(bash());
    cmd.arg(SCRIPT)
        .current_dir(work_dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .envs(params.iter().filter(|(k, _)| is_shell_identifier(k)));
    let mut child = cmd.spawn().map_err(|e| format!("cannot start bash: {e}"))?;
    let Some(pid) = child.id() else {
        return Err("bash exited before its process id could be read".into());
    };
    let Some(stdout) = child.stdout.take() else {
        return Err("bash has no stdout pipe".into());
    };
    Ok(ShellProcess {
        child,
        stdout,
        pgid: pid as i32,
    })
}

impl ShellProcess {
    /// Copies stdout to `log` until the task exits, then kills what is left of its process
    /// group: background processes of a finished task would hold its slot's resources with
    /// nobody left to track or kill them (and keep its stdout open).
    pub(crate) async fn wait(self, mut log: File) -> ShellExit {
        let ShellProcess {
            mut child,
            mut stdout,
            pgid,
        } = self;
        let mut scanner = OutputScanner::default();
        let mut log_failed = false;
        let status;
        {
            let copy = async {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match stdout.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(n) => {
                            if let Err(e) = log.write_all(&buf[..n])
                                && !log_failed
                            {
                                log_failed = true;
                                warn!(error = %e, "cannot write task log");
                            }
                            scanner.feed(&buf[..n]);
                        }
                        Err(e) => {
                            warn!(error = %e, "cannot read task stdout");
                            break;
                        }
                    }
                }
            };
            tokio::pin!(copy);
            let wait = child.wait();
            tokio::pin!(wait);
            let mut copied = false;
            // Both arms are cancellation-safe: `Child::wait` and the copy future are polled
            // again on the next turn, never dropped mid-way.
            status = loop {
                tokio::select! {
                    s = &mut wait => break s,
                    _ = &mut copy, if !copied => copied = true,
                }
            };
            kill_group(pgid);
            if !copied
                && tokio::time::timeout(STDOUT_DRAIN_WAIT, &mut copy)
                    .await
                    .is_err()
            {
                warn!(
                    pgid,
                    "task stdout still open after the task exited; stopped reading it"
                );
            }
        }
        let (output, output_truncated) = scanner.finish();
        ShellExit {
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
}
