//! The REST API against a real SQLite store, through the router (no network), except the
//! log endpoint and stop/pause, which talk gRPC to a fake worker or master on a real port.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use shoal_api_server::{ApiState, Auth, Limits, router};
use shoal_common::proto::master_server::{Master, MasterServer};
use shoal_common::proto::worker_server::{Worker, WorkerServer};
use shoal_common::proto::{
    ControlAction, ControlRequest, ControlResponse, DispatchRequest, DispatchResponse, KillRequest,
    KillResponse, ReadLogRequest, ReadLogResponse, ReportEventsRequest, ReportEventsResponse,
};
use shoal_common::start::{Scope, StartOptions};
use shoal_common::types::{CommandKind, Priority, TaskState, WorkflowState};
use shoal_store::{InstanceRow, InstanceUpdate, NewTaskInstance, Store, TaskUpdate, WriteBatch};
use tempfile::TempDir;
use tower::ServiceExt;

const DIAMOND: &str = "\
name: etl
params: { dt: 2026-01-01 }
tasks:
  - { name: a, type: shell, command: 'echo ${dt}' }
  - { name: b, type: noop, depends_on: [a] }
  - { name: c, type: noop, depends_on: [a] }
  - { name: d, type: noop, depends_on: [b, c] }
";

struct Api {
    app: Router,
    store: Store,
    _dir: TempDir,
}

struct Answer {
    status: StatusCode,
    content_type: String,
    headers: axum::http::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }

    fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .expect("an error message")
            .to_string()
    }
}

async fn api(token: Option<&str>) -> Api {
    api_with_limits(token, Limits::default()).await
}

async fn api_with_limits(token: Option<&str>, limits: Limits) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let state = ApiState {
        registry: None,
        secret: Default::default(),
        limits,
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
        store: store.clone(),
        auth: token.map_or(Auth::Off, |t| Auth::tokens(Some(t.into()))),
    };
    Api {
        app: router(state),
        store,
        _dir: dir,
    }
}

impl Api {
    /// `GET /projects` as (name, workflows) pairs.
    async fn projects(&self) -> Value {
        let list = self.get("/api/v1/projects").await.json();
        let pairs = list.as_array().unwrap().iter();
        pairs
            .map(|p| json!({"name": p["name"], "workflows": p["workflows"]}))
            .collect()
    }

    async fn call(&self, method: &str, uri: &str, bearer: Option<&str>, body: &str) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        if method != "GET" {
            // As the CLI sends: without auth, writes need it.
            let json = body.trim_start().is_empty() || body.trim_start().starts_with('{');
            let kind = if json {
                "application/json"
            } else {
                "application/yaml"
            };
            req = req.header(header::CONTENT_TYPE, kind);
        }
        if let Some(t) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Body::from(body.to_string())).unwrap();
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            content_type,
            headers,
            text: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    async fn get(&self, uri: &str) -> Answer {
        self.call("GET", uri, None, "").await
    }

    async fn post(&self, uri: &str, body: &str) -> Answer {
        self.call("POST", uri, None, body).await
    }
}

#[tokio::test]
async fn applying_creates_a_version_only_when_the_definition_changes() {
    let api = api(None).await;
    let url = "/api/v1/projects/default/workflows";

    let a = api.post(url, DIAMOND).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    assert_eq!(
        a.json(),
        json!({"project": "default", "name": "etl", "version": 1, "created": true})
    );

    let a = api.post(url, DIAMOND).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json()["version"], 1);
    assert_eq!(a.json()["created"], false);

    let changed = DIAMOND.replace("echo ${dt}", "echo changed ${dt}");
    let a = api.post(url, &changed).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    assert_eq!(a.json()["version"], 2);

    let latest = api.get("/api/v1/projects/default/workflows/etl").await;
    assert_eq!(latest.status, StatusCode::OK, "{}", latest.text);
    let latest = latest.json();
    assert_eq!(latest["version"], 2);
    assert_eq!(
        latest["definition"]["tasks"][0]["command"],
        "echo changed ${dt}"
    );
    assert_eq!(latest["definition"]["tasks"].as_array().unwrap().len(), 4);
    assert!(
        latest["created_at"].as_str().unwrap().ends_with('Z'),
        "{latest}"
    );

    let v1 = api
        .get("/api/v1/projects/default/workflows/etl?version=1")
        .await
        .json();
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["definition"]["tasks"][0]["command"], "echo ${dt}");

    let v9 = api
        .get("/api/v1/projects/default/workflows/etl?version=9")
        .await;
    assert_eq!(v9.status, StatusCode::NOT_FOUND);
    assert!(v9.error().contains("no version 9"), "{}", v9.text);

    let list = api.get(url).await.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["name"], "etl");
    assert_eq!(list[0]["latest_version"], 2);

    let missing = api.get("/api/v1/projects/default/workflows/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.error().contains("'default/nope' does not exist"),
        "{}",
        missing.text
    );
}

#[tokio::test]
async fn json_definitions_take_the_project_from_the_url() {
    let api = api(None).await;
    let def = json!({"name": "j", "tasks": [{"name": "x", "type": "noop"}]}).to_string();
    let a = api.post("/api/v1/projects/analytics/workflows", &def).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    assert_eq!(a.json()["project"], "analytics");
    assert_eq!(
        api.get("/api/v1/projects/analytics/workflows/j")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        api.get("/api/v1/projects/default/workflows/j").await.status,
        StatusCode::NOT_FOUND
    );

    let other = format!("project: sales\n{DIAMOND}");
    let a = api
        .post("/api/v1/projects/analytics/workflows", &other)
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.error().contains("'sales'") && a.error().contains("'analytics'"),
        "{}",
        a.text
    );
}

#[tokio::test]
async fn a_project_named_like_a_path_is_refused_and_nothing_is_stored() {
    let api = api(None).await;
    for project in ["%2e%2e", ".", "-x"] {
        let a = api
            .post(&format!("/api/v1/projects/{project}/workflows"), DIAMOND)
            .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{project}: {}", a.text);
        assert!(a.error().contains("invalid project name"), "{}", a.text);
    }
    let projects = api.projects().await;
    assert_eq!(projects, json!([{"name": "default", "workflows": 0}]));
}

