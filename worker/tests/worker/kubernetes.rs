//! Kubernetes tasks run by a real worker against a fake API server written here (axum on
//! 127.0.0.1:0) that implements only what the worker calls: create a Job, list pods by
//! `job-name` label, get a pod, a container's log (`follow=true`, `timestamps=true`,
//! `sinceTime` honoured to the second as a real API server does), get a Job, delete a Job.
//! No cluster is involved: the fake "runs" each container of the pod by its image name
//! (see [`script`]); init containers one after the other, then the others. A container
//! ends once its log was read to its end; some images cut their first log stream midway.

use super::*;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

const TOKEN: &str = "t0ken-secret";

#[derive(Default)]
struct Cluster {
    /// Jobs by name, as created.
    jobs: BTreeMap<String, Value>,
    /// Pod list calls per job, to show the pod Pending first.
    lists: BTreeMap<String, u32>,
    /// Containers (job, container) whose log was read to its end: they ended.
    ended: BTreeSet<(String, String)>,
    /// Log requests: job, container and `sinceTime`.
    reads: Vec<(String, String, Option<String>)>,
    /// Jobs whose pod is gone.
    gone: BTreeSet<String>,
    /// Delete calls: job name and body.
    deleted: Vec<(String, Value)>,
    /// Log streams of `sleep` pods, held open until their job is deleted.
    held: Vec<(String, mpsc::Sender<Result<String, std::io::Error>>)>,
}

type Shared = Arc<Mutex<Cluster>>;

/// How a container's first log stream ends before its log does.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// It does not: the whole log, then the stream ends.
    No,
    /// After this many lines and half the next, the connection breaks.
    Broken(usize),
    /// After this many lines the server ends the stream (an idle timeout).
    Closed(usize),
    /// After this many lines the connection breaks and the pod is gone.
    Vanish(usize),
}

/// What a container of this image prints (tenths of a second after 03:04:00, text), its
/// exit code and how its first stream ends.
fn script(image: &str) -> (Vec<(u32, &'static str)>, i64, Cut) {
    match image {
        "ok" => (
            vec![
                (51, "hello from the pod"),
                (52, "${setValue(rows=42)}"),
                (53, "the t0ken-secret is masked"),
            ],
            0,
            Cut::No,
        ),
        "fail3" => (vec![(51, "about to fail")], 3, Cut::No),
        "sleep" => (vec![(51, "sleeping until the job is deleted")], 0, Cut::No),
        "init" => (
            vec![(41, "preparing"), (42, "${setValue(prepared=yes)}")],
            0,
            Cut::No,
        ),
        // Two lines share a time, across the cut; the resumed stream starts at 05 again.
        "cut" => (
            vec![
                (51, "line 1"),
                (52, "line 2"),
                (52, "line 3, as old as line 2"),
                (58, "line 4"),
                (60, "line 5"),
                (65, "${setValue(app=done)}"),
            ],
            0,
            Cut::Broken(2),
        ),
        "idle" => (
            vec![
                (50, "side 1"),
                (55, "side 2"),
                (61, "side 3"),
                (62, "${setValue(side=done)}"),
            ],
            0,
            Cut::Closed(2),
        ),
        "vanish" => (vec![(51, "one"), (52, "two")], 0, Cut::Vanish(1)),
        _ => (Vec::new(), 0, Cut::No),
    }
}

/// A time as Kubernetes writes it (RFC 3339, nanoseconds, trailing zeros dropped).
fn stamp(tenths: u32) -> String {
    match tenths % 10 {
        0 => format!("2026-01-02T03:04:{:02}Z", tenths / 10),
        f => format!("2026-01-02T03:04:{:02}.{f}Z", tenths / 10),
    }
}

fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"))
}

fn unauthorized() -> HttpResponse {
    let body = json!({"kind": "Status", "message": "Unauthorized", "code": 401});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

fn status(code: StatusCode, message: String) -> HttpResponse {
    let body = json!({"kind": "Status", "message": message, "code": code.as_u16()});
    (code, Json(body)).into_response()
}

/// The pod spec of a job.
fn pod_spec(job: &Value) -> &Value {
    &job["spec"]["template"]["spec"]
}

/// The (name, image) of a pod spec's init containers, then of its containers.
fn containers(spec: &Value, list: &str) -> Vec<(String, String)> {
    let list = spec[list].as_array().cloned().unwrap_or_default();
    (list.iter())
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["image"].as_str().unwrap().to_string(),
            )
        })
        .collect()
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

