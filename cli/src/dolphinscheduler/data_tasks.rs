//! DolphinScheduler's SPARK, JUPYTER and K8S tasks to shoal's `spark`, `notebook` and
//! `kubernetes`. What
//! shoal cannot carry over is reported; a task that cannot be one at all (a Spark SQL
//! script, a notebook without an absolute path) comes back as the reason, and stands in
//! the DAG as a task that fails saying so.

use serde_json::Value as Json;
use serde_json::json;
use shoal_common::definition::{KubernetesSpec, NotebookSpec, SparkSpec};
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

/// K8sTaskParameters: `image`, `namespace` (a name, or in 3.0-3.1 a JSON object with its
/// `name` and `cluster`), `command` and `args` (JSON arrays in strings), `imagePullPolicy`,
/// `pullSecret`, `minCpuCores`, `minMemorySpace` (MiB), `nodeSelectors`; as a pod spec of
/// one container. Labels and the cluster connection (`datasource`, `kubeConfig`) are
/// reported.
pub(super) fn kubernetes(
    p: &Json,
    at: &str,
    report: &mut Vec<String>,
) -> Result<KubernetesSpec, String> {
    let Some(image) = text(p, "image") else {
        return Err("it names no image".into());
    };
    let mut container = json!({"name": "main", "image": image});
    for key in ["command", "args"] {
        let Some(raw) = text(p, key) else { continue };
        match serde_json::from_str::<Vec<String>>(&raw) {
            Ok(argv) => container[key] = json!(argv),
            Err(_) => return Err(format!("its {key} '{raw}' is not a JSON list of strings")),
        }
    }
    if let Some(policy) = text(p, "imagePullPolicy") {
        container["imagePullPolicy"] = json!(policy);
    }
    let mut requests = serde_json::Map::new();
    if let Some(cpu) = p
        .get("minCpuCores")
        .and_then(Json::as_f64)
        .filter(|c| *c > 0.0)
    {
        requests.insert("cpu".into(), json!(cpu.to_string()));
    }
    if let Some(mem) = p
        .get("minMemorySpace")
        .and_then(Json::as_f64)
        .filter(|m| *m > 0.0)
    {
        requests.insert("memory".into(), json!(format!("{mem}Mi")));
    }
    if !requests.is_empty() {
        container["resources"] = json!({"requests": requests});
    }
    let mut pod = json!({"containers": [container]});
    if let Some(secret) = text(p, "pullSecret") {
        pod["imagePullSecrets"] = json!([{"name": secret}]);
    }
    let selectors: Vec<Json> = p
        .get("nodeSelectors")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let values: Vec<String> = match s.get("values")? {
                Json::String(v) => v.split(',').map(|v| v.trim().to_string()).collect(),
                Json::Array(vs) => vs
                    .iter()
                    .filter_map(|v| Some(v.as_str()?.to_string()))
                    .collect(),
                _ => Vec::new(),
            };
            let mut term =
                json!({"key": s.get("key")?.as_str()?, "operator": s.get("operator")?.as_str()?});
            if !values.iter().all(String::is_empty) {
                term["values"] = json!(values);
            }
            Some(term)
        })
        .collect();
    if !selectors.is_empty() {
        pod["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": selectors}]
        }}});
    }
    let raw_namespace = text(p, "namespace");
    let namespace = match raw_namespace.as_deref().map(serde_json::from_str::<Json>) {
        Some(Ok(Json::Object(ns))) => {
            if let Some(cluster) = ns.get("cluster").and_then(Json::as_str) {
                report.push(format!("{at}: its cluster '{cluster}' is not carried over: set the task's api and token_secret, or run its workers in that cluster"));
            }
            ns.get("name").and_then(Json::as_str).map(str::to_string)
        }
        _ => raw_namespace,
    };
    let mut dropped = Vec::new();
    if p.get("customizedLabels")
        .and_then(Json::as_array)
        .is_some_and(|l| !l.is_empty())
    {
        dropped.push("its pod labels (the Job carries shoal's)");
    }
    if p.get("datasource")
        .and_then(Json::as_i64)
        .is_some_and(|d| d > 0)
        || text(p, "kubeConfig").is_some()
    {
        dropped.push("its cluster connection (set the task's api and token_secret, or run its workers in the cluster)");
    }
    if !dropped.is_empty() {
        report.push(format!("{at}: not carried over: {}", dropped.join(", ")));
    }
    Ok(KubernetesSpec {
        namespace,
        pod: Some(pod),
        image: None,
        command: None,
        env: BTreeMap::new(),
        ttl: None,
        api: None,
        token_secret: None,
        token: None,
    })
}
