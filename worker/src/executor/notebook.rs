//! `notebook` tasks: a Jupyter notebook run with papermill, as `<python> -m papermill`
//! (the worker's `--python`), like a shell task's process: its own process group, the same
//! log, kill and timeout. Its parameters go in a JSON file papermill reads (`-f`), so no
//! value is read as an option; cells' outputs reach the log as they run (`--log-output`).
//!
//! The executed notebook is kept beside the attempt's log
//! (`logs/<instance>/<task>_<attempt>.ipynb`, pruned with it) and its path written in the
//! log; a failed cell's error becomes the task's message.
//!
//! The kernel runs in a session of its own (jupyter_client starts it so); killing the
//! task kills papermill's group, and the kernel, which watches its parent, exits after it.

use super::Outcome;
use super::launch::TaskEnvironment;
use super::process::{self, Command, TaskProcess};
use super::script::ProcessTask;
use super::task_log::TaskLog;
use super::tenant::Tenant;
use shoal_common::definition::NotebookSpec;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The parameters file and the default output, in the task's work directory.
const PARAMETERS: &str = "parameters.json";
const EXECUTED: &str = "executed.ipynb";
/// Largest executed notebook kept beside the log.
const MAX_KEPT: u64 = 64 * 1024 * 1024;

/// A notebook task about to start, its paths resolved.
pub(super) struct Notebook<'a> {
    pub(super) python: &'a str,
    pub(super) base: &'a TaskEnvironment,
    pub(super) params: &'a HashMap<String, String>,
    pub(super) log: &'a TaskLog,
    /// Where the executed notebook is kept: beside the attempt's log.
    pub(super) kept: PathBuf,
    input: PathBuf,
    cwd: PathBuf,
    /// Where the task asked papermill to write it, if it did.
    output: Option<PathBuf>,
    kernel: Option<String>,
    parameters: BTreeMap<String, String>,
}

/// The notebook, the kernel's directory and the asked-for output of `spec` (expanded):
/// `cwd` defaults to the notebook's directory; relative paths are relative to it.
pub(crate) fn paths(spec: &NotebookSpec) -> Result<(PathBuf, PathBuf, Option<PathBuf>), String> {
    spec.check().map_err(|e| format!("notebook: {e}"))?;
    let path = Path::new(&spec.path);
    let cwd = match &spec.cwd {
        Some(cwd) => PathBuf::from(cwd),
        None => path.parent().unwrap_or(Path::new("/")).to_path_buf(),
    };
    let input = cwd.join(path);
    let output = spec.output.as_ref().map(|o| cwd.join(o));
    if let Some(o) = &output
        && o == &input
    {
        return Err("notebook: `output` is the notebook itself; give another path".into());
    }
    Ok((input, cwd, output))
}

impl<'a> Notebook<'a> {
    pub(super) fn new(
        spec: &NotebookSpec,
        python: &'a str,
        base: &'a TaskEnvironment,
        params: &'a HashMap<String, String>,
        log: &'a TaskLog,
        kept: PathBuf,
    ) -> Result<Self, String> {
        let (input, cwd, output) = paths(spec)?;
        Ok(Notebook {
            python,
            base,
            params,
            log,
            kept,
            input,
            cwd,
            output,
            kernel: spec.kernel.clone().filter(|k| !k.trim().is_empty()),
            parameters: spec.parameters.clone(),
        })
    }

    /// papermill's arguments: options first, then `--`, so that no path is read as one.
    fn arguments(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = ["-m", "papermill", "--log-output", "--no-progress-bar"]
            .map(OsString::from)
            .into();
        args.extend(["--cwd".into(), self.cwd.clone().into_os_string()]);
        args.extend(["-f".into(), PARAMETERS.into()]);
        if let Some(kernel) = &self.kernel {
            args.extend(["-k".into(), kernel.into()]);
        }
        args.push("--".into());
        args.push(self.input.clone().into_os_string());
        args.push(match &self.output {
            Some(output) => output.clone().into_os_string(),
            None => EXECUTED.into(),
        });
        args
    }

