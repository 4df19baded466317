//! Kubernetes tasks: a Job of one pod (`backoffLimit: 0`), created through the API server
//! by the worker itself, named `shoal-<task_instance_id>` (labels `job-name` and
//! `shoal.io/task-instance-id`).
//!
//! The worker waits for the Job's pod, streams every container's log into the task log
//! ([`logs`]: masked, `${setValue(k=v)}` lines read from it, a broken stream opened again),
//! then reads the Job's status: `succeeded` is success, `failed` a failure naming the
//! container that failed, with its exit code. A kill or a `fail` timeout deletes the Job
//! (`propagationPolicy: Background`, so its pod goes too). A Job of the same name that
//! exists already (this attempt, started by a worker that died) is followed, not created
//! again.
//!
//! Where the API server is: the task's `api` (with the token of its `token_secret`); else
//! the worker's in-cluster service account (`KUBERNETES_SERVICE_HOST`, the token and CA
//! under `/var/run/secrets/kubernetes.io/serviceaccount`); else its `KUBECONFIG` (or
//! `~/.kube/config`): the current context's server, CA and the user's token or client
//! certificate.
//!
//! The Job and Pod objects are JSON values with the handful of fields read and written
//! here, not `k8s-openapi`'s types: see docs/decisions.md.

mod config;
mod logs;

use config::{Target, target};

use super::kill::KillSwitch;
use super::task_log::TaskLog;
use super::{NO_EXIT_CODE, Outcome, set_value};
use reqwest::{Certificate, Client, Identity, Method, StatusCode};
use serde_json::{Value, json};
use shoal_common::definition::KubernetesSpec;
use shoal_common::params::is_value_var;
use shoal_common::proto::TaskSpec;
use std::time::Duration;

/// How often the pod and the Job are looked at while waiting.
const POLL: Duration = Duration::from_secs(1);
/// How long a Job may take to show its end after its pod's log ended.
const SETTLE: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Waiting reasons of a pod's container that it does not get out of by itself.
const STUCK: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// An API server and how to talk to it.
#[derive(Clone)]
pub(crate) struct Api {
    base: String,
    token: Option<String>,
    client: Client,
}