#[tokio::test]
async fn invalid_definitions_are_refused_and_nothing_is_stored() {
    let api = api(None).await;
    let url = "/api/v1/projects/default/workflows";

    let cycle = "name: loop\ntasks:\n- {name: a, type: noop, depends_on: [b]}\n- {name: b, type: noop, depends_on: [a]}\n";
    let a = api.post(url, cycle).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert_eq!(a.error(), "tasks form a cycle: a -> b -> a");
    assert_eq!(
        api.get("/api/v1/projects/default/workflows/loop")
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let unknown = "name: dangling\ntasks:\n- {name: a, type: noop, depends_on: [ghost]}\n";
    let a = api.post(url, unknown).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.error().contains("task 'a' depends on 'ghost'"),
        "{}",
        a.text
    );

    let a = api.post(url, "{{{ not yaml").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.error()
            .starts_with("definition is not valid YAML or JSON"),
        "{}",
        a.text
    );

    assert_eq!(api.get(url).await.json(), json!([]));
}

#[tokio::test]
async fn starting_writes_a_pending_command() {
    let api = api(None).await;
    let a = api
        .post("/api/v1/projects/default/workflows/etl/start", "")
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.error().contains("apply it first"), "{}", a.text);

    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    let body = json!({"params": {"dt": "2026-02-01", "n": 3}, "priority": "high"}).to_string();
    let a = api
        .post("/api/v1/projects/default/workflows/etl/start", &body)
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let id = a.json()["command_id"].as_i64().unwrap();

    let c = api.get(&format!("/api/v1/commands/{id}")).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.text);
    assert_eq!(
        c.json(),
        json!({"id": id, "status": "pending", "workflow_instance_id": null, "error": null})
    );

    // The command carries the parameters (stringified) and the priority to the master.
    let claimed = api.store.claim_commands("m1:5678", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let inst = &claimed[0].instance;
    assert_eq!(inst.params["dt"], "2026-02-01");
    assert_eq!(inst.params["n"], "3");
    assert_eq!(inst.priority, Priority::High);
    assert_eq!(inst.version, 1);

    let c = api.get(&format!("/api/v1/commands/{id}")).await.json();
    assert_eq!(c["status"], "done");
    assert_eq!(c["workflow_instance_id"], inst.id);

    // An empty body and a bare `{}` both mean "no parameters".
    let a = api
        .post("/api/v1/projects/default/workflows/etl/start", "{}")
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);

    assert_eq!(
        api.get("/api/v1/commands/999999").await.status,
        StatusCode::NOT_FOUND
    );

    // A chosen version, not the latest: a run of the old definition.
    let v2 = DIAMOND.replace("- { name: d,", "- { name: e, type: noop }\n  - { name: d,");
    let a = api.post("/api/v1/projects/default/workflows", &v2).await;
    assert_eq!(a.json()["version"], 2, "{}", a.text);
    let a = api
        .post(
            "/api/v1/projects/default/workflows/etl/start",
            r#"{"version": 1}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(a.json()["version"], 1);
    let old_run = a.json()["command_id"].as_i64().unwrap();
    let a = api
        .post(
            "/api/v1/projects/default/workflows/etl/start",
            r#"{"version": 7}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);
    assert_eq!(
        a.error(),
        "workflow 'default/etl' has no version 7 (latest is 2)"
    );
    let claimed = api.store.claim_commands("m1:5678", 10, 10).await.unwrap();
    let run = claimed
        .iter()
        .find(|c| c.instance.command_id == old_run)
        .unwrap();
    assert_eq!(
        run.instance.version, 1,
        "the run pins the version asked for"
    );
}

#[tokio::test]
async fn bad_start_requests_are_refused() {
    let api = api(None).await;
    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    let start = "/api/v1/projects/default/workflows/etl/start";

    let a = api.post(start, "{\"params\": {\"dt\": ").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.error()
            .starts_with("invalid JSON body: EOF while parsing"),
        "{}",
        a.text
    );

    let a = api.post(start, r#"{"params": {"bad key": "v"}}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("'bad key'"), "{}", a.text);

    let a = api.post(start, r#"{"params": {"k": {"nested": 1}}}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("parameter 'k'"), "{}", a.text);

    let a = api.post(start, r#"{"priority": "urgent"}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("urgent"), "{}", a.text);

    let a = api.post(start, r#"{"param": {"k": "v"}}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("unknown field `param`"), "{}", a.text);

    let a = api.get("/api/v1/commands/abc").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.content_type.starts_with("application/json"));

    // Nothing was written by any of them.
    assert!(
        api.store
            .claim_commands("m1:5678", 1, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_token_guards_reads_and_writes_but_not_health_or_the_document() {
    let api = api(Some("s3cret")).await;
    let url = "/api/v1/projects/default/workflows";

    let a = api.call("POST", url, None, DIAMOND).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        a.json(),
        json!({"error": "missing or invalid bearer token"})
    );
    let a = api.call("POST", url, Some("guess"), DIAMOND).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    let a = api
        .call(
            "POST",
            "/api/v1/projects/default/workflows/etl/start",
            None,
            "",
        )
        .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    let a = api.call("POST", "/api/v1/instances/1/stop", None, "").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    let a = api.call("POST", url, Some("s3cret"), DIAMOND).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);

    // Reads too: task logs carry whatever tasks print.
    for read in [
        url,
        "/api/v1/instances",
        "/api/v1/task-instances/1/log",
        "/api/v1/cluster",
    ] {
        let a = api.get(read).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{read}: {}", a.text);
        let a = api.call("GET", read, Some("guess"), "").await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{read}: {}", a.text);
    }
    let a = api.call("GET", url, Some("s3cret"), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(api.get("/api/v1/openapi.json").await.status, StatusCode::OK);
    let h = api.get("/api/v1/health").await;
    assert_eq!(
        (h.status, h.json()),
        (StatusCode::OK, json!({"status": "ok"}))
    );
}

#[tokio::test]
async fn oversized_bodies_and_unknown_routes_get_json_errors() {
    let api = api(None).await;
    let sized = |mib: usize| {
        let text = "x".repeat(mib * 1024 * 1024);
        format!("name: big\ndescription: '{text}'\ntasks:\n- {{name: t, type: noop}}\n")
    };
    // Within the default limit of 8 MiB, a large definition is stored.
    let a = api
        .post("/api/v1/projects/default/workflows", &sized(6))
        .await;
    assert_eq!(
        a.status,
        StatusCode::CREATED,
        "{}",
        &a.text[..200.min(a.text.len())]
    );
    let a = api
        .post("/api/v1/projects/default/workflows", &sized(20))
        .await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        a.error(),
        "request body is larger than the limit of 8388608 bytes (the server's --max-body-bytes)"
    );
    let versions = api
        .get("/api/v1/projects/default/workflows/big/versions")
        .await;
    assert_eq!(
        versions.json().as_array().unwrap().len(),
        1,
        "nothing stored"
    );

    let a = api.get("/api/v1/nope").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.error().contains("/api/v1/nope"), "{}", a.text);

    let a = api.call("DELETE", "/api/v1/instances", None, "").await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(a.error().contains("DELETE"), "{}", a.text);
}

#[tokio::test]
async fn a_definition_with_more_tasks_than_the_limit_is_refused() {
    let limits = Limits {
        tasks: 3,
        ..Limits::default()
    };
    let api = api_with_limits(None, limits).await;
    for uri in [
        "/api/v1/projects/default/validate",
        "/api/v1/projects/default/workflows",
    ] {
        let a = api.post(uri, DIAMOND).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(
            a.error(),
            "workflow 'etl' has 4 tasks; this server takes at most 3 (its --max-tasks)"
        );
    }
    let a = api.get("/api/v1/projects/default/workflows").await;
    assert_eq!(a.json(), json!([]));
}

/// A "billion laughs" of the pentest: 361 KB of YAML whose 5,000-item `depends_on` is
/// reused by 8,000 tasks through an alias stands for 40 million names (it took 28.8 s and
/// 6.6 GB, and answered 160 MB). It is refused before it is built, with the limit named.
#[tokio::test]
async fn a_definition_whose_aliases_expand_past_the_body_limit_is_refused() {
    let api = api(None).await;
    let deps: Vec<String> = (0..5000).map(|i| format!("d{i}")).collect();
    let mut yaml = format!(
        "name: laughs\ntasks:\n  - {{name: t0, type: noop, depends_on: &deps [{}]}}\n",
        deps.join(", ")
    );
    for i in 1..8000 {
        yaml.push_str(&format!(
            "  - {{name: t{i}, type: noop, depends_on: *deps}}\n"
        ));
    }
    assert!(
        yaml.len() < Limits::default().body_bytes / 10,
        "{}",
        yaml.len()
    );
    for uri in [
        "/api/v1/projects/default/validate",
        "/api/v1/projects/default/workflows",
    ] {
        let a = api.post(uri, &yaml).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(
            a.error(),
            "definition is larger than 8388608 bytes once its YAML aliases (*name) are \
             expanded: repeat less through aliases, or raise the api-server's --max-body-bytes"
        );
    }
    // Aliases that stay within the limit are fine.
    let shared = "name: shared\ntasks:\n  - {name: a, type: noop}\n  - {name: b, type: noop, depends_on: &up [a]}\n  - {name: c, type: noop, depends_on: *up}\n";
    let a = api.post("/api/v1/projects/default/validate", shared).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json()["tasks"][2]["depends_on"], json!(["a"]));
}

#[tokio::test]
async fn instances_are_listed_filtered_and_shown_with_their_tasks() {
    let api = api(None).await;
    assert_eq!(api.get("/api/v1/instances").await.json(), json!([]));
    let a = api.get("/api/v1/instances?state=done").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.error().contains("running") && a.error().contains("success"),
        "{}",
        a.text
    );
    let a = api.get("/api/v1/instances?limit=0").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        api.get("/api/v1/instances/42").await.status,
        StatusCode::NOT_FOUND
    );

    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    api.post(
        "/api/v1/projects/default/workflows/etl/start",
        r#"{"params":{"dt":"x"}}"#,
    )
    .await;
    let claimed = api.store.claim_commands("m1:5678", 1, 10).await.unwrap();
    let inst = &claimed[0].instance;
    let (a_id, b_id) = add_tasks(&api.store, inst.id, Some("w1:1234")).await;

    let list = api
        .get("/api/v1/instances?workflow=etl&limit=5")
        .await
        .json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], inst.id);
    assert_eq!(list[0]["workflow"], "etl");
    assert_eq!(list[0]["state"], inst.state.as_str());
    let none = api.get("/api/v1/instances?workflow=other").await.json();
    assert_eq!(none, json!([]));
    let none = api.get("/api/v1/instances?state=success").await.json();
    assert_eq!(none, json!([]), "the instance is not finished");

    let shown = api.get(&format!("/api/v1/instances/{}", inst.id)).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text);
    let shown = shown.json();
    assert_eq!(shown["project"], "default");
    assert_eq!(shown["version"], 1);
    assert_eq!(shown["params"], json!({"dt": "x"}));
    assert_eq!(shown["priority"], "medium");
    let tasks = shown["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{shown}");
    assert_eq!(tasks[0]["id"], a_id);
    assert_eq!(tasks[0]["name"], "a");
    assert_eq!(tasks[0]["type"], "shell");
    assert_eq!(tasks[0]["state"], "success");
    assert_eq!(tasks[0]["worker"], "w1:1234");
    assert_eq!(tasks[0]["exit_code"], 0);
    assert!(
        tasks[0]["ended_at"].as_str().unwrap().starts_with("20"),
        "{shown}"
    );
    assert_eq!(tasks[1]["state"], "submitted");
    assert_eq!(tasks[1]["worker"], Value::Null);
    assert_eq!(tasks[1]["started_at"], Value::Null);

    let t = api
        .get(&format!("/api/v1/task-instances/{b_id}"))
        .await
        .json();
    assert_eq!(
        (t["name"].clone(), t["workflow_instance_id"].clone()),
        (json!("b"), json!(inst.id))
    );
    assert_eq!(
        api.get("/api/v1/task-instances/777").await.status,
        StatusCode::NOT_FOUND
    );
}