    /// Copies the executed notebook beside the log: read without following a symlink,
    /// and only a regular file of the task's user (it was written by the task).
    fn keep(&self, from: &Path, tenant: Option<&Tenant>) -> Result<u64, String> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let mut source = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(from)
            .map_err(|e| format!("cannot open {}: {e}", from.display()))?;
        let meta = source.metadata().map_err(|e| e.to_string())?;
        // SAFETY: geteuid cannot fail and touches no memory.
        let owner = tenant.map_or_else(|| unsafe { libc::geteuid() }, |t| t.uid);
        if !meta.is_file() || meta.uid() != owner {
            return Err(format!(
                "{} is not a file of the task's user",
                from.display()
            ));
        }
        if meta.len() > MAX_KEPT {
            return Err(format!(
                "{} is larger than {} MiB",
                from.display(),
                MAX_KEPT >> 20
            ));
        }
        let mut kept = std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.kept)
            .map_err(|e| format!("cannot write {}: {e}", self.kept.display()))?;
        std::io::copy(&mut (&mut source).take(MAX_KEPT), &mut kept)
            .map_err(|e| format!("cannot copy it to {}: {e}", self.kept.display()))
    }
}

impl ProcessTask for Notebook<'_> {
    fn what(&self) -> &str {
        "papermill"
    }

    fn start(&self, work_dir: &Path, tenant: Option<&Tenant>) -> Result<TaskProcess, String> {
        let values: serde_json::Map<String, serde_json::Value> = self
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), typed(v)))
            .collect();
        let json = serde_json::Value::Object(values).to_string();
        let file = work_dir.join(PARAMETERS);
        process::write_script(&file, json.as_bytes(), tenant)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let args = self.arguments();
        // Jupyter's connection files go to the work directory, the task user's own (a
        // tenant's home may be missing or not writable).
        let runtime = work_dir.to_string_lossy();
        let env = [
            ("PYTHONUNBUFFERED", "1"),
            ("JUPYTER_RUNTIME_DIR", runtime.as_ref()),
        ];
        let command = Command {
            program: OsStr::new(self.python),
            args: args.iter().map(OsString::as_os_str).collect(),
            base: self.base,
            env: &env,
        };
        process::start(&command, work_dir, self.params, tenant)
    }

    fn finish(&self, work_dir: &Path, tenant: Option<&Tenant>, outcome: Outcome) -> Outcome {
        let written = match &self.output {
            Some(output) => output.clone(),
            None => work_dir.join(EXECUTED),
        };
        match std::fs::symlink_metadata(&written) {
            Err(_) => {
                self.log
                    .note("no executed notebook was written (papermill stopped before it ran)");
                return outcome;
            }
            Ok(_) => match self.keep(&written, tenant) {
                Ok(_) => self
                    .log
                    .note(&format!("executed notebook: {}", self.kept.display())),
                Err(e) => self.log.note(&format!("executed notebook not kept: {e}")),
            },
        }
        if let Some(output) = &self.output {
            self.log.note(&format!(
                "executed notebook written to {}",
                output.display()
            ));
        }
        let Outcome::Failure {
            exit_code,
            message,
            output,
        } = outcome
        else {
            return outcome;
        };
        let error = std::fs::read(&self.kept)
            .ok()
            .and_then(|bytes| failed_cell(&bytes));
        let message = match error {
            Some(error) => {
                let message = format!("notebook {error}");
                self.log.note(&message);
                message
            }
            None => message,
        };
        Outcome::Failure {
            exit_code,
            message,
            output,
        }
    }
}