/// The fake's pod of `job` as it is now: init containers run one after the other, then the
/// others together; the pod ends when they all ended.
fn pod(c: &Cluster, job: &str) -> Value {
    let spec = pod_spec(&c.jobs[job]);
    let lists = c.lists.get(job).copied().unwrap_or(0);
    let ended = |name: &str| c.ended.contains(&(job.to_string(), name.to_string()));
    let mut ready = lists >= 2;
    let mut failed = false;
    let mut status_of = |name: &str, image: &str, ready: bool| {
        let state = match image {
            "bad" => {
                json!({"waiting": {"reason": "ErrImagePull", "message": "pull access denied for bad"}})
            }
            _ if !ready => json!({"waiting": {"reason": "PodInitializing"}}),
            _ if ended(name) => {
                let (_, code, _) = script(image);
                failed |= code != 0;
                json!({"terminated": {"exitCode": code}})
            }
            _ => json!({"running": {}}),
        };
        json!({"name": name, "state": state})
    };
    let mut init = Vec::new();
    for (name, image) in containers(spec, "initContainers") {
        init.push(status_of(&name, &image, ready));
        ready &= ended(&name);
    }
    let main: Vec<Value> = containers(spec, "containers")
        .iter()
        .map(|(name, image)| status_of(name, image, ready))
        .collect();
    let all_ended = ready && main.iter().all(|s| s["state"].get("terminated").is_some());
    let phase = match (ready, all_ended, failed) {
        (true, true, true) => "Failed",
        (true, true, false) => "Succeeded",
        (true, false, _) => "Running",
        _ => "Pending",
    };
    json!({
        "metadata": {"name": format!("{job}-abcde"), "labels": {"job-name": job}},
        "spec": spec,
        "status": {"phase": phase, "initContainerStatuses": init, "containerStatuses": main},
    })
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
    if !c.jobs.contains_key(job) || c.gone.contains(job) {
        return Json(json!({"kind": "PodList", "items": []})).into_response();
    }
    *c.lists.entry(job.to_string()).or_default() += 1;
    Json(json!({"kind": "PodList", "items": [pod(&c, job)]})).into_response()
}

/// The job of a pod of the fake, while the pod is there.
fn job_of(c: &Cluster, pod: &str) -> Option<String> {
    let job = pod.strip_suffix("-abcde")?;
    (c.jobs.contains_key(job) && !c.gone.contains(job)).then(|| job.to_string())
}

async fn get_pod(
    State(c): State<Shared>,
    UrlPath((_ns, name)): UrlPath<(String, String)>,
    h: HeaderMap,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    let c = c.lock().unwrap();
    match job_of(&c, &name) {
        Some(job) => Json(pod(&c, &job)).into_response(),
        None => status(StatusCode::NOT_FOUND, format!("pods \"{name}\" not found")),
    }
}