/// Adds task `a` (finished on `worker`) and task `b` (not dispatched yet) to an instance.
async fn add_tasks(store: &Store, instance: i64, worker: Option<&str>) -> (i64, i64) {
    let new = |name: &str, task_type: &str| NewTaskInstance {
        workflow_instance_id: instance,
        run: 1,
        name: name.into(),
        task_type: task_type.into(),
        attempt: 1,
        priority: Priority::Medium,
        worker_group: "default".into(),
        state: TaskState::Submitted,
        submitted_at: 1_767_225_600_000,
        task_group: None,
        task_group_priority: 0,
        message: None,
    };
    let batch = WriteBatch {
        new_tasks: vec![new("a", "shell"), new("b", "noop")],
        ..Default::default()
    };
    let ids = store.write_batch(&batch).await.unwrap().new_task_ids;
    let done = TaskUpdate {
        worker: worker.map(Into::into),
        started_at: Some(1_767_225_601_000),
        ended_at: Some(1_767_225_602_000),
        exit_code: Some(0),
        ..TaskUpdate::state(ids[0], TaskState::Success)
    };
    let batch = WriteBatch {
        task_updates: vec![done],
        ..Default::default()
    };
    store.write_batch(&batch).await.unwrap();
    (ids[0], ids[1])
}