/// A parameter's value as papermill's `-p` types it: `True`, `False`, `None`, an int, a
/// float, else the string.
fn typed(value: &str) -> serde_json::Value {
    use serde_json::Value;
    match value {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        _ => {
            if let Ok(n) = value.parse::<i64>() {
                return n.into();
            }
            match value.parse::<f64>() {
                Ok(f) if f.is_finite() && value.chars().any(|c| c.is_ascii_digit()) => f.into(),
                _ => Value::String(value.to_string()),
            }
        }
    }
}

/// The first cell of an executed notebook whose output is an error, as
/// `cell In [4] raised ValueError: too many rows`.
fn failed_cell(notebook: &[u8]) -> Option<String> {
    let nb: serde_json::Value = serde_json::from_slice(notebook).ok()?;
    nb["cells"].as_array()?.iter().find_map(|cell| {
        let error = cell["outputs"]
            .as_array()?
            .iter()
            .find(|o| o["output_type"] == "error")?;
        let at = match cell["execution_count"].as_i64() {
            Some(n) => format!("cell In [{n}]"),
            None => "a cell".to_string(),
        };
        let name = error["ename"].as_str().unwrap_or("error");
        Some(match error["evalue"].as_str().filter(|v| !v.is_empty()) {
            Some(value) => format!("{at} raised {name}: {value}"),
            None => format!("{at} raised {name}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_typed_as_papermill_types_them() {
        let cases = [
            ("3", serde_json::json!(3)),
            ("-7", serde_json::json!(-7)),
            ("0.5", serde_json::json!(0.5)),
            ("1e3", serde_json::json!(1000.0)),
            ("True", serde_json::json!(true)),
            ("None", serde_json::Value::Null),
            ("true", serde_json::json!("true")),
            ("inf", serde_json::json!("inf")),
            ("2026-01-01", serde_json::json!("2026-01-01")),
            ("a b; rm -rf /", serde_json::json!("a b; rm -rf /")),
        ];
        for (value, want) in cases {
            assert_eq!(typed(value), want, "{value}");
        }
    }

    #[test]
    fn paths_are_relative_to_the_kernel_s_directory() {
        let spec = |v: serde_json::Value| serde_json::from_value::<NotebookSpec>(v).unwrap();
        let (input, cwd, output) =
            paths(&spec(serde_json::json!({"path": "/nb/a.ipynb"}))).unwrap();
        assert_eq!(
            (input.as_path(), cwd.as_path(), output),
            (Path::new("/nb/a.ipynb"), Path::new("/nb"), None)
        );
        let (input, cwd, output) = paths(&spec(
            serde_json::json!({"path": "a.ipynb", "cwd": "/w", "output": "out/a.ipynb"}),
        ))
        .unwrap();
        assert_eq!(input, Path::new("/w/a.ipynb"));
        assert_eq!(cwd, Path::new("/w"));
        assert_eq!(output.unwrap(), Path::new("/w/out/a.ipynb"));
        let e = paths(&spec(serde_json::json!({"path": "a.ipynb"}))).unwrap_err();
        assert!(e.contains("relative"), "{e}");
        let e = paths(&spec(
            serde_json::json!({"path": "/a.ipynb", "output": "/a.ipynb"}),
        ))
        .unwrap_err();
        assert!(e.contains("the notebook itself"), "{e}");
    }

    #[test]
    fn the_failed_cell_is_named() {
        let nb = serde_json::json!({"cells": [
            {"cell_type": "markdown", "source": "x"},
            {"cell_type": "code", "execution_count": 3, "outputs": [{"output_type": "stream", "text": "hi"}]},
            {"cell_type": "code", "execution_count": 4, "outputs": [
                {"output_type": "error", "ename": "ValueError", "evalue": "too many rows: 9", "traceback": []}
            ]},
        ]});
        assert_eq!(
            failed_cell(nb.to_string().as_bytes()).unwrap(),
            "cell In [4] raised ValueError: too many rows: 9"
        );
        assert_eq!(failed_cell(b"{\"cells\": []}"), None);
        assert_eq!(failed_cell(b"not json"), None);
    }
}
