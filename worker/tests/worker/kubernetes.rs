//! Kubernetes tasks run by a real worker against a fake API server written here (axum on
//! 127.0.0.1:0) that implements only what the worker calls: create a Job, list pods by
//! `job-name` label, a pod's log with `follow=true`, get a Job, delete a Job. No cluster
//! is involved: the fake "runs" a pod by its image name (`ok`, `fail3`, `sleep`, `bad`).

use super::*;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "t0ken-secret";

#[derive(Default)]
struct Cluster {
    /// Jobs by name, as created.
    jobs: BTreeMap<String, Value>,
    /// Pod list calls per job, to show the pod Pending first.
    lists: BTreeMap<String, u32>,
    /// Jobs whose pod's log was read to its end.
    logged: Vec<String>,
    /// Delete calls: job name and body.
    deleted: Vec<(String, Value)>,
    /// Log streams of `sleep` pods, held open until their job is deleted.
    held: Vec<(
        String,
        tokio::sync::mpsc::Sender<Result<String, std::io::Error>>,
    )>,
}

type Shared = Arc<Mutex<Cluster>>;

fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"))
}

fn unauthorized() -> HttpResponse {
    let body = json!({"kind": "Status", "message": "Unauthorized", "code": 401});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

fn image_of(job: &Value) -> String {
    job["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn create_job(
    State(c): State<Shared>,
    UrlPath(ns): UrlPath<String>,
    h: HeaderMap,
    Json(job): Json<Value>,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    let name = job["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(job["metadata"]["namespace"], ns.as_str());
    let mut c = c.lock().unwrap();
    if c.jobs.contains_key(&name) {
        let body = json!({"kind": "Status", "reason": "AlreadyExists", "code": 409});
        return (StatusCode::CONFLICT, Json(body)).into_response();
    }
    c.jobs.insert(name, job.clone());
    (StatusCode::CREATED, Json(job)).into_response()
}

fn pod(job: &str, phase: &str, image: &str, exit: Option<i64>) -> Value {
    let state = match (exit, image) {
        (Some(code), _) => json!({"terminated": {"exitCode": code}}),
        (None, "bad") => {
            json!({"waiting": {"reason": "ErrImagePull", "message": "pull access denied for bad"}})
        }
        _ => json!({"running": {}}),
    };
    json!({
        "metadata": {"name": format!("{job}-abcde"), "labels": {"job-name": job}},
        "spec": {"containers": [{"name": "main", "image": image}]},
        "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]},
    })
}

/// How the fake's pod of `job` is now: (phase, exit code).
fn pod_state(c: &Cluster, job: &str) -> (&'static str, Option<i64>) {
    let image = image_of(&c.jobs[job]);
    let lists = c.lists.get(job).copied().unwrap_or(0);
    let done = c.logged.iter().any(|j| j == job);
    match image.as_str() {
        "bad" => ("Pending", None),
        _ if lists < 2 => ("Pending", None),
        "ok" if done => ("Succeeded", Some(0)),
        "fail3" if done => ("Failed", Some(3)),
        _ => ("Running", None),
    }
}

async fn list_pods(
    State(c): State<Shared>,
    UrlPath(_ns): UrlPath<String>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    let job = selector
        .strip_prefix("job-name=")
        .expect("selected by job-name");
    let mut c = c.lock().unwrap();
    if !c.jobs.contains_key(job) {
        return Json(json!({"kind": "PodList", "items": []})).into_response();
    }
    *c.lists.entry(job.to_string()).or_default() += 1;
    let (phase, exit) = pod_state(&c, job);
    let image = image_of(&c.jobs[job]);
    Json(json!({"kind": "PodList", "items": [pod(job, phase, &image, exit)]})).into_response()
}

async fn pod_log(
    State(c): State<Shared>,
    UrlPath((_ns, pod)): UrlPath<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    assert_eq!(q.get("follow").map(String::as_str), Some("true"));
    assert_eq!(q.get("container").map(String::as_str), Some("main"));
    let job = pod.strip_suffix("-abcde").unwrap().to_string();
    let mut c = c.lock().unwrap();
    let image = image_of(&c.jobs[&job]);
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    match image.as_str() {
        "sleep" => {
            tx.try_send(Ok("sleeping until the job is deleted\n".into()))
                .unwrap();
            c.held.push((job, tx));
        }
        other => {
            let text = if other == "ok" {
                "hello from the pod\n${setValue(rows=42)}\nthe t0ken-secret is masked\n"
            } else {
                "about to fail\n"
            };
            tx.try_send(Ok(text.into())).unwrap();
            c.logged.push(job);
        }
    }
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    HttpResponse::new(Body::from_stream(stream))
}

async fn get_job(
    State(c): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    h: HeaderMap,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    let c = c.lock().unwrap();
    let Some(job) = c.jobs.get(&name) else {
        let body = json!({"kind": "Status", "message": format!("jobs.batch \"{name}\" not found"), "code": 404});
        return (StatusCode::NOT_FOUND, Json(body)).into_response();
    };
    let mut job = job.clone();
    job["status"] = match pod_state(&c, &name) {
        ("Succeeded", _) => json!({"succeeded": 1}),
        ("Failed", _) => json!({"failed": 1}),
        _ => json!({"active": 1}),
    };
    Json(job).into_response()
}

async fn delete_job(
    State(c): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    h: HeaderMap,
    Json(body): Json<Value>,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    let mut c = c.lock().unwrap();
    c.jobs.remove(&name);
    c.held.retain(|(job, _)| *job != name);
    c.deleted.push((name, body));
    Json(json!({"kind": "Status", "status": "Success"})).into_response()
}

async fn fake_api() -> (String, Shared) {
    let cluster = Shared::default();
    let app = axum::Router::new()
        .route("/apis/batch/v1/namespaces/{ns}/jobs", post(create_job))
        .route(
            "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
            get(get_job).delete(delete_job),
        )
        .route("/api/v1/namespaces/{ns}/pods", get(list_pods))
        .route("/api/v1/namespaces/{ns}/pods/{pod}/log", get(pod_log))
        .with_state(cluster.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, cluster)
}

fn k8s_task(id: i64, kubernetes: Value, master: &str) -> TaskSpec {
    let definition =
        json!({"name": format!("t{id}"), "type": "kubernetes", "kubernetes": kubernetes});
    TaskSpec {
        task_instance_id: id,
        workflow_instance_id: 400,
        attempt: 1,
        name: format!("t{id}"),
        task_type: "kubernetes".into(),
        definition_json: definition.to_string(),
        params: HashMap::new(),
        master_addr: master.into(),
        owner_epoch: 1,
        tenant: String::new(),
        masked: vec![TOKEN.into()],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_kubernetes_job_s_pod_log_and_end_become_the_task_s() {
    let (api, cluster) = fake_api().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let ok = k8s_task(
        4101,
        json!({"namespace": "etl", "api": api, "token": TOKEN, "ttl": "1h",
               "pod": {"containers": [{"name": "main", "image": "ok", "args": ["--rows", "42"]}]}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![ok.clone()]).await.accepted, [4101]);
    let events = master.until_done(4101).await;
    let log = String::from_utf8(w.read_log(&ok, 0, 0).await.unwrap()).unwrap();
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{log}"
    );
    assert_eq!(events[1].output.get("rows").map(String::as_str), Some("42"));
    assert!(log.contains("created job etl/shoal-4101"), "{log}");
    assert!(log.contains("hello from the pod\n"), "{log}");
    assert!(log.contains("the *** is masked"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
    {
        let c = cluster.lock().unwrap();
        let job = &c.jobs["shoal-4101"];
        assert_eq!(job["spec"]["backoffLimit"], 0);
        assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 3600);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["containers"][0]["args"], json!(["--rows", "42"]));
    }

    // The image shorthand; the container's exit code is the task's.
    let fail = k8s_task(
        4102,
        json!({"namespace": "etl", "api": api, "token": TOKEN, "image": "fail3", "command": ["false"]}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![fail.clone()]).await.accepted, [4102]);
    let events = master.until_done(4102).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{events:?}");
    assert_eq!(end.exit_code, 3);
    assert_eq!(
        end.message,
        "pod shoal-4102-abcde failed: container 'main' exited with code 3"
    );
    let log = String::from_utf8(w.read_log(&fail, 0, 0).await.unwrap()).unwrap();
    assert!(log.contains("about to fail\n"), "{log}");

    // A pod that cannot pull its image fails the task with the reason.
    let bad = k8s_task(
        4103,
        json!({"api": api, "token": TOKEN, "image": "bad"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![bad]).await.accepted, [4103]);
    let events = master.until_done(4103).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32);
    assert_eq!(
        end.message,
        "pod shoal-4103-abcde cannot start: ErrImagePull: pull access denied for bad"
    );

    // A wrong token is the API's 401, named.
    let denied = k8s_task(
        4104,
        json!({"api": api, "token": "wrong", "image": "ok"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![denied]).await.accepted, [4104]);
    let events = master.until_done(4104).await;
    let end = events.last().unwrap();
    assert!(
        end.message.contains(
            "POST /apis/batch/v1/namespaces/default/jobs: 401 Unauthorized: Unauthorized"
        ),
        "{}",
        end.message
    );
}

#[tokio::test]
async fn a_killed_or_timed_out_kubernetes_task_deletes_its_job() {
    let (api, cluster) = fake_api().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = k8s_task(
        4201,
        json!({"api": api, "token": TOKEN, "image": "sleep"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [4201]);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);
    let deadline = std::time::Instant::now() + WAIT;
    while !w
        .read_log(&t, 0, 0)
        .await
        .is_some_and(|l| String::from_utf8_lossy(&l).contains("sleeping"))
    {
        assert!(std::time::Instant::now() < deadline, "no log streamed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(w.kill(&t).await);
    let events = master.until_done(4201).await;
    assert_eq!(kinds(&events), [TaskEventKind::Killed]);
    {
        let c = cluster.lock().unwrap();
        assert_eq!(c.deleted.len(), 1);
        assert_eq!(c.deleted[0].0, "shoal-4201");
        assert_eq!(c.deleted[0].1["propagationPolicy"], "Background");
    }
    let log = String::from_utf8(w.read_log(&t, 0, 0).await.unwrap()).unwrap();
    assert!(log.contains("deleted job default/shoal-4201"), "{log}");

    let mut timed = k8s_task(
        4202,
        json!({"api": api, "token": TOKEN, "image": "sleep"}),
        &master.addr,
    );
    let mut def: Value = serde_json::from_str(&timed.definition_json).unwrap();
    def["timeout"] = json!("2s");
    def["timeout_strategy"] = json!("fail");
    timed.definition_json = def.to_string();
    assert_eq!(w.dispatch(vec![timed]).await.accepted, [4202]);
    let events = master.until_done(4202).await;
    let end = events.last().unwrap();
    assert_eq!(end.message, "timed out after 2s", "{events:?}");
    let c = cluster.lock().unwrap();
    assert_eq!(c.deleted.last().unwrap().0, "shoal-4202");
    assert!(c.jobs.is_empty());
}
