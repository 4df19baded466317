//! DolphinScheduler's SPARK and JUPYTER tasks to shoal's `spark` and `notebook`. What
//! shoal cannot carry over is reported; a task that cannot be one at all (a Spark SQL
//! script, a notebook without an absolute path) comes back as the reason, and stands in
//! the DAG as a task that fails saying so.

use serde_json::Value as Json;
use shoal_common::definition::{NotebookSpec, SparkSpec};
use std::collections::BTreeMap;

/// A text parameter, none when empty.
fn text(p: &Json, key: &str) -> Option<String> {
    let v = p.get(key)?.as_str()?.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// A count that DolphinScheduler leaves at 0 when unset.
fn count(p: &Json, key: &str) -> Option<u32> {
    let n = p.get(key)?.as_u64()?;
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// SparkParameters: `programType` JAVA/SCALA (`mainClass` in `mainJar`) or PYTHON (the
/// `mainJar` is the .py file); `deployMode` local/client/cluster; `others` as far as it
/// is `--conf KEY=VALUE` pairs.
pub(super) fn spark(p: &Json, at: &str, report: &mut Vec<String>) -> Result<SparkSpec, String> {
    let program = text(p, "programType").unwrap_or_else(|| "SCALA".into());
    let main = p
        .get("mainJar")
        .and_then(|j| j.get("resourceName").or(j.get("fullName")))
        .and_then(Json::as_str)
        .filter(|j| !j.trim().is_empty())
        .map(str::to_string);
    let mut spec = SparkSpec::default();
    match program.as_str() {
        "PYTHON" => spec.py_file = main.clone(),
        "JAVA" | "SCALA" => {
            spec.main_class = text(p, "mainClass");
            spec.app_jar = main.clone();
        }
        other => {
            return Err(format!(
                "its Spark program type {other} (a Spark SQL script) is not in shoal's spark task"
            ));
        }
    }
    let Some(main) = main else {
        return Err("it names no main jar or Python file".into());
    };
    report.push(format!(
        "{at}: '{main}' is a DolphinScheduler resource: put it where the workers read it at that path (or change the task's {})",
        if spec.py_file.is_some() { "py_file" } else { "app_jar" }
    ));
    match text(p, "deployMode").as_deref() {
        Some("local") | None => spec.master = Some("local".into()),
        Some(mode) => {
            spec.deploy_mode = Some(mode.to_string());
            spec.master = Some(text(p, "master").unwrap_or_else(|| "yarn".into()));
        }
    }
    spec.name = text(p, "appName");
    spec.driver_memory = text(p, "driverMemory");
    spec.executor_memory = text(p, "executorMemory");
    spec.driver_cores = count(p, "driverCores");
    spec.executor_cores = count(p, "executorCores");
    spec.num_executors = count(p, "numExecutors");
    if let Some(args) = text(p, "mainArgs") {
        if args.contains(['"', '\'']) {
            report.push(format!(
                "{at}: its arguments are split at spaces; quotes in them are kept as written"
            ));
        }
        spec.args = args.split_whitespace().map(str::to_string).collect();
    }
    if let Some(queue) = text(p, "yarnQueue").or(text(p, "queue")) {
        spec.conf.insert("spark.yarn.queue".into(), queue);
    }
    if let Some(others) = text(p, "others") {
        let mut words = others.split_whitespace();
        let mut dropped = Vec::new();
        while let Some(word) = words.next() {
            let pair = match word {
                "--conf" => words.next().and_then(|kv| kv.split_once('=')),
                _ => None,
            };
            match pair {
                Some((k, v)) => {
                    spec.conf.insert(k.to_string(), v.to_string());
                }
                None => dropped.push(word),
            }
        }
        if !dropped.is_empty() {
            report.push(format!(
                "{at}: spark-submit options not carried over (only --conf KEY=VALUE is): {}",
                dropped.join(" ")
            ));
        }
    }
    if text(p, "namespace").is_some() {
        report.push(format!(
            "{at}: its Kubernetes namespace is not carried over"
        ));
    }
    spec.check()
        .map_err(|e| format!("its settings do not make a spark task: {e}"))?;
    Ok(spec)
}

/// JupyterParameters: `inputNotePath`, `outputNotePath`, `parameters` (a JSON object in a
/// string), `kernel`; the conda environment and papermill's other options are reported.
pub(super) fn notebook(
    p: &Json,
    at: &str,
    report: &mut Vec<String>,
) -> Result<NotebookSpec, String> {
    let Some(path) = text(p, "inputNotePath") else {
        return Err("it names no notebook (inputNotePath)".into());
    };
    if !path.starts_with('/') && !path.starts_with("${") {
        return Err(format!(
            "its notebook '{path}' is not an absolute path on the workers"
        ));
    }
    let mut parameters = BTreeMap::new();
    if let Some(raw) = text(p, "parameters") {
        match serde_json::from_str::<serde_json::Map<String, Json>>(&raw) {
            Ok(values) => {
                for (k, v) in values {
                    let v = match v {
                        Json::String(s) => s,
                        Json::Bool(true) => "True".into(),
                        Json::Bool(false) => "False".into(),
                        Json::Null => "None".into(),
                        other => other.to_string(),
                    };
                    parameters.insert(k, v);
                }
            }
            Err(e) => report.push(format!(
                "{at}: its parameters are not a JSON object ({e}); none carried over"
            )),
        }
    }
    let mut dropped = Vec::new();
    if let Some(env) = text(p, "condaEnvName") {
        dropped.push(format!(
            "conda environment '{env}' (the worker's --python runs papermill)"
        ));
    }
    for key in ["engine", "executionTimeout", "startTimeout", "others"] {
        if let Some(v) = text(p, key) {
            dropped.push(format!("{key} '{v}'"));
        }
    }
    if !dropped.is_empty() {
        report.push(format!("{at}: not carried over: {}", dropped.join(", ")));
    }
    let spec = NotebookSpec {
        path,
        output: text(p, "outputNotePath"),
        parameters,
        kernel: text(p, "kernel"),
        cwd: None,
    };
    spec.check()
        .map_err(|e| format!("its settings do not make a notebook task: {e}"))?;
    Ok(spec)
}