async fn pod_log(
    State(c): State<Shared>,
    UrlPath((_ns, pod_name)): UrlPath<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> HttpResponse {
    if !authorized(&h) {
        return unauthorized();
    }
    assert_eq!(q.get("follow").map(String::as_str), Some("true"));
    assert_eq!(q.get("timestamps").map(String::as_str), Some("true"));
    let container = q.get("container").expect("a container named").clone();
    let since = q.get("sinceTime").cloned();
    let mut c = c.lock().unwrap();
    let Some(job) = job_of(&c, &pod_name) else {
        return status(
            StatusCode::NOT_FOUND,
            format!("pods \"{pod_name}\" not found"),
        );
    };
    let now = pod(&c, &job);
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|l| now["status"][l].as_array().cloned().unwrap_or_default());
    let state = statuses
        .into_iter()
        .find(|s| s["name"] == container.as_str())
        .expect("a container of the pod")["state"]
        .clone();
    if let Some(w) = state.get("waiting") {
        let message = format!(
            "container \"{container}\" in pod \"{pod_name}\" is waiting to start: {}",
            w["reason"]
        );
        return status(StatusCode::BAD_REQUEST, message);
    }
    let first = !c.reads.iter().any(|(j, n, _)| *j == job && *n == container);
    c.reads
        .push((job.clone(), container.clone(), since.clone()));
    let spec = pod_spec(&c.jobs[&job]);
    let all = [
        containers(spec, "initContainers"),
        containers(spec, "containers"),
    ]
    .concat();
    let image = all.into_iter().find(|(n, _)| *n == container).unwrap().1;
    let (lines, _, cut) = script(&image);
    // To the second, as the API server passes it on to the kubelet.
    let since_tenths = since.map_or(0, |s| {
        let seconds = s
            .strip_prefix("2026-01-02T03:04:")
            .expect("a time of the fake's");
        seconds[..2].parse::<u32>().unwrap() * 10
    });
    let text = |(at, line): &(u32, &str)| format!("{} {line}\n", stamp(*at));
    let lines: Vec<String> = lines
        .iter()
        .filter(|(at, _)| *at >= since_tenths)
        .map(text)
        .collect();
    let (tx, rx) = mpsc::channel(16);
    let cut = if first { cut } else { Cut::No };
    match (image.as_str(), cut) {
        ("sleep", _) => {
            tx.try_send(Ok(lines.concat())).unwrap();
            c.held.push((job, tx));
        }
        (_, Cut::No) => {
            tx.try_send(Ok(lines.concat())).unwrap();
            c.ended.insert((job, container));
        }
        (_, Cut::Closed(n)) => tx.try_send(Ok(lines[..n].concat())).unwrap(),
        (_, Cut::Broken(n) | Cut::Vanish(n)) => {
            let half = &lines[n][..lines[n].len() / 2];
            tx.try_send(Ok(lines[..n].concat() + half)).unwrap();
            if matches!(cut, Cut::Vanish(_)) {
                c.gone.insert(job);
            }
            // The error after the text is out: the connection breaks.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = tx.send(Err(std::io::Error::other("cut"))).await;
            });
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
        return status(
            StatusCode::NOT_FOUND,
            format!("jobs.batch \"{name}\" not found"),
        );
    };
    let mut job = job.clone();
    job["status"] = match pod(&c, &name)["status"]["phase"].as_str() {
        Some("Succeeded") => json!({"succeeded": 1}),
        Some("Failed") => json!({"failed": 1}),
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
        .route("/api/v1/namespaces/{ns}/pods/{pod}", get(get_pod))
        .route("/api/v1/namespaces/{ns}/pods/{pod}/log", get(pod_log))
        .with_state(cluster.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, cluster)
}

/// The event that ended a task that failed.
fn failure(events: &[TaskEvent]) -> &TaskEvent {
    let end = events.last().unwrap();
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{events:?}");
    end
}

/// Runs `t` to its end: its events and its log.
async fn run(w: &mut Setup, master: &mut MasterProc, t: &TaskSpec) -> (Vec<TaskEvent>, String) {
    let id = t.task_instance_id;
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [id]);
    let events = master.until_done(id).await;
    let log = String::from_utf8(w.read_log(t, 0, 0).await.unwrap()).unwrap();
    (events, log)
}