/// Answers `ReadLog` with a fixed text for attempt 1 of any task and "not found" otherwise.
struct FakeWorker;

const LOG: &str = "line 1\nline 2\n";

#[tonic::async_trait]
impl Worker for FakeWorker {
    async fn dispatch(
        &self,
        _: tonic::Request<DispatchRequest>,
    ) -> Result<tonic::Response<DispatchResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn kill(
        &self,
        _: tonic::Request<KillRequest>,
    ) -> Result<tonic::Response<KillResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn probe(
        &self,
        _: tonic::Request<shoal_common::proto::ProbeRequest>,
    ) -> Result<tonic::Response<shoal_common::proto::ProbeResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn read_log(
        &self,
        req: tonic::Request<ReadLogRequest>,
    ) -> Result<tonic::Response<ReadLogResponse>, tonic::Status> {
        let req = req.into_inner();
        let found = req.attempt == 1;
        let start = (req.offset as usize).min(LOG.len());
        let end = (start + req.limit as usize).min(LOG.len());
        let content = if found {
            LOG.as_bytes()[start..end].to_vec()
        } else {
            Vec::new()
        };
        Ok(tonic::Response::new(ReadLogResponse { content, found }))
    }
}

#[tokio::test]
async fn logs_are_read_from_the_worker_that_ran_the_task() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let worker_addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(WorkerServer::new(FakeWorker))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let api = api(None).await;
    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    api.post("/api/v1/projects/default/workflows/etl/start", "")
        .await;
    api.post("/api/v1/projects/default/workflows/etl/start", "")
        .await;
    let claimed = api.store.claim_commands("m1:5678", 1, 10).await.unwrap();
    let (i1, i2) = (&claimed[0].instance, &claimed[1].instance);
    let (ran, waiting) = add_tasks(&api.store, i1.id, Some(&worker_addr)).await;
    // A worker address where nothing listens.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let (on_dead, _) = add_tasks(&api.store, i2.id, Some(&dead_addr)).await;

    let log = api.get(&format!("/api/v1/task-instances/{ran}/log")).await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.text);
    assert!(
        log.content_type.starts_with("text/plain"),
        "{}",
        log.content_type
    );
    assert_eq!(log.text, LOG);

    let log = api
        .get(&format!("/api/v1/task-instances/{ran}/log?offset=7"))
        .await;
    assert_eq!(log.text, "line 2\n");

    let a = api
        .get(&format!("/api/v1/task-instances/{waiting}/log"))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.error()
            .contains(&format!("task instance {waiting} has not started")),
        "{}",
        a.text
    );

    let a = api
        .get(&format!("/api/v1/task-instances/{on_dead}/log"))
        .await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.text);
    assert!(a.error().contains(&dead_addr), "{}", a.text);

    let a = api.get("/api/v1/task-instances/999/log").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

/// Applies DIAMOND, starts it with `body` and lets a master at `owner` claim the command:
/// a running instance driven by `owner`.
async fn running_instance(api: &Api, owner: &str, body: &str) -> InstanceRow {
    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    let a = api
        .post("/api/v1/projects/default/workflows/etl/start", body)
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let mut claimed = api.store.claim_commands(owner, 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let inst = claimed.remove(0).instance;
    assert_eq!(inst.state, WorkflowState::Running);
    inst
}

/// Ends an instance in `state`, as its master would.
async fn finish(store: &Store, inst: &InstanceRow, state: WorkflowState) {
    let batch = WriteBatch {
        instance_updates: vec![InstanceUpdate {
            id: inst.id,
            owner_epoch: inst.owner_epoch,
            state,
            ended_at: Some(1_767_225_700_000),
        }],
        ..Default::default()
    };
    let written = store.write_batch(&batch).await.unwrap();
    assert!(written.fenced_instances.is_empty());
}

/// An address where nothing listens.
fn dead_addr() -> String {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    dead.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn actions_check_the_instance_and_its_state() {
    let api = api(None).await;
    for action in ["stop", "resume", "resubmit-failed"] {
        let a = api
            .post(&format!("/api/v1/instances/42/{action}"), "")
            .await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{action}: {}", a.text);
        assert_eq!(a.error(), "workflow instance 42 does not exist");
    }

    let inst = running_instance(&api, "m1:5678", "").await;
    let id = inst.id;
    let a = api.post(&format!("/api/v1/instances/{id}/kill"), "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.error().contains("'kill'")
            && a.error()
                .contains("stop, pause, resume, rerun, resubmit-failed"),
        "{}",
        a.text
    );
    let a = api.get(&format!("/api/v1/instances/{id}/stop")).await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{}", a.text);

    // Recovery commands only apply to ended runs.
    let a = api.post(&format!("/api/v1/instances/{id}/rerun"), "").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.error().contains("is running"), "{}", a.text);

    finish(&api.store, &inst, WorkflowState::Success).await;
    let a = api
        .post(&format!("/api/v1/instances/{id}/resume"), "")
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert_eq!(
        a.error(),
        format!("workflow instance {id} is success; only a paused instance can be resumed")
    );
    let a = api
        .post(&format!("/api/v1/instances/{id}/resubmit-failed"), "")
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.error().contains("is success"), "{}", a.text);

    // Stop and pause only apply to running ones; the master is not asked.
    let a = api.post(&format!("/api/v1/instances/{id}/stop"), "").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert_eq!(
        a.error(),
        format!(
            "workflow instance {id} is success; only a running or pausing instance can be stopped"
        )
    );
    let a = api.post(&format!("/api/v1/instances/{id}/pause"), "").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(
        a.error()
            .ends_with("is success; only a running instance can be paused"),
        "{}",
        a.text
    );

    // A finished run can be rerun.
    let a = api.post(&format!("/api/v1/instances/{id}/rerun"), "").await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(a.json()["id"], id);
    assert_eq!(a.json()["action"], "rerun");
    let claimed = api.store.claim_commands("m2:5678", 2, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].kind, CommandKind::Rerun);
    assert_eq!(claimed[0].instance.id, id);
    assert_eq!(claimed[0].instance.run, 2);
}

