//! `spark` tasks: spark-submit started with an argument list built from the task's typed
//! fields (each value one argument, never read by a shell), run like a shell task's
//! process: its own process group, the same log, kill and timeout.
//!
//! Which spark-submit: `--spark-submit PATH` if given, else `$SPARK_HOME/bin/spark-submit`
//! when the worker's environment sets SPARK_HOME, else `spark-submit` on the worker's PATH.

use super::launch::TaskEnvironment;
use super::process::{self, Command, TaskProcess};
use super::script::ProcessTask;
use super::tenant::Tenant;
use shoal_common::definition::SparkSpec;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The spark-submit the worker runs: see the module's doc.
pub(crate) fn spark_submit(flag: Option<&Path>, spark_home: Option<OsString>) -> PathBuf {
    match (flag, spark_home.filter(|h| !h.is_empty())) {
        (Some(path), _) => path.to_path_buf(),
        (None, Some(home)) => Path::new(&home).join("bin").join("spark-submit"),
        (None, None) => PathBuf::from("spark-submit"),
    }
}

/// spark-submit's arguments for `spec` (expanded), the application named `task` unless it
/// names itself.
pub(crate) fn arguments(spec: &SparkSpec, task: &str) -> Result<Vec<String>, String> {
    spec.check().map_err(|e| format!("spark: {e}"))?;
    let mut args: Vec<String> = vec!["--master".into(), spec.master().into()];
    let mut option = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            args.push(flag.into());
            args.push(value);
        }
    };
    option("--deploy-mode", spec.deploy_mode.clone());
    option(
        "--name",
        Some(spec.name.clone().unwrap_or_else(|| task.into())),
    );
    option("--class", spec.main_class.clone());
    option(
        "--jars",
        Some(spec.jars.join(",")).filter(|j| !j.is_empty()),
    );
    option("--driver-memory", spec.driver_memory.clone());
    option("--executor-memory", spec.executor_memory.clone());
    option("--driver-cores", spec.driver_cores.map(|n| n.to_string()));
    option(
        "--executor-cores",
        spec.executor_cores.map(|n| n.to_string()),
    );
    option("--num-executors", spec.num_executors.map(|n| n.to_string()));
    for (key, value) in &spec.conf {
        option("--conf", Some(format!("{key}={value}")));
    }
    let primary = spec.py_file.as_ref().or(spec.app_jar.as_ref());
    let primary = primary.ok_or("spark: give `main_class` (with `app_jar`) or `py_file`")?;
    // Anything after the options that starts with '-' would be read as one more option.
    if primary.starts_with('-') {
        return Err(format!(
            "spark: the application '{primary}' starts with '-': give a path or URL"
        ));
    }
    args.push(primary.clone());
    args.extend(spec.args.iter().cloned());
    Ok(args)
}

/// A spark task about to start.
pub(super) struct Spark<'a> {
    pub(super) submit: &'a Path,
    pub(super) args: Vec<String>,
    pub(super) base: &'a TaskEnvironment,
    pub(super) params: &'a HashMap<String, String>,
}

impl ProcessTask for Spark<'_> {
    fn what(&self) -> &str {
        "spark-submit"
    }

    fn start(&self, work_dir: &Path, tenant: Option<&Tenant>) -> Result<TaskProcess, String> {
        let command = Command {
            program: self.submit.as_os_str(),
            args: self.args.iter().map(OsStr::new).collect(),
            base: self.base,
            env: &[("PYTHONUNBUFFERED", "1")],
        };
        process::start(&command, work_dir, self.params, tenant).map_err(|e| {
            format!(
                "{e} (the worker runs --spark-submit PATH if given, else $SPARK_HOME/bin/spark-submit, else spark-submit on its PATH)"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spark_submit_is_the_flag_else_spark_home_else_the_path() {
        let flag = Path::new("/opt/spark/bin/spark-submit");
        assert_eq!(spark_submit(Some(flag), Some("/x".into())), flag);
        assert_eq!(
            spark_submit(None, Some("/opt/spark-4".into())),
            Path::new("/opt/spark-4/bin/spark-submit")
        );
        assert_eq!(
            spark_submit(None, Some("".into())),
            Path::new("spark-submit")
        );
        assert_eq!(spark_submit(None, None), Path::new("spark-submit"));
    }

    #[test]
    fn each_field_is_one_argument() {
        let spec: SparkSpec = serde_json::from_value(serde_json::json!({
            "main_class": "org.example.Main",
            "app_jar": "/jobs/app.jar",
            "jars": ["/j/a.jar", "/j/b.jar"],
            "deploy_mode": "client",
            "master": "yarn",
            "driver_memory": "2g",
            "executor_memory": "4g",
            "driver_cores": 1,
            "executor_cores": 2,
            "num_executors": 3,
            "conf": {"spark.a": "1 2", "spark.b": "x; rm -rf /"},
            "args": ["--date", "2026-01-01", "$(id)"],
        }))
        .unwrap();
        let args = arguments(&spec, "load").unwrap();
        let want = [
            "--master",
            "yarn",
            "--deploy-mode",
            "client",
            "--name",
            "load",
            "--class",
            "org.example.Main",
            "--jars",
            "/j/a.jar,/j/b.jar",
            "--driver-memory",
            "2g",
            "--executor-memory",
            "4g",
            "--driver-cores",
            "1",
            "--executor-cores",
            "2",
            "--num-executors",
            "3",
            "--conf",
            "spark.a=1 2",
            "--conf",
            "spark.b=x; rm -rf /",
            "/jobs/app.jar",
            "--date",
            "2026-01-01",
            "$(id)",
        ];
        assert_eq!(args, want);

        let py: SparkSpec =
            serde_json::from_value(serde_json::json!({"py_file": "/jobs/a.py", "name": "n"}))
                .unwrap();
        assert_eq!(
            arguments(&py, "t").unwrap(),
            ["--master", "local[2]", "--name", "n", "/jobs/a.py"]
        );
    }

    #[test]
    fn what_expanded_wrong_is_refused_before_anything_runs() {
        let spec = |v: serde_json::Value| serde_json::from_value::<SparkSpec>(v).unwrap();
        let e = arguments(&spec(serde_json::json!({"py_file": "--verbose"})), "t").unwrap_err();
        assert!(e.contains("starts with '-'"), "{e}");
        let e = arguments(
            &spec(serde_json::json!({"py_file": "/a.py", "deploy_mode": "both"})),
            "t",
        )
        .unwrap_err();
        assert!(e.contains("unknown deploy_mode 'both'"), "{e}");
    }
}