/// The lines the task's containers printed: the log without the worker's notes.
fn printed(log: &str) -> Vec<&str> {
    log.lines().filter(|l| !l.starts_with("[shoal] ")).collect()
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
    let (events, log) = run(&mut w, &mut master, &ok).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{log}"
    );
    assert_eq!(events[1].output.get("rows").map(String::as_str), Some("42"));
    assert!(log.contains("created job etl/shoal-4101"), "{log}");
    // One container: its lines as printed, timestamps off, not prefixed.
    assert_eq!(
        printed(&log),
        [
            "hello from the pod",
            "${setValue(rows=42)}",
            "the *** is masked"
        ],
        "{log}"
    );
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
    let (events, log) = run(&mut w, &mut master, &fail).await;
    let end = failure(&events);
    assert_eq!(end.exit_code, 3);
    assert_eq!(
        end.message,
        "pod shoal-4102-abcde failed: container 'main' exited with code 3"
    );
    assert_eq!(printed(&log), ["about to fail"], "{log}");

    // A pod that cannot pull its image fails the task with the reason.
    let bad = k8s_task(
        4103,
        json!({"api": api, "token": TOKEN, "image": "bad"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![bad]).await.accepted, [4103]);
    let events = master.until_done(4103).await;
    let end = failure(&events);
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

#[tokio::test]
async fn every_container_s_log_streams_and_a_cut_stream_goes_on_where_it_broke() {
    let (api, cluster) = fake_api().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    // An init container, then two that run together: `app`'s first stream breaks in the
    // middle of a line, `side`'s is ended by the server while the container runs.
    let t = k8s_task(
        4301,
        json!({"api": api, "token": TOKEN, "pod": {
            "initContainers": [{"name": "init", "image": "init"}],
            "containers": [{"name": "app", "image": "cut"}, {"name": "side", "image": "idle"}],
        }}),
        &master.addr,
    );
    let (events, log) = run(&mut w, &mut master, &t).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{log}"
    );
    let output = &events[1].output;
    for (k, v) in [("prepared", "yes"), ("app", "done"), ("side", "done")] {
        assert_eq!(output.get(k).map(String::as_str), Some(v), "{output:?}");
    }
    let lines = printed(&log);
    let of = |c: &str| -> Vec<&str> {
        let prefix = format!("[{c}] ");
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .collect()
    };
    // The init container's lines first; each container's once, in order, whole.
    assert_eq!(
        lines[..2],
        ["[init] preparing", "[init] ${setValue(prepared=yes)}"],
        "{log}"
    );
    assert_eq!(
        of("app"),
        [
            "line 1",
            "line 2",
            "line 3, as old as line 2",
            "line 4",
            "line 5",
            "${setValue(app=done)}"
        ],
        "{log}"
    );
    assert_eq!(
        of("side"),
        ["side 1", "side 2", "side 3", "${setValue(side=done)}"],
        "{log}"
    );
    assert_eq!(lines.len(), 2 + 6 + 4, "{log}");
    assert!(
        log.contains("[shoal] pod shoal-4301-abcde: streaming the logs of init containers 'init', then of containers 'app', 'side'\n"),
        "{log}"
    );
    assert!(
        log.contains("[shoal] the log stream of container 'app' broke: "),
        "{log}"
    );
    // Opened again from the last whole line's time (a stream after a container ended
    // reads its last lines).
    let c = cluster.lock().unwrap();
    let since = |n: &str| -> Vec<Option<&str>> {
        let reads = c
            .reads
            .iter()
            .filter(|(j, c, _)| j == "shoal-4301" && c == n);
        reads.map(|(_, _, s)| s.as_deref()).collect()
    };
    assert_eq!(since("init"), [None, Some("2026-01-02T03:04:04.2Z")]);
    assert_eq!(
        since("app"),
        [
            None,
            Some("2026-01-02T03:04:05.2Z"),
            Some("2026-01-02T03:04:06.5Z")
        ]
    );
    assert_eq!(
        since("side"),
        [
            None,
            Some("2026-01-02T03:04:05.5Z"),
            Some("2026-01-02T03:04:06.2Z")
        ]
    );
}

#[tokio::test]
async fn the_failed_container_is_named_and_a_pod_gone_mid_log_fails_the_task() {
    let (api, _cluster) = fake_api().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = k8s_task(
        4401,
        json!({"api": api, "token": TOKEN, "pod": {
            "containers": [{"name": "a", "image": "ok"}, {"name": "b", "image": "fail3"}],
        }}),
        &master.addr,
    );
    let (events, log) = run(&mut w, &mut master, &t).await;
    let end = failure(&events);
    assert_eq!(end.exit_code, 3);
    assert_eq!(
        end.message,
        "pod shoal-4401-abcde failed: container 'b' exited with code 3"
    );
    let mut lines = printed(&log);
    lines.sort();
    assert_eq!(
        lines,
        [
            "[a] ${setValue(rows=42)}",
            "[a] hello from the pod",
            "[a] the *** is masked",
            "[b] about to fail"
        ],
        "{log}"
    );

    // The stream breaks and the pod is gone: the lines read stand, the task fails saying so.
    let t = k8s_task(
        4402,
        json!({"api": api, "token": TOKEN, "image": "vanish"}),
        &master.addr,
    );
    let (events, log) = run(&mut w, &mut master, &t).await;
    let end = failure(&events);
    assert!(
        end.message
            .starts_with("the log of container 'main' of pod shoal-4402-abcde broke (")
            && end
                .message
                .ends_with("and the pod is gone: its lines after 2026-01-02T03:04:05.1Z are lost"),
        "{}",
        end.message
    );
    assert_eq!(printed(&log), ["one"], "{log}");
}