#[tokio::test]
async fn resubmitting_a_failed_instance_writes_one_command() {
    let api = api(None).await;
    let inst = running_instance(
        &api,
        "m1:5678",
        r#"{"params":{"dt":"x"},"priority":"high"}"#,
    )
    .await;
    let id = inst.id;
    finish(&api.store, &inst, WorkflowState::Failure).await;

    let a = api
        .post(&format!("/api/v1/instances/{id}/resubmit-failed"), "")
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let command_id = a.json()["command_id"].as_i64().unwrap();
    assert_eq!(
        a.json(),
        json!({"command_id": command_id, "id": id, "action": "resubmit-failed"})
    );
    let c = api.get(&format!("/api/v1/commands/{command_id}")).await;
    assert_eq!(c.json()["status"], "pending", "{}", c.text);

    // A second click while the first is pending is refused (either spelling).
    let a = api
        .post(&format!("/api/v1/instances/{id}/resubmit_failed"), "")
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.error().contains("already pending"), "{}", a.text);

    // The command names the instance; the claim takes the instance over and re-points it.
    let claimed = api.store.claim_commands("m2:5678", 2, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "one command only");
    let c = &claimed[0];
    assert_eq!(c.kind, CommandKind::ResubmitFailed);
    assert_eq!(c.instance.id, id);
    assert_eq!(c.instance.command_id, command_id);
    assert_eq!(c.instance.params["dt"], "x");
    assert_eq!(c.instance.priority, Priority::High);
    assert_eq!(c.instance.owner.as_deref(), Some("m2:5678"));
    let c = api.get(&format!("/api/v1/commands/{command_id}")).await;
    assert_eq!(
        c.json(),
        json!({"id": command_id, "status": "done", "workflow_instance_id": id, "error": null})
    );
}

#[tokio::test]
async fn stop_on_an_unreachable_master_says_failover_will_take_over() {
    let api = api(None).await;
    let dead = dead_addr();
    let inst = running_instance(&api, &dead, "").await;
    let a = api
        .post(&format!("/api/v1/instances/{}/stop", inst.id), "")
        .await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    assert!(
        a.error().contains(&dead) && a.error().contains("failover"),
        "{}",
        a.text
    );
}

/// Drives one instance: stops it (answering ready_stop), refuses to pause it, and does not
/// know any other.
struct FakeMaster {
    drives: i64,
}

#[tonic::async_trait]
impl Master for FakeMaster {
    async fn report_events(
        &self,
        _: tonic::Request<ReportEventsRequest>,
    ) -> Result<tonic::Response<ReportEventsResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }

    async fn control(
        &self,
        req: tonic::Request<ControlRequest>,
    ) -> Result<tonic::Response<ControlResponse>, tonic::Status> {
        let req = req.into_inner();
        if req.workflow_instance_id != self.drives {
            return Err(tonic::Status::not_found("not driven here"));
        }
        match req.action() {
            ControlAction::Stop => Ok(tonic::Response::new(ControlResponse {
                state: "ready_stop".into(),
            })),
            _ => Err(tonic::Status::failed_precondition(
                "workflow instance is stopping; it cannot be paused",
            )),
        }
    }
}

#[tokio::test]
async fn stop_and_pause_are_asked_of_the_master_driving_the_instance() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let master = listener.local_addr().unwrap().to_string();
    let api = api(None).await;
    let driven = running_instance(&api, &master, "").await;
    let lost = running_instance(&api, &master, "").await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MasterServer::new(FakeMaster { drives: driven.id }))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let a = api
        .post(&format!("/api/v1/instances/{}/stop", driven.id), "")
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(
        a.json(),
        json!({"id": driven.id, "action": "stop", "state": "ready_stop"})
    );

    let a = api
        .post(&format!("/api/v1/instances/{}/pause", driven.id), "")
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert_eq!(
        a.error(),
        "workflow instance is stopping; it cannot be paused"
    );

    let a = api
        .post(&format!("/api/v1/instances/{}/stop", lost.id), "")
        .await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    assert!(
        a.error().contains("no longer drives") && a.error().contains("failover"),
        "{}",
        a.text
    );
}