impl Api {
    fn new(t: Target) -> Result<Api, String> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let mut b = Client::builder()
            .user_agent(concat!("shoal-worker/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(ca) = &t.ca {
            let certs = Certificate::from_pem_bundle(ca)
                .map_err(|e| format!("the API server's CA certificate: {e}"))?;
            b = b.tls_certs_merge(certs);
        }
        if let Some(pem) = &t.identity {
            let id = Identity::from_pem(pem)
                .map_err(|e| format!("the kubeconfig's client certificate: {e}"))?;
            b = b.identity(id);
        }
        if t.insecure {
            b = b.tls_danger_accept_invalid_certs(true);
        }
        let client = b
            .build()
            .map_err(|e| format!("cannot build the Kubernetes client: {e}"))?;
        Ok(Api {
            base: t.server.trim_end_matches('/').to_string(),
            token: t.token,
            client,
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// A JSON call; an answer outside 2xx is an error holding the API's message.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), String> {
        let mut r = self.request(method.clone(), path).timeout(REQUEST_TIMEOUT);
        if let Some(b) = body {
            r = r.json(b);
        }
        let response = r
            .send()
            .await
            .map_err(|e| format!("{method} {}{path}: {}", self.base, chain(&e)))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() || status == StatusCode::CONFLICT {
            return Ok((status, value));
        }
        let message = value["message"].as_str().unwrap_or(text.trim());
        Err(format!("{method} {path}: {status}: {message}"))
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// The Job's name: one per attempt (each attempt is its own task instance).
pub(crate) fn job_name(spec: &TaskSpec) -> String {
    format!("shoal-{}", spec.task_instance_id)
}

/// The Job object the task creates.
pub(crate) fn job(name: &str, spec: &TaskSpec, k: &KubernetesSpec) -> Value {
    let mut pod = match (&k.pod, &k.image) {
        (Some(pod), _) => pod.clone(),
        (None, image) => {
            let mut container = json!({"name": "main", "image": image});
            if let Some(c) = &k.command {
                container["command"] = json!(c.argv());
            }
            if !k.env.is_empty() {
                let env: Vec<Value> = k
                    .env
                    .iter()
                    .map(|(name, value)| json!({"name": name, "value": value}))
                    .collect();
                container["env"] = json!(env);
            }
            json!({"containers": [container]})
        }
    };
    add_task_values(&mut pod, spec);
    if pod.get("restartPolicy").is_none() {
        pod["restartPolicy"] = json!("Never");
    }
    let labels = json!({
        "app.kubernetes.io/managed-by": "shoal",
        "shoal.io/task-instance-id": spec.task_instance_id.to_string(),
        "shoal.io/workflow-instance-id": spec.workflow_instance_id.to_string(),
    });
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": k.namespace(), "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    });
    if let Some(ttl) = k.ttl {
        job["spec"]["ttlSecondsAfterFinished"] = json!(ttl.as_secs());
    }
    job
}

/// Gives every container of the pod the task's values (`SHOAL_PARAM_*`, `SHOAL_SECRET_*`),
/// which a guarded `sh -c` script refers to; a variable the container sets wins.
fn add_task_values(pod: &mut Value, spec: &TaskSpec) {
    let values: Vec<(&String, &String)> = spec
        .params
        .iter()
        .filter(|(k, _)| is_value_var(k))
        .collect();
    if values.is_empty() {
        return;
    }
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter(|c| c.is_object()) {
            if !container["env"].is_array() {
                container["env"] = json!([]);
            }
            let Some(env) = container["env"].as_array_mut() else {
                continue;
            };
            for (name, value) in &values {
                if !env.iter().any(|e| e["name"] == name.as_str()) {
                    // `$$` is the kubelet's `$`: a value cannot read `$(ANOTHER)`.
                    env.push(json!({"name": name, "value": value.replace('$', "$$")}));
                }
            }
        }
    }
}

/// Runs the task's Job to its end (or deletes it when the task is stopped).
pub(crate) async fn run(
    spec: &TaskSpec,
    k: &KubernetesSpec,
    log: &TaskLog,
    kill: &KillSwitch,
    started: impl FnOnce(),
) -> Outcome {
    let fail = |message: String| {
        log.note(&message);
        Outcome::failure(message)
    };
    if let Err(e) = k.check_target() {
        return fail(e);
    }
    let api = match target(k).and_then(Api::new) {
        Ok(api) => api,
        Err(e) => return fail(e),
    };
    let name = job_name(spec);
    let ns = k.namespace();
    let job = job(&name, spec, k);
    let jobs = format!("/apis/batch/v1/namespaces/{ns}/jobs");
    let work = async {
        match api.call(Method::POST, &jobs, Some(&job)).await? {
            (StatusCode::CONFLICT, _) => {
                log.note(&format!(
                    "job {ns}/{name} exists already (an earlier run of this attempt): following it"
                ));
            }
            _ => log.note(&format!("created job {ns}/{name} on {}", api.base)),
        }
        started();
        follow(&api, ns, &name, log).await
    };
    tokio::select! {
        end = work => match end {
            Ok(outcome) => outcome,
            Err(e) => fail(e),
        },
        () = kill.stopped() => {
            let path = format!("{jobs}/{name}");
            let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
            match api.call(Method::DELETE, &path, Some(&body)).await {
                Ok(_) => log.note(&format!("deleted job {ns}/{name}")),
                Err(e) => log.note(&format!("cannot delete job {ns}/{name}: {e}")),
            }
            Outcome::killed()
        }
    }
}

/// Waits for the Job's pod, streams its logs, then reads how the Job ended.
async fn follow(api: &Api, ns: &str, name: &str, log: &TaskLog) -> Result<Outcome, String> {
    let pods = format!("/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{name}");
    let mut waiting_said = false;
    // The pod, once a container of it (an init container's first) started.
    let pod = loop {
        let (_, list) = api.call(Method::GET, &pods, None).await?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if let Some(pod) = items.last() {
            if started(pod) {
                break pod.clone();
            }
            if let Some((reason, message)) = stuck(pod) {
                return Err(format!(
                    "pod {} cannot start: {reason}: {message}",
                    pod_name_of(pod)
                ));
            }
        }
        if !waiting_said {
            log.note(&format!("waiting for the pod of job {ns}/{name}"));
            waiting_said = true;
        }
        if job_end(api, ns, name).await?.is_some() && items.is_empty() {
            return Err(format!("job {ns}/{name} ended without a pod"));
        }
        tokio::time::sleep(POLL).await;
    };
    let pod_name = pod_name_of(&pod).to_string();
    let (output, truncated) = logs::stream(api, ns, &pod, log).await?;
    if truncated {
        log.note(&format!(
            "output parameters beyond {} bytes were dropped",
            set_value::MAX_OUTPUT
        ));
    }
    let deadline = tokio::time::Instant::now() + SETTLE;
    let succeeded = loop {
        if let Some(succeeded) = job_end(api, ns, name).await? {
            break succeeded;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "job {ns}/{name} did not end within {}s after its pod's log ended",
                SETTLE.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    };
    if succeeded {
        log.note(&format!("job {ns}/{name} succeeded"));
        return Ok(Outcome::Success { output });
    }
    // The container that failed, from the pod as it is now.
    let (_, list) = api.call(Method::GET, &pods, None).await?;
    let pod = list["items"]
        .as_array()
        .and_then(|i| i.iter().find(|p| pod_name_of(p) == pod_name).cloned())
        .unwrap_or(pod);
    let (exit_code, message) = match failed_container(&pod) {
        Some((kind, container, code)) => (
            code as i32,
            format!("pod {pod_name} failed: {kind} '{container}' exited with code {code}"),
        ),
        None => (NO_EXIT_CODE, format!("job {ns}/{name} failed")),
    };
    log.note(&message);
    Ok(Outcome::Failure {
        exit_code,
        message,
        output,
    })
}

/// The statuses of the pod's init containers, then of its containers.
fn statuses(pod: &Value) -> impl Iterator<Item = (&'static str, &Value)> {
    [
        ("init container", "initContainerStatuses"),
        ("container", "containerStatuses"),
    ]
    .into_iter()
    .flat_map(move |(kind, list)| {
        let list = pod["status"][list].as_array().map(Vec::as_slice);
        list.unwrap_or_default().iter().map(move |s| (kind, s))
    })
}

/// Whether the pod runs or ran a container (an init container, while it is `Pending`).
fn started(pod: &Value) -> bool {
    pod["status"]["phase"].as_str().unwrap_or("Pending") != "Pending"
        || statuses(pod).any(|(_, s)| {
            let state = &s["state"];
            state.get("running").is_some() || state.get("terminated").is_some()
        })
}

/// The first container (init containers first) that exited with a code other than 0: its
/// kind, name and code.
fn failed_container(pod: &Value) -> Option<(&'static str, String, i64)> {
    statuses(pod).find_map(|(kind, s)| {
        let code = s["state"]["terminated"]["exitCode"].as_i64()?;
        let name = s["name"].as_str().unwrap_or("").to_string();
        (code != 0).then_some((kind, name, code))
    })
}

/// The Job's end: `Some(true)` succeeded, `Some(false)` failed, `None` still running.
async fn job_end(api: &Api, ns: &str, name: &str) -> Result<Option<bool>, String> {
    let path = format!("/apis/batch/v1/namespaces/{ns}/jobs/{name}");
    let (_, job) = api.call(Method::GET, &path, None).await?;
    let status = &job["status"];
    if status["succeeded"].as_i64().unwrap_or(0) > 0 {
        return Ok(Some(true));
    }
    if status["failed"].as_i64().unwrap_or(0) > 0 {
        return Ok(Some(false));
    }
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    for c in conditions {
        if c["status"].as_str() == Some("True") {
            match c["type"].as_str() {
                Some("Complete") => return Ok(Some(true)),
                Some("Failed") => return Ok(Some(false)),
                _ => {}
            }
        }
    }
    Ok(None)
}

fn pod_name_of(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or("")
}

/// A waiting reason of the pod's containers it will not get out of by itself.
fn stuck(pod: &Value) -> Option<(String, String)> {
    statuses(pod).find_map(|(_, s)| waiting_stuck(s))
}

/// A waiting reason of a container (by its status) it will not get out of by itself.
fn waiting_stuck(status: &Value) -> Option<(String, String)> {
    let waiting = &status["state"]["waiting"];
    let reason = waiting["reason"].as_str()?;
    STUCK.contains(&reason).then(|| {
        let message = waiting["message"].as_str().unwrap_or("").to_string();
        (reason.to_string(), message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_wraps_an_image_shorthand_or_a_pod_spec() {
        let spec = TaskSpec {
            task_instance_id: 9,
            workflow_instance_id: 4,
            ..Default::default()
        };
        let k: KubernetesSpec = serde_json::from_value(json!({
            "image": "busybox", "command": "echo hi", "env": {"A": "1"}, "ttl": "10m"
        }))
        .unwrap();
        let j = job("shoal-9", &spec, &k);
        assert_eq!(j["metadata"]["namespace"], "default");
        assert_eq!(j["spec"]["backoffLimit"], 0);
        assert_eq!(j["spec"]["ttlSecondsAfterFinished"], 600);
        let pod = &j["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(
            pod["containers"][0]["command"],
            json!(["sh", "-c", "echo hi"])
        );
        assert_eq!(
            pod["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}])
        );
        // The task's values, which a guarded `sh -c` script refers to; the pod's own win.
        let spec = TaskSpec {
            params: [
                ("SHOAL_PARAM_p", "$(X)"),
                ("SHOAL_PARAM_a", "x"),
                ("p", "own"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..spec
        };
        let k: KubernetesSpec = serde_json::from_value(json!({"pod": {"containers": [
            {"name": "x", "image": "y", "env": [{"name": "SHOAL_PARAM_a", "value": "mine"}]},
        ]}}))
        .unwrap();
        let mut env = job("shoal-9", &spec, &k)["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .clone();
        env.sort_by_key(|e| e["name"].to_string());
        assert_eq!(
            env,
            [
                json!({"name": "SHOAL_PARAM_a", "value": "mine"}),
                json!({"name": "SHOAL_PARAM_p", "value": "$$(X)"})
            ]
        );
        let k: KubernetesSpec = serde_json::from_value(json!({
            "namespace": "jobs",
            "pod": {"containers": [{"name": "x", "image": "y"}], "restartPolicy": "OnFailure"}
        }))
        .unwrap();
        let j = job("shoal-9", &spec, &k);
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "OnFailure");
        assert_eq!(j["metadata"]["labels"]["shoal.io/task-instance-id"], "9");
    }
}