#[tokio::test]
async fn start_options_are_checked_and_carried_to_the_instance() {
    let api = api(None).await;
    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    let start = "/api/v1/projects/default/workflows/etl/start";

    let a = api.post(start, r#"{"scope": "only"}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert!(a.error().contains("from_task"), "{}", a.text);

    let a = api.post(start, r#"{"from_task": "ghost"}"#).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert_eq!(
        a.error(),
        "from_task 'ghost' is not a task of workflow 'default/etl' (version 1)"
    );

    let a = api
        .post(start, r#"{"from_task": "b", "scope": "sideways"}"#)
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert!(a.error().contains("sideways"), "{}", a.text);
    assert!(
        api.store
            .claim_commands("m1:5678", 1, 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing written"
    );

    let body = r#"{"from_task": "b", "scope": "upstream", "dry_run": true}"#;
    let inst = running_instance(&api, "m1:5678", body).await;
    let expected = StartOptions {
        dry_run: true,
        from_task: Some("b".into()),
        scope: Some(Scope::Upstream),
        ..Default::default()
    };
    assert_eq!(inst.options, expected);
    add_tasks(&api.store, inst.id, None).await;
    let shown = api
        .get(&format!("/api/v1/instances/{}", inst.id))
        .await
        .json();
    assert_eq!(
        shown["options"],
        json!({"dry_run": true, "from_task": "b", "scope": "upstream"})
    );
    assert_eq!(shown["run"], 1);
    assert_eq!(shown["tasks"][0]["run"], 1);

    let plain = running_instance(&api, "m1:5678", "").await;
    let listed = api.get("/api/v1/instances").await.json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == plain.id)
        .unwrap();
    assert_eq!(row["options"], json!({}));
}

#[tokio::test]
async fn task_groups_and_alert_channels_are_guarded_by_the_token() {
    let api = api(Some("s3cret")).await;
    let group = r#"{"name": "g", "slots": 2}"#;
    let channel = r#"{"name": "ops", "type": "log"}"#;
    for (method, uri, body) in [
        ("POST", "/api/v1/task-groups", group),
        ("DELETE", "/api/v1/task-groups/g", ""),
        ("POST", "/api/v1/alert-channels", channel),
        ("DELETE", "/api/v1/alert-channels/ops", ""),
    ] {
        let a = api.call(method, uri, None, body).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{method} {uri}");
    }
    let a = api
        .call("POST", "/api/v1/task-groups", Some("s3cret"), group)
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let a = api
        .call(
            "POST",
            "/api/v1/task-groups",
            Some("s3cret"),
            r#"{"name": "h", "slots": 1, "colour": 1}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert!(a.text.contains("colour"), "{}", a.text);
    let groups = api
        .call("GET", "/api/v1/task-groups", Some("s3cret"), "")
        .await
        .json();
    assert_eq!(
        (
            groups[0]["name"].as_str(),
            groups[0]["slots"].as_i64(),
            groups[0]["in_use"].as_i64()
        ),
        (Some("g"), Some(2), Some(0))
    );
    let a = api
        .call("DELETE", "/api/v1/task-groups/g", Some("s3cret"), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let a = api
        .call("DELETE", "/api/v1/task-groups/g", Some("s3cret"), "")
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);

    let read = |uri: &'static str| api.call("GET", uri, Some("s3cret"), "");
    assert_eq!(read("/api/v1/alerts").await.json(), json!([]));
    let a = read("/api/v1/alerts?state=lost").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.text.contains("pending, sent or failed"), "{}", a.text);
}

// ---- what the web UI reads ----

/// `n` runs of a one-task `workflow` (applied first), claimed one at a time a few
/// milliseconds apart so that their created_at differ; oldest first.
async fn runs(api: &Api, project: &str, workflow: &str, n: usize) -> Vec<InstanceRow> {
    let def = format!("name: {workflow}\ntasks:\n- {{name: a, type: noop}}\n");
    let a = api
        .post(&format!("/api/v1/projects/{project}/workflows"), &def)
        .await;
    assert!(a.status.is_success(), "{}", a.text);
    let mut out = Vec::new();
    for _ in 0..n {
        let url = format!("/api/v1/projects/{project}/workflows/{workflow}/start");
        assert_eq!(api.post(&url, "").await.status, StatusCode::ACCEPTED);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        let mut claimed = api.store.claim_commands("m1:5678", 1, 10).await.unwrap();
        out.push(claimed.remove(0).instance);
    }
    out
}

fn ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect()
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[tokio::test]
async fn instances_are_paged_by_offset_and_time_with_the_total_in_a_header() {
    let api = api(None).await;
    let a = api.get("/api/v1/instances").await;
    assert_eq!(a.headers["x-total-count"], "0");
    let r = runs(&api, "default", "etl", 5).await;
    let page = |q: String| {
        let api = &api;
        async move {
            let a = api.get(&format!("/api/v1/instances?{q}")).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.text);
            let total: i64 = a.headers["x-total-count"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            (ids(&a.json()), total)
        }
    };
    assert_eq!(
        page(String::new()).await,
        (vec![r[4].id, r[3].id, r[2].id, r[1].id, r[0].id], 5)
    );
    assert_eq!(
        page("limit=2&offset=2".into()).await,
        (vec![r[2].id, r[1].id], 5)
    );
    assert_eq!(page("offset=10".into()).await, (vec![], 5));
    // from is inclusive, to exclusive.
    let range = format!(
        "from={}&to={}",
        rfc3339(r[1].created_at),
        rfc3339(r[3].created_at)
    );
    assert_eq!(page(range.clone()).await, (vec![r[2].id, r[1].id], 2));
    assert_eq!(
        page(format!("{range}&limit=1&offset=1")).await,
        (vec![r[1].id], 2)
    );
    // Any offset: the same instant in +02:00.
    let since = chrono::DateTime::from_timestamp_millis(r[3].created_at)
        .unwrap()
        .with_timezone(&chrono::FixedOffset::east_opt(7200).unwrap())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
        .replace('+', "%2B");
    assert_eq!(
        page(format!("from={since}")).await,
        (vec![r[4].id, r[3].id], 2)
    );
    assert_eq!(page(format!("{range}&workflow=other")).await, (vec![], 0));

    for (bad, says) in [
        ("offset=-1", "offset '-1'"),
        ("offset=x", "offset 'x'"),
        ("from=yesterday", "from 'yesterday'"),
        ("to=2026-13-01T00:00:00Z", "to '2026-13-01T00:00:00Z'"),
    ] {
        let a = api.get(&format!("/api/v1/instances?{bad}")).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(a.error().contains(says), "{bad}: {}", a.text);
    }
}

#[tokio::test]
async fn projects_are_listed_with_their_workflow_counts_and_default_always() {
    let api = api(None).await;
    assert_eq!(
        api.projects().await,
        json!([{"name": "default", "workflows": 0}])
    );
    for (project, name) in [
        ("sales", "a"),
        ("sales", "b"),
        ("analytics", "a"),
        ("sales", "a"),
    ] {
        let def = format!("name: {name}\ntasks:\n- {{name: t, type: noop}}\n");
        let url = format!("/api/v1/projects/{project}/workflows");
        assert!(api.post(&url, &def).await.status.is_success());
    }
    assert_eq!(
        api.projects().await,
        json!([
            {"name": "analytics", "workflows": 1},
            {"name": "default", "workflows": 0},
            {"name": "sales", "workflows": 2},
        ])
    );
    api.post("/api/v1/projects/default/workflows", DIAMOND)
        .await;
    assert_eq!(
        api.projects().await[1],
        json!({"name": "default", "workflows": 1})
    );
}

#[tokio::test]
async fn the_workflow_list_carries_each_schedule_and_last_run() {
    let api = api(None).await;
    let url = "/api/v1/projects/default/workflows";
    api.post(url, DIAMOND).await;
    let r = runs(&api, "default", "report", 2).await;
    finish(&api.store, &r[1], WorkflowState::Failure).await;
    runs(&api, "other", "report", 1).await;
    let a = api
        .post(
            "/api/v1/projects/default/workflows/etl/schedules",
            r#"{"cron": "30 2 * * *", "timezone": "Europe/Berlin"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let schedule = a.json();

    let list = api.get(url).await.json();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    let etl = &list[0];
    assert_eq!(etl["name"], "etl");
    assert_eq!(etl["latest_version"], 1);
    assert!(etl["updated_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(etl["last_run"], Value::Null);
    assert_eq!(
        etl["schedule"],
        json!({
            "id": schedule["id"],
            "cron": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "enabled": true,
            "next_fire": schedule["next_fire"],
        })
    );
    assert!(
        etl["schedule"]["next_fire"]
            .as_str()
            .unwrap()
            .contains("T02:30:00"),
        "{etl}"
    );
    let report = &list[1];
    assert_eq!(report["schedule"], Value::Null);
    assert_eq!(
        report["last_run"],
        json!({
            "id": r[1].id,
            "state": "failure",
            "created_at": rfc3339(r[1].created_at),
            "ended_at": "2026-01-01T00:01:40.000Z",
        })
    );
    // A disabled schedule has no next fire.
    let id = schedule["id"].as_i64().unwrap();
    api.post(
        &format!("/api/v1/projects/default/workflows/etl/schedules/{id}/disable"),
        "",
    )
    .await;
    let etl = &api.get(url).await.json()[0];
    assert_eq!(etl["schedule"]["enabled"], false);
    assert_eq!(etl["schedule"]["next_fire"], Value::Null);
}

#[tokio::test]
async fn every_version_of_a_workflow_is_listed_newest_first() {
    let api = api(None).await;
    let url = "/api/v1/projects/default/workflows";
    api.post(url, DIAMOND).await;
    api.post(url, &DIAMOND.replace("echo ${dt}", "echo v2 ${dt}"))
        .await;
    api.post(url, &DIAMOND.replace("echo ${dt}", "echo v3 ${dt}"))
        .await;
    let a = api
        .get("/api/v1/projects/default/workflows/etl/versions")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let versions = a.json();
    let numbers: Vec<i64> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [3, 2, 1]);
    assert!(versions[0]["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(versions[0].as_object().unwrap().len(), 2, "{versions}");

    let a = api
        .get("/api/v1/projects/default/workflows/nope/versions")
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.error().contains("'default/nope' does not exist"),
        "{}",
        a.text
    );
}

#[tokio::test]
async fn validate_checks_like_apply_and_stores_nothing() {
    let api = api(None).await;
    let url = "/api/v1/projects/default/validate";
    let a = api.post(url, DIAMOND).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(
        a.json(),
        json!({
            "name": "etl",
            "tasks": [
                {"name": "a", "type": "shell", "depends_on": []},
                {"name": "b", "type": "noop", "depends_on": ["a"]},
                {"name": "c", "type": "noop", "depends_on": ["a"]},
                {"name": "d", "type": "noop", "depends_on": ["b", "c"]},
            ],
            "params": [{"name": "dt", "value": "2026-01-01"}],
        })
    );
    let json_def = json!({"name": "j", "tasks": [{"name": "x", "type": "noop"}]}).to_string();
    let a = api.post(url, &json_def).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json()["params"], json!([]));
    // Nothing was stored.
    assert_eq!(
        api.get("/api/v1/projects/default/workflows").await.json(),
        json!([])
    );
    assert_eq!(
        api.projects().await,
        json!([{"name": "default", "workflows": 0}])
    );

    // The same refusals as apply, with where and which task when known.
    let broken = "name: etl\ntasks:\n  - { name: a, type: shell\n  - { name: b }\n";
    for path in [url, "/api/v1/projects/default/workflows"] {
        let a = api.post(path, broken).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path}: {}", a.text);
        let e = a.json();
        assert!(
            e["error"].as_str().unwrap().contains("not valid YAML"),
            "{e}"
        );
        assert!(e["line"].as_u64().unwrap() >= 3, "{e}");
        assert!(e["column"].as_u64().unwrap() >= 1, "{e}");
        assert!(e.get("task").is_none(), "{e}");
    }
    let unknown_dep = DIAMOND.replace("depends_on: [b, c]", "depends_on: [b, c, x]");
    for path in [url, "/api/v1/projects/default/workflows"] {
        let a = api.post(path, &unknown_dep).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path}: {}", a.text);
        let e = a.json();
        assert_eq!(e["task"], "d", "{e}");
        assert!(e["error"].as_str().unwrap().contains("'x'"), "{e}");
        assert!(e.get("line").is_none(), "{e}");
    }
    let grouped = "name: g\ntasks:\n- {name: a, type: noop, task_group: nope}\n";
    let a = api.post(url, grouped).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("task group 'nope'"), "{}", a.text);
    let elsewhere = format!("project: sales\n{DIAMOND}");
    let a = api.post(url, &elsewhere).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("'sales'"), "{}", a.text);

    // A workflow may be named "validate": validation does not take its path.
    let named = DIAMOND.replace("name: etl", "name: validate");
    let a = api.post("/api/v1/projects/default/workflows", &named).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let a = api.get("/api/v1/projects/default/workflows/validate").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json()["name"], "validate");
}

#[tokio::test]
async fn the_session_checks_a_token_only_when_the_server_has_one() {
    let open = api(None).await;
    let anonymous = json!({"auth": false, "user": "anonymous", "admin": true, "roles": {}});
    let a = open.get("/api/v1/session").await;
    assert_eq!((a.status, a.json()), (StatusCode::OK, anonymous.clone()));
    let a = open
        .call("GET", "/api/v1/session", Some("anything"), "")
        .await;
    assert_eq!((a.status, a.json()), (StatusCode::OK, anonymous));

    let guarded = api(Some("s3cret")).await;
    let a = guarded.get("/api/v1/session").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert_eq!(a.error(), "missing or invalid bearer token");
    let a = guarded
        .call("GET", "/api/v1/session", Some("guess"), "")
        .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    let a = guarded
        .call("GET", "/api/v1/session", Some("s3cret"), "")
        .await;
    assert_eq!(
        (a.status, a.json()),
        (
            StatusCode::OK,
            json!({"auth": true, "user": "SHOAL_TOKEN", "admin": true, "roles": {}})
        )
    );
    // No CORS headers (the UI is same-origin).
    let a = guarded
        .call("GET", "/api/v1/instances", Some("s3cret"), "")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(!a.headers.contains_key("access-control-allow-origin"));
}

#[tokio::test]
async fn the_cluster_is_listed_from_the_registry_standalone_passes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let registry = shoal_common::registry::Registry::local();
    let stop = tokio_util::sync::CancellationToken::new();
    // Registered while the membership is held.
    let _membership = registry
        .register(
            shoal_common::registry::NodeInfo {
                role: shoal_common::registry::Role::Worker,
                addr: "127.0.0.1:5679".into(),
                groups: vec!["default".into()],
                slots: 4,
                running: 1,
                weight: 100,
                started_at: 1_767_225_600_000,
                lapses: 0,
                overloaded: None,
            },
            stop.clone(),
        )
        .await
        .unwrap();
    // The local registry takes the entry in a task of its own.
    tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while registry.nodes().await.unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    let app = router(ApiState {
        store,
        auth: Auth::Off,
        registry: Some(registry),
        secret: Default::default(),
        limits: Default::default(),
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
    });
    let req = Request::get("/api/v1/cluster").body(Body::empty()).unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let nodes: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        nodes,
        json!([{
            "role": "worker",
            "addr": "127.0.0.1:5679",
            "groups": ["default"],
            "slots": 4,
            "running": 1,
            "weight": 100,
            "started_at": "2026-01-01T00:00:00.000Z",
        }])
    );
    stop.cancel();

    // Without a registry (an api-server started without --etcd) it says so.
    let a = api(None).await.get("/api/v1/cluster").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("--etcd"), "{}", a.text);
}

/// The actions an instance offers, as `(action, allowed)`.
fn offered(detail: &Value) -> Vec<(String, bool)> {
    detail["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_string(),
                a["allowed"] == true,
            )
        })
        .collect()
}

#[tokio::test]
async fn an_instance_offers_the_actions_its_state_allows_and_says_why_not() {
    let api = api(None).await;
    let inst = running_instance(&api, &dead_addr(), "").await;
    let id = inst.id;
    let detail = api.get(&format!("/api/v1/instances/{id}")).await.json();
    let allowed = |d: &Value| -> Vec<String> {
        offered(d)
            .into_iter()
            .filter(|(_, ok)| *ok)
            .map(|(a, _)| a)
            .collect()
    };
    assert_eq!(allowed(&detail), ["stop", "pause"]);
    assert_eq!(detail["parent_instance_id"], Value::Null);

    finish(&api.store, &inst, WorkflowState::Failure).await;
    let detail = api.get(&format!("/api/v1/instances/{id}")).await.json();
    assert_eq!(allowed(&detail), ["rerun", "resubmit-failed"]);
    // Each refusal it shows is the one the action endpoint answers.
    for (action, ok) in offered(&detail) {
        let a = api
            .post(&format!("/api/v1/instances/{id}/{action}"), "")
            .await;
        if ok {
            assert_eq!(a.status, StatusCode::ACCEPTED, "{action}: {}", a.text);
            break; // one recovery command per instance at a time
        }
        assert_eq!(a.status, StatusCode::CONFLICT, "{action}: {}", a.text);
        let reason = detail["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["action"] == action.as_str())
            .unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            reason.ends_with(a.error().split_once("; ").unwrap().1),
            "{action}: offer says '{reason}', the endpoint '{}'",
            a.error()
        );
    }
}

#[tokio::test]
async fn a_cron_is_previewed_in_its_zone_and_a_bad_one_is_named() {
    let api = api(None).await;
    let a = api
        .get("/api/v1/cron/preview?cron=30+2+*+*+*&timezone=Asia/Kolkata&count=3")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let fires: Vec<String> = serde_json::from_value(a.json()["fire_times"].clone()).unwrap();
    assert_eq!(fires.len(), 3);
    for f in &fires {
        assert!(f.ends_with("T02:30:00+05:30"), "{fires:?}");
    }
    assert!(fires.windows(2).all(|w| w[0] < w[1]), "{fires:?}");

    // A window that ends before the third fire shows fewer.
    let start = "2030-01-01T00:00:00Z";
    let end = "2030-01-02T23:00:00Z";
    let a = api
        .get(&format!(
            "/api/v1/cron/preview?cron=0+0+*+*+*&start_time={start}&end_time={end}"
        ))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(
        a.json()["fire_times"],
        json!(["2030-01-01T00:00:00+00:00", "2030-01-02T00:00:00+00:00"])
    );
    assert_eq!(a.json()["timezone"], "UTC");

    for (query, names) in [
        ("cron=61+*+*+*+*", "61"),
        ("cron=0+0+*+*+*&timezone=Mars/Base", "Mars/Base"),
        ("cron=0+0+*+*+*&count=0", "count '0'"),
        ("cron=0+0+*+*+*&start_time=soon", "start_time 'soon'"),
        (
            "cron=0+0+*+*+*&start_time=2030-01-02T00:00:00Z&end_time=2030-01-01T00:00:00Z",
            "end_time is before start_time",
        ),
        ("timezone=UTC", "cron"),
    ] {
        let a = api.get(&format!("/api/v1/cron/preview?{query}")).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{query}: {}", a.text);
        assert!(a.error().contains(names), "{query}: {}", a.text);
    }
}
