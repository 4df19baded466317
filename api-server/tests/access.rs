//! Users, tokens, project roles and the audit log, through the router with auth on.
//!
//! The route × role matrix walks every operation of the OpenAPI document (which another
//! test holds equal to the router) with no token and with the token of each role, and
//! checks who is refused (401, 403) and who is let through: a route added without a row
//! here fails, so none can be left open by mistake.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use shoal_api_server::{ApiState, Auth, openapi_document, router};
use shoal_common::access::{new_token, token_hash};
use shoal_common::secret_key::SecretKey;
use shoal_common::types::{Priority, TaskState, now_ms};
use shoal_store::{NewTaskInstance, Store, WriteBatch};
use std::collections::{BTreeMap, BTreeSet};
use tempfile::TempDir;
use tower::ServiceExt;

/// The operator's SHOAL_TOKEN.
const ADMIN: &str = "the-operators-admin-token";
/// The api-server's SHOAL_SECRET_KEY.
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

const WORKFLOW: &str = "\
name: etl
tasks:
  - { name: a, type: shell, command: 'echo a' }
  - { name: b, type: noop, depends_on: [a] }
";

/// The callers of the matrix, least privileged first; each may do what the ones before
/// may. `owner` is the admin of project `p`; `global` a global admin.
const CALLERS: [&str; 7] = [
    "nobody", "outsider", "viewer", "operator", "editor", "owner", "global",
];

struct Env {
    app: Router,
    store: Store,
    /// Each caller's token (none for `nobody`).
    tokens: BTreeMap<&'static str, String>,
    instance: i64,
    task: i64,
    command: i64,
    backfill: i64,
    schedule: i64,
    /// A token of user `spare`, for revokeToken.
    spare_token: i64,
    _dir: TempDir,
}

struct Answer {
    status: StatusCode,
    json: Value,
}

async fn call(app: &Router, method: &str, uri: &str, token: Option<&str>, body: &str) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    if method != "GET" {
        // Without auth, writes need a JSON or YAML content type.
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

impl Env {
    async fn as_(&self, who: &str, method: &str, uri: &str, body: &str) -> Answer {
        let token = self.tokens.get(who).map(String::as_str);
        call(&self.app, method, uri, token, body).await
    }

    async fn admin(&self, method: &str, uri: &str, body: Value) -> Value {
        let a = call(&self.app, method, uri, Some(ADMIN), &body.to_string()).await;
        assert!(
            a.status.is_success(),
            "{method} {uri}: {} {}",
            a.status,
            a.json
        );
        a.json
    }

    /// Starts `p/etl` and has a master claim the command; the command's and the run's
    /// ids. The master is at an address where nothing listens: stop and pause then fail
    /// with 503, after the guard let them through.
    async fn run(&self) -> (i64, i64) {
        let started = self
            .admin("POST", "/api/v1/projects/p/workflows/etl/start", json!({}))
            .await;
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let master = dead.local_addr().unwrap().to_string();
        drop(dead);
        let claimed = self.store.claim_commands(&master, 1, 10).await.unwrap();
        (
            started["command_id"].as_i64().unwrap(),
            claimed[0].instance.id,
        )
    }

    /// Backfills `p/etl` as `body` asks; its id.
    async fn backfill(&self, body: Value) -> i64 {
        let uri = "/api/v1/projects/p/workflows/etl/backfill";
        self.admin("POST", uri, body).await["id"].as_i64().unwrap()
    }

    async fn audit(&self, query: &str) -> Vec<Value> {
        let uri = format!("/api/v1/audit?{query}");
        let rows = self.admin("GET", &uri, json!(null)).await;
        rows.as_array().unwrap().clone()
    }
}

/// An api-server with auth on; users with a token each; project `p` with a member of each
/// role, a workflow, a schedule, a run with a task attempt, and a backfill.
async fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let app = router(ApiState {
        store: store.clone(),
        auth: Auth::tokens(Some(ADMIN.into())),
        registry: None,
        secret: Default::default(),
        limits: Default::default(),
        secret_key: Some(SecretKey::from_hex(KEY).unwrap()),
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
    });
    let mut env = Env {
        app,
        store,
        tokens: BTreeMap::new(),
        instance: 0,
        task: 0,
        command: 0,
        backfill: 0,
        schedule: 0,
        spare_token: 0,
        _dir: dir,
    };
    for who in CALLERS.into_iter().skip(1).chain(["spare", "worker"]) {
        let user = json!({"name": who, "admin": who == "global"});
        env.admin("POST", "/api/v1/users", user).await;
        let token = json!({"name": "laptop", "user": who});
        let created = env.admin("POST", "/api/v1/tokens", token).await;
        assert_eq!(created["user"], who);
        if who == "spare" {
            env.spare_token = created["id"].as_i64().unwrap();
        } else {
            let value = created["token"].as_str().unwrap().to_string();
            env.tokens.insert(who, value);
        }
    }
    env.admin("POST", "/api/v1/projects", json!({"name": "p"}))
        .await;
    for (who, role) in [
        ("viewer", "viewer"),
        ("operator", "operator"),
        ("editor", "editor"),
        ("owner", "admin"),
        ("worker", "worker"),
    ] {
        let uri = format!("/api/v1/projects/p/members/{who}");
        env.admin("PUT", &uri, json!({"role": role})).await;
    }
    let a = call(
        &env.app,
        "POST",
        "/api/v1/projects/p/workflows",
        Some(ADMIN),
        WORKFLOW,
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let schedule = json!({"cron": "0 3 * * *", "timezone": "UTC"});
    let s = env
        .admin(
            "POST",
            "/api/v1/projects/p/workflows/etl/schedules",
            schedule,
        )
        .await;
    env.schedule = s["id"].as_i64().unwrap();
    (env.command, env.instance) = env.run().await;
    env.task = add_task(&env.store, env.instance, "shell", TaskState::Submitted).await;
    env.backfill = env
        .backfill(json!({"from": "2026-01-01", "to": "2026-01-03"}))
        .await;
    env
}

/// Records an attempt of a task of `task_type` in `state` in run `instance`; its id.
async fn add_task(store: &Store, instance: i64, task_type: &str, state: TaskState) -> i64 {
    let batch = WriteBatch {
        new_tasks: vec![NewTaskInstance {
            workflow_instance_id: instance,
            run: 1,
            name: task_type.into(),
            task_type: task_type.into(),
            attempt: 1,
            priority: Priority::Medium,
            worker_group: "default".into(),
            state,
            submitted_at: now_ms(),
            task_group: None,
            task_group_priority: 0,
            message: None,
        }],
        ..Default::default()
    };
    store.write_batch(&batch).await.unwrap().new_task_ids[0]
}

/// The least privileged caller each operation lets through. `nobody` marks the open ones.
fn minimum(op: &str) -> &'static str {
    match op {
        "health" | "getOpenApi" | "getWorkflowSchema" | "getMetrics" => "nobody",
        // Open to the guard; it checks the trigger's own credential (no such trigger here).
        "callTrigger" | "callTriggerGet" | "callTriggerPut" => "nobody",
        // Open to the guard: the callback URL's one-time token is the credential.
        "completeCallback" => "nobody",
        // Open to the guard; it checks the token itself, to tell a sign-in page who it is.
        "getSession" => "outsider",
        "listProjects" | "createProject" | "listNodes" | "previewCron" | "listTaskGroups"
        | "listAlertChannels" | "listInstances" | "listBackfills" | "listAlerts" | "listTokens"
        | "createToken" | "revokeToken" | "listExternalQueues" => "outsider",
        "getProject"
        | "listMembers"
        | "listWorkflows"
        | "getWorkflow"
        | "listWorkflowVersions"
        | "listSchedules"
        | "getSchedule"
        | "previewSchedule"
        | "getInstance"
        | "getTaskInstance"
        | "getTaskLog"
        | "getCommand"
        | "listCommands"
        | "getBackfill"
        | "listSecrets"
        | "listEnvironments"
        | "getEnvironment"
        | "listTriggers"
        | "listIgnoredMessages" => "viewer",
        "startWorkflow"
        | "createBackfill"
        | "actOnInstance"
        | "deleteInstance"
        | "cancelBackfill"
        | "completeTaskInstance"
        | "actOnTaskInstance"
        | "cancelCommand"
        | "sendEvent" => "operator",
        // And the worker role, outside this line of roles (see the worker's own test).
        "pollExternalTasks"
        | "heartbeatExternalTask"
        | "appendExternalTaskLog"
        | "releaseExternalTask"
        | "completeExternalTask"
        | "completeExternalTasks" => "operator",
        "applyWorkflow" | "validateWorkflow" | "createSchedule" | "updateSchedule"
        | "deleteSchedule" | "enableSchedule" | "disableSchedule" | "setSecret"
        | "deleteSecret" | "setEnvironment" | "deleteEnvironment" | "onlineWorkflow"
        | "offlineWorkflow" | "rollbackWorkflow" | "deleteWorkflow" => "editor",
        "deleteProject" | "setMember" | "removeMember" => "owner",
        "createTaskGroup" | "deleteTaskGroup" | "createAlertChannel" | "deleteAlertChannel"
        | "listUsers" | "createUser" | "disableUser" | "enableUser" | "listAudit" => "global",
        other => panic!("operation {other} has no row in the access matrix: add one"),
    }
}

/// Whether `path` (a template) names an object by its `{id}` alone, its project found
/// through it.
fn id_scoped(path: &str) -> bool {
    let by_id = [
        "instances/",
        "task-instances/",
        "commands/",
        "backfills/",
        "external/{id}",
    ];
    by_id
        .iter()
        .any(|p| path.starts_with(&format!("/api/v1/{p}")))
}

/// `path` (a template) with values naming the objects of project `p`.
fn uri(env: &Env, path: &str) -> String {
    let id = if path.starts_with("/api/v1/instances/") {
        env.instance
    } else if path.starts_with("/api/v1/task-instances/") || path.starts_with("/api/v1/external/") {
        env.task
    } else if path.starts_with("/api/v1/commands/") {
        env.command
    } else if path.starts_with("/api/v1/backfills/") {
        env.backfill
    } else if path.contains("/schedules/") {
        env.schedule
    } else {
        env.spare_token
    };
    let name = if path.contains("/workflows/") {
        "etl"
    } else if path.starts_with("/api/v1/users/") {
        "spare"
    } else {
        "probe"
    };
    let uri = path
        .replace("{project}", "p")
        .replace("{name}", name)
        .replace("{id}", &id.to_string())
        .replace("{action}", "stop")
        .replace("{version}", "1")
        .replace("{user}", "probe")
        .replace("{workflow}", "etl")
        .replace("{trigger}", "probe")
        .replace("{event}", "probe")
        .replace("{token}", "probe");
    assert!(!uri.contains('{'), "no value for a parameter of {path}");
    uri
}

#[tokio::test]
async fn every_operation_refuses_each_role_below_its_minimum_and_lets_the_others_through() {
    let env = env().await;
    let doc = serde_json::to_value(openapi_document()).unwrap();
    let mut checked = 0;
    let mut mutations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            let min = minimum(id);
            let rank = CALLERS.iter().position(|c| *c == min).unwrap();
            let uri = uri(&env, path);
            let method = method.to_uppercase();
            let by_id = id_scoped(path);
            for (i, who) in CALLERS.iter().enumerate() {
                let a = env.as_(who, &method, &uri, "").await;
                let expected = match i {
                    _ if i >= rank => None,
                    0 => Some(StatusCode::UNAUTHORIZED),
                    // An id in a project they cannot view is answered as one that does
                    // not exist.
                    1 if by_id => Some(StatusCode::NOT_FOUND),
                    _ => Some(StatusCode::FORBIDDEN),
                };
                match expected {
                    Some(refused) => {
                        assert_eq!(a.status, refused, "{who}: {method} {path} ({id})");
                        let says = a.json["error"].as_str().unwrap_or_default();
                        assert!(!says.is_empty(), "{who}: {method} {path}: {}", a.json);
                    }
                    None => assert!(
                        ![StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&a.status),
                        "{who} may {method} {path} ({id}): {} {}",
                        a.status,
                        a.json
                    ),
                }
            }
            checked += 1;
            // An open route is audited once it has authenticated its caller itself; these
            // calls were refused before that, like the guard's refusals without a token.
            let unaudited = [
                "validateWorkflow",
                "heartbeatExternalTask",
                "appendExternalTaskLog",
            ];
            if method != "GET" && !unaudited.contains(&id) && min != "nobody" {
                mutations.push((id.to_string(), rank, by_id));
            }
        }
    }
    assert!(checked >= 50, "{checked} operations");
    // Every mutation the matrix called left audit rows: the refusals, and the call let
    // through (whatever its answer).
    let rows = env.audit("limit=1000").await;
    for (id, rank, by_id) in &mutations {
        let of = |r: &&Value| r["action"] == id.as_str();
        let results: Vec<&str> = rows
            .iter()
            .filter(of)
            .map(|r| r["result"].as_str().unwrap())
            .collect();
        // Signed-in callers below the minimum (there are none below `outsider`); the
        // outsider's 404 for an id is recorded with what it hides.
        let hidden = results
            .iter()
            .filter(|r| r.starts_with("404: hidden: ") && r.contains("in project 'p'"))
            .count();
        assert_eq!(hidden, usize::from(*by_id), "{id}: {results:?}");
        assert_eq!(
            results.iter().filter(|r| r.starts_with("403")).count() + hidden,
            rank.saturating_sub(1),
            "{id}: the refusals audited: {results:?}"
        );
        assert!(
            results
                .iter()
                .any(|r| !r.starts_with("403") && !r.contains("hidden")),
            "{id}: the call let through is not audited: {results:?}"
        );
    }
}

/// The worker role sits outside the line of the others: it may work on its project's
/// external tasks (as operators and up may) and do what any signed-in user may, nothing
/// else; a viewer may not work on them.
#[tokio::test]
async fn a_worker_works_external_tasks_and_nothing_else() {
    let env = env().await;
    let doc = serde_json::to_value(openapi_document()).unwrap();
    let external = [
        "pollExternalTasks",
        "heartbeatExternalTask",
        "appendExternalTaskLog",
        "releaseExternalTask",
        "completeExternalTask",
        "completeExternalTasks",
    ];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            let method = method.to_uppercase();
            let a = env.as_("worker", &method, &uri(&env, path), "").await;
            let refused = [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&a.status);
            let may = external.contains(&id) || ["nobody", "outsider"].contains(&minimum(id));
            if may {
                assert!(
                    !refused,
                    "worker may {method} {path} ({id}): {} {}",
                    a.status, a.json
                );
            } else {
                assert_eq!(
                    a.status,
                    StatusCode::FORBIDDEN,
                    "worker: {method} {path} ({id})"
                );
            }
        }
    }
    let a = env.as_("worker", "GET", "/api/v1/instances", "").await;
    assert_eq!(a.json, json!([]), "a worker lists no runs");
    let poll = r#"{"queues": ["q"], "worker": "w"}"#;
    let a = env
        .as_("viewer", "POST", "/api/v1/external/poll", poll)
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
    let says = a.json["error"].as_str().unwrap();
    assert!(says.contains("worker role"), "{says}");
    let a = env
        .as_("worker", "POST", "/api/v1/external/poll", poll)
        .await;
    assert_eq!((a.status, &a.json), (StatusCode::OK, &json!([])));
}

#[tokio::test]
async fn lists_show_only_the_projects_a_user_is_a_member_of() {
    let env = env().await;
    let names = |v: &Value| -> Vec<String> {
        let list = v.as_array().unwrap().iter();
        list.map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let outsider = env.as_("outsider", "GET", "/api/v1/projects", "").await;
    assert_eq!(names(&outsider.json), Vec::<String>::new());
    let viewer = env.as_("viewer", "GET", "/api/v1/projects", "").await;
    assert_eq!(names(&viewer.json), ["p"]);
    assert_eq!(viewer.json[0]["role"], "viewer");
    let global = env.as_("global", "GET", "/api/v1/projects", "").await;
    assert_eq!(names(&global.json), ["default", "p"]);

    for list in ["/api/v1/instances", "/api/v1/backfills", "/api/v1/alerts"] {
        let a = env.as_("outsider", "GET", list, "").await;
        assert_eq!(a.json, json!([]), "{list} as an outsider");
    }
    let a = env.as_("viewer", "GET", "/api/v1/instances", "").await;
    assert_eq!(a.json[0]["id"], env.instance);
    let a = env.as_("viewer", "GET", "/api/v1/backfills", "").await;
    assert_eq!(a.json[0]["id"], env.backfill);
    let a = env
        .as_("outsider", "GET", "/api/v1/instances?project=p", "")
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(
        a.json["error"],
        "user 'outsider' needs the viewer role in project 'p' (has none); a project admin can grant it"
    );
    let a = env
        .as_(
            "outsider",
            "GET",
            "/api/v1/backfills?project=p&workflow=etl",
            "",
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);

    let me = env.as_("operator", "GET", "/api/v1/session", "").await;
    assert_eq!(
        me.json,
        json!({"auth": true, "user": "operator", "admin": false, "roles": {"p": "operator"}})
    );
}

#[tokio::test]
async fn a_project_is_created_by_its_first_admin_and_deleted_only_when_empty() {
    let env = env().await;
    let a = env
        .as_(
            "outsider",
            "POST",
            "/api/v1/projects",
            r#"{"name": "mine"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    assert_eq!(a.json["role"], "admin");
    assert_eq!(a.json["created_by"], "outsider");
    let a = env
        .as_("outsider", "GET", "/api/v1/projects/mine", "")
        .await;
    assert_eq!(
        a.json["members"],
        json!([{"user": "outsider", "role": "admin"}])
    );
    for bad in ["..", "-x", ".hidden", ""] {
        let body = json!({ "name": bad }).to_string();
        let a = env.as_("outsider", "POST", "/api/v1/projects", &body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let a = env
        .as_("outsider", "POST", "/api/v1/projects", r#"{"name": "p"}"#)
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT);

    let a = env.as_("owner", "DELETE", "/api/v1/projects/p", "").await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert!(
        a.json["error"]
            .as_str()
            .unwrap()
            .contains("still has workflows")
    );
    let a = env
        .as_("outsider", "DELETE", "/api/v1/projects/mine", "")
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    let a = env.as_("global", "GET", "/api/v1/projects/mine", "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // A member removed loses the project at once.
    let a = env
        .as_("owner", "DELETE", "/api/v1/projects/p/members/viewer", "")
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    let a = env.as_("viewer", "GET", "/api/v1/projects/p", "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = env
        .as_(
            "owner",
            "PUT",
            "/api/v1/projects/p/members/viewer",
            r#"{"role": "boss"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let a = env
        .as_(
            "owner",
            "PUT",
            "/api/v1/projects/p/members/ghost",
            r#"{"role": "viewer"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn tokens_are_shown_once_and_refused_once_revoked_expired_or_their_user_disabled() {
    let env = env().await;
    let made = env
        .as_(
            "viewer",
            "POST",
            "/api/v1/tokens",
            r#"{"name": "ci", "expires_in_days": 30}"#,
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED);
    let token = made.json["token"].as_str().unwrap().to_string();
    let ok = call(&env.app, "GET", "/api/v1/projects/p", Some(&token), "").await;
    assert_eq!(ok.status, StatusCode::OK);
    // Listed without its value, with its last use.
    let list = env.as_("viewer", "GET", "/api/v1/tokens", "").await;
    let ci = list
        .json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ci");
    let ci = ci.expect("the new token is listed").clone();
    assert!(!list.json.to_string().contains(&token));
    assert!(ci["last_used_at"].is_string() && ci["expires_at"].is_string());
    // Another user's tokens are not theirs to see or revoke.
    let a = env
        .as_("viewer", "GET", "/api/v1/tokens?user=owner", "")
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let uri = format!("/api/v1/tokens/{}", env.spare_token);
    let a = env.as_("viewer", "DELETE", &uri, "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    let uri = format!("/api/v1/tokens/{}", ci["id"]);
    let a = env.as_("viewer", "DELETE", &uri, "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.json["revoked_at"].is_string());
    let refused = call(&env.app, "GET", "/api/v1/projects/p", Some(&token), "").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    let expired = new_token().unwrap();
    let past = Some(now_ms() - 1);
    let hash = token_hash(&expired);
    env.store
        .create_token("viewer", "old", &hash, past)
        .await
        .unwrap();
    let a = call(&env.app, "GET", "/api/v1/session", Some(&expired), "").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    env.admin("POST", "/api/v1/users/viewer/disable", json!(null))
        .await;
    let a = env.as_("viewer", "GET", "/api/v1/session", "").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    env.admin("POST", "/api/v1/users/viewer/enable", json!(null))
        .await;
    let a = env.as_("viewer", "GET", "/api/v1/session", "").await;
    assert_eq!(a.status, StatusCode::OK);
}

#[tokio::test]
async fn every_mutation_is_audited_with_who_what_and_the_result() {
    let env = env().await;
    // The setup's mutations, by the SHOAL_TOKEN holder, each with result ok.
    let setup = env.audit("actor=SHOAL_TOKEN&limit=1000").await;
    let actions: BTreeSet<&str> = setup
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    for action in [
        "createUser",
        "createToken",
        "createProject",
        "setMember",
        "applyWorkflow",
    ] {
        assert!(actions.contains(action), "{action} in {actions:?}");
    }
    assert!(setup.iter().all(|r| r["result"] == "ok"), "{setup:?}");
    let created = setup
        .iter()
        .find(|r| r["action"] == "createProject")
        .unwrap();
    assert_eq!(created["project"], "p", "the project a body names");

    let a = env
        .as_(
            "operator",
            "POST",
            "/api/v1/projects/p/workflows/etl/start",
            "{}",
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    let a = env
        .as_(
            "viewer",
            "POST",
            "/api/v1/projects/p/workflows/etl/start",
            "{}",
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = env
        .as_(
            "operator",
            "POST",
            "/api/v1/projects/p/workflows/nope/start",
            "{}",
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    let rows = env.audit("project=p&action=startWorkflow").await;
    let seen: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap();
            (field("actor"), field("target"), field("result"))
        })
        .collect();
    assert_eq!(seen.len(), 4, "{rows:?}");
    assert_eq!(
        seen[0],
        (
            "operator",
            "POST /api/v1/projects/p/workflows/nope/start",
            "404: workflow 'p/nope' does not exist; apply it first with `shoal apply -f FILE`"
        )
    );
    assert_eq!(seen[1].0, "viewer");
    assert!(
        seen[1]
            .2
            .starts_with("403: user 'viewer' needs the operator role"),
        "{seen:?}"
    );
    assert_eq!(
        seen[2],
        (
            "operator",
            "POST /api/v1/projects/p/workflows/etl/start",
            "ok"
        )
    );
    assert!(
        rows.iter()
            .all(|r| r["address"].is_string() && r["at"].is_string())
    );
    // Reads and refusals without a token are not audited.
    call(
        &env.app,
        "POST",
        "/api/v1/projects/p/workflows/etl/start",
        None,
        "{}",
    )
    .await;
    env.as_("viewer", "GET", "/api/v1/instances", "").await;
    assert_eq!(env.audit("project=p&action=startWorkflow").await.len(), 4);
    assert!(env.audit("action=listInstances").await.is_empty());
    // Pages: older than the last id seen.
    let first = env.audit("limit=2").await;
    let next = env
        .audit(&format!("limit=2&before={}", first[1]["id"]))
        .await;
    assert!(next[0]["id"].as_i64() < first[1]["id"].as_i64());
}

#[tokio::test]
async fn a_secret_is_stored_encrypted_and_its_value_never_read_back() {
    let env = env().await;
    let value = "postgres://etl:hunter2@db.internal/warehouse";
    let body = json!({"value": value, "description": "the warehouse"}).to_string();
    let uri = "/api/v1/projects/p/secrets/warehouse";
    let a = env.as_("editor", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    assert_eq!(a.json["updated_by"], "editor");
    let a = env.as_("editor", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::OK, "replaced");
    let list = env
        .as_("viewer", "GET", "/api/v1/projects/p/secrets", "")
        .await;
    assert_eq!(list.json[0]["name"], "warehouse");
    assert!(!list.json.to_string().contains("hunter2"), "{}", list.json);
    let audit = env.audit("action=setSecret").await;
    assert_eq!(audit.len(), 2);
    assert!(!format!("{audit:?}").contains("hunter2"));

    let sealed = env.store.sealed_secrets().await.unwrap();
    assert_eq!(sealed.len(), 1);
    assert!(!sealed[0].sealed.contains("hunter2"));
    let key = SecretKey::from_hex(KEY).unwrap();
    assert_eq!(key.open("p/warehouse", &sealed[0].sealed).unwrap(), value);

    for (bad, says) in [
        (json!({"value": ""}), "1 to 65536 bytes"),
        (json!({"value": "x".repeat(70_000)}), "1 to 65536 bytes"),
        (json!({"valu": "x"}), "invalid JSON body"),
    ] {
        let a = env.as_("editor", "PUT", uri, &bad.to_string()).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert!(
            a.json["error"].as_str().unwrap().contains(says),
            "{}",
            a.json
        );
    }
    let a = env
        .as_("editor", "PUT", "/api/v1/projects/p/secrets/..", &body)
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);

    let a = env.as_("editor", "DELETE", uri, "").await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    let a = env.as_("editor", "DELETE", uri, "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // Without a key the api-server cannot take a secret, and says what to do.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let keyless = router(ApiState {
        store: Store::connect(&url).await.unwrap(),
        auth: Auth::Off,
        registry: None,
        secret: Default::default(),
        limits: Default::default(),
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
    });
    let uri = "/api/v1/projects/default/secrets/x";
    let a = call(&keyless, "PUT", uri, None, r#"{"value": "v"}"#).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        a.json["error"]
            .as_str()
            .unwrap()
            .contains("SHOAL_SECRET_KEY")
    );
}

/// An environment is code, as a command is: who applies workflows sets and deletes it,
/// who reads them reads it; audit rows name it, never its lines.
#[tokio::test]
async fn an_environment_is_set_by_editors_read_by_viewers_and_audited_by_name() {
    let env = env().await;
    let config = "export JAVA_HOME=/opt/jdk-secretive-17";
    let body = json!({"config": config, "description": "java"}).to_string();
    let uri = "/api/v1/projects/p/environments/jdk17";
    let a = env.as_("viewer", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
    let a = env.as_("operator", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
    let a = env.as_("editor", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    assert_eq!(a.json["updated_by"], "editor");
    assert_eq!(a.json["config"], config);
    let a = env.as_("editor", "PUT", uri, &body).await;
    assert_eq!(a.status, StatusCode::OK, "replaced");
    let a = env.as_("viewer", "GET", uri, "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json["config"], config);
    let list = env
        .as_("viewer", "GET", "/api/v1/projects/p/environments", "")
        .await;
    assert_eq!(list.json[0]["name"], "jdk17", "{}", list.json);

    for (bad, says) in [
        (json!({"config": "  \n"}), "1 to 65536 bytes"),
        (json!({"config": "x".repeat(70_000)}), "1 to 65536 bytes"),
        (json!({"config": "a\u{0}b"}), "NUL"),
        (json!({"confi": "x"}), "invalid JSON body"),
    ] {
        let a = env.as_("editor", "PUT", uri, &bad.to_string()).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}");
        let error = a.json["error"].as_str().unwrap();
        assert!(error.contains(says), "{error}");
    }
    let a = env
        .as_("editor", "PUT", "/api/v1/projects/p/environments/-x", &body)
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // A name in any script, as other names.
    let chinese = "/api/v1/projects/p/environments/%E7%8E%AF%E5%A2%83";
    let a = env.as_("editor", "PUT", chinese, &body).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    assert_eq!(a.json["name"], "环境");

    let a = env.as_("viewer", "DELETE", uri, "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = env.as_("editor", "DELETE", uri, "").await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    let a = env.as_("editor", "DELETE", uri, "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let a = env.as_("viewer", "GET", uri, "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    let rows = env.audit("limit=1000").await;
    for action in ["setEnvironment", "deleteEnvironment"] {
        assert!(
            rows.iter().any(|r| r["action"] == action
                && r["object"] == "environment 'jdk17'"
                && r["result"] == "ok"),
            "a {action} row names the environment: {rows:?}"
        );
    }
    let everything = serde_json::to_string(&rows).unwrap();
    assert!(!everything.contains("secretive"), "{everything}");
}

#[tokio::test]
async fn a_workflow_reaches_into_another_project_only_as_far_as_its_editor_may() {
    let env = env().await;
    env.admin("POST", "/api/v1/projects", json!({"name": "q"}))
        .await;
    // In p, where the editor may apply: one starts q's workflow, one waits on its runs.
    let starts = "name: w1\ntasks:\n- { name: child, type: sub_workflow, sub_workflow: { workflow: etl, project: q } }\n";
    let waits = "name: w2\ntasks:\n- name: gate\n  type: dependent\n  dependent:\n    groups: [{ items: [{ workflow: etl }, { workflow: etl, project: q }] }]\n";
    let apply =
        |body: &'static str| env.as_("editor", "POST", "/api/v1/projects/p/workflows", body);
    // No role in q: both refused, saying what and where; nothing stored.
    for (body, name, role) in [(starts, "w1", "operator"), (waits, "w2", "viewer")] {
        let a = apply(body).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
        let says = a.json["error"].as_str().unwrap_or_default();
        assert!(says.contains(&format!("workflow '{name}'")), "{says}");
        assert!(
            says.contains(&format!("needs the {role} role in project 'q'")),
            "{says}"
        );
        let uri = format!("/api/v1/projects/p/workflows/{name}");
        let stored = env.as_("editor", "GET", &uri, "").await;
        assert_eq!(stored.status, StatusCode::NOT_FOUND);
    }
    // Validation answers the same as applying.
    let v = env
        .as_("editor", "POST", "/api/v1/projects/p/validate", waits)
        .await;
    assert_eq!(v.status, StatusCode::FORBIDDEN, "{}", v.json);

    // A viewer of q may wait on its runs, not start them; an operator may start them too.
    let grant = |role: &str| {
        let role = json!({ "role": role });
        env.admin("PUT", "/api/v1/projects/q/members/editor", role)
    };
    grant("viewer").await;
    assert_eq!(apply(waits).await.status, StatusCode::CREATED);
    assert_eq!(apply(starts).await.status, StatusCode::FORBIDDEN);
    grant("operator").await;
    assert_eq!(apply(starts).await.status, StatusCode::CREATED);
}

/// The id-scoped requests, with the kind of id each takes: every operation of the OpenAPI
/// document whose path names an object by its `{id}` alone, each action spelled out.
fn id_scoped_requests() -> Vec<(String, String)> {
    let doc = serde_json::to_value(openapi_document()).unwrap();
    let mut requests = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !id_scoped(path) {
            continue;
        }
        let actions: &[&str] = if path.starts_with("/api/v1/instances/") {
            &["stop", "pause", "resume", "rerun", "resubmit-failed"]
        } else {
            &["kill", "force-success", "rerun"]
        };
        for method in item.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            if path.contains("{action}") {
                for a in actions {
                    requests.push((method.clone(), path.replace("{action}", a)));
                }
            } else {
                requests.push((method.clone(), path.clone()));
            }
        }
    }
    requests
}

/// The last id of each kind the creator made, by the path prefix that names it.
#[derive(Default)]
struct Frontier {
    instance: std::sync::atomic::AtomicI64,
    task: std::sync::atomic::AtomicI64,
    command: std::sync::atomic::AtomicI64,
    backfill: std::sync::atomic::AtomicI64,
}

impl Frontier {
    /// The id a request at `path` would name next.
    fn next(&self, path: &str) -> i64 {
        use std::sync::atomic::Ordering::Acquire;
        let last = if path.starts_with("/api/v1/instances/") {
            &self.instance
        } else if path.starts_with("/api/v1/task-instances/")
            || path.starts_with("/api/v1/external/")
        {
            &self.task
        } else if path.starts_with("/api/v1/commands/") {
            &self.command
        } else {
            &self.backfill
        };
        last.load(Acquire) + 1
    }
}

/// Ids are sequential: a user without a role in `p` fires every id-scoped request at the
/// next ids while `p`'s runs, approval tasks, commands and backfills are being created.
/// None may read or act on any of them: each answer is the 404 of an id that does not
/// exist, and every object is as it was made.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_racing_the_next_ids_never_reaches_another_project_s_objects() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::{Acquire, Release};
    let env = Arc::new(env().await);
    let requests = id_scoped_requests();
    // Every id-scoped operation the matrix knows is raced (the instance and task actions
    // once per action).
    assert_eq!(requests.len(), 21, "{requests:?}");
    let frontier = Arc::new(Frontier::default());
    frontier.instance.store(env.instance, Release);
    frontier.task.store(env.task, Release);
    frontier.command.store(env.command, Release);
    frontier.backfill.store(env.backfill, Release);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let mut attackers = Vec::new();
    for n in 0..4 {
        let (env, frontier, done) = (env.clone(), frontier.clone(), done.clone());
        let requests = requests.clone();
        attackers.push(tokio::spawn(async move {
            let mut tries = 0;
            let mut reached = Vec::new();
            while !done.load(Acquire) {
                for (method, path) in requests.iter().skip(n).step_by(2) {
                    let id = frontier.next(path);
                    let uri = path.replace("{id}", &id.to_string());
                    let body = r#"{"outputs": {"approved": "yes"}}"#;
                    let body = if path.ends_with("/complete") {
                        body
                    } else {
                        ""
                    };
                    let a = env.as_("outsider", method, &uri, body).await;
                    tries += 1;
                    let says = a.json["error"].as_str().unwrap_or_default();
                    if a.status != StatusCode::NOT_FOUND || !says.ends_with("does not exist") {
                        reached.push(format!("{method} {uri}: {} {}", a.status, a.json));
                    }
                }
            }
            (tries, reached)
        }));
    }

    // The creator: in project p, where the attacker has no role.
    let mut made = Vec::new();
    for _ in 0..300 {
        let (command, instance) = env.run().await;
        frontier.command.store(command, Release);
        frontier.instance.store(instance, Release);
        let task = add_task(&env.store, instance, "wait", TaskState::Waiting).await;
        frontier.task.store(task, Release);
        let backfill = env.backfill(json!({"dates": ["2026-01-01"]})).await;
        frontier.backfill.store(backfill, Release);
        made.push((instance, task, backfill));
    }
    done.store(true, Release);
    let mut tries = 0;
    for attacker in attackers {
        let (n, reached) = attacker.await.unwrap();
        tries += n;
        assert!(
            reached.is_empty(),
            "requests that reached p's objects: {reached:#?}"
        );
    }
    assert!(tries >= 2000, "only {tries} tries");

    for (instance, task, backfill) in made {
        let i = env.store.get_instance(instance).await.unwrap();
        let i = i.expect("no instance deleted");
        assert_eq!(i.state.to_string(), "running", "instance {instance}");
        let t = env.store.get_task_instance(task).await.unwrap().unwrap();
        assert_eq!(t.state, TaskState::Waiting, "task {task}: {:?}", t.message);
        let b = env.store.get_backfill(backfill).await.unwrap().unwrap();
        assert_eq!(b.state.to_string(), "running", "backfill {backfill}");
    }
    // Each refusal is audited as what it was: a 404 that hid project p.
    let rows = env.audit("actor=outsider&limit=1000").await;
    assert!(!rows.is_empty());
    for r in &rows {
        let result = r["result"].as_str().unwrap();
        assert!(result.starts_with("404: "), "{}: {result}", r["target"]);
    }
}

/// An id in a project the caller may not view is answered exactly as an id that does not
/// exist; a caller who may view it but lacks the role is told which role. The audit log
/// records each as what it was.
#[tokio::test]
async fn an_id_in_a_project_the_caller_cannot_view_is_answered_as_a_missing_one() {
    let env = env().await;
    let absent = env.instance + 1000;
    let stop = |id: i64| format!("/api/v1/instances/{id}/stop");
    let says = |a: &Answer| a.json["error"].as_str().unwrap_or_default().to_string();
    let hidden = env.as_("outsider", "POST", &stop(env.instance), "").await;
    let missing = env.as_("outsider", "POST", &stop(absent), "").await;
    let to_admin = env.as_("global", "POST", &stop(absent), "").await;
    for a in [&hidden, &missing, &to_admin] {
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.json);
    }
    let no_such = |id: i64| format!("workflow instance {id} does not exist");
    assert_eq!(says(&hidden), no_such(env.instance));
    assert_eq!(says(&missing), no_such(absent));
    assert_eq!(says(&to_admin), no_such(absent));
    let read = format!("/api/v1/instances/{}", env.instance);
    let a = env.as_("outsider", "GET", &read, "").await;
    assert_eq!(
        (a.status, says(&a)),
        (StatusCode::NOT_FOUND, no_such(env.instance))
    );
    // A viewer sees it, and is told what stopping it needs.
    assert_eq!(
        env.as_("viewer", "GET", &read, "").await.status,
        StatusCode::OK
    );
    let viewer = env.as_("viewer", "POST", &stop(env.instance), "").await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        says(&viewer),
        "user 'viewer' needs the operator role in project 'p' (has viewer); a project admin can grant it"
    );
    // Not a number: the id is named.
    let a = env.as_("global", "GET", "/api/v1/instances/x7", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(says(&a), "'x7' is not a workflow instance id: use a number");

    let rows = env.audit("action=actOnInstance").await;
    let seen: Vec<(&str, &Value, &str)> = rows
        .iter()
        .map(|r| {
            let result = r["result"].as_str().unwrap();
            (r["actor"].as_str().unwrap(), &r["project"], result)
        })
        .collect();
    let hid = format!(
        "404: hidden: workflow instance {} is in project 'p', where user 'outsider' has no role",
        env.instance
    );
    let absent_row = format!("404: {}", no_such(absent));
    assert_eq!(
        seen,
        [
            (
                "viewer",
                &json!("p"),
                format!("403: {}", says(&viewer)).as_str()
            ),
            ("global", &Value::Null, absent_row.as_str()),
            ("outsider", &Value::Null, absent_row.as_str()),
            ("outsider", &json!("p"), hid.as_str()),
        ]
    );
}

/// A mutation that committed and then failed is audited with its answer, not `ok`.
#[tokio::test]
async fn an_audit_row_records_the_answer_of_a_mutation_that_failed_after_a_commit() {
    let env = env().await;
    // Completing a task that is not a waiting one: the conditional write commits nothing.
    let uri = format!("/api/v1/task-instances/{}/complete", env.task);
    let a = env.as_("operator", "POST", &uri, "").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.json);
    let rows = env.audit("action=completeTaskInstance").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0]["result"],
        format!("409: {}", a.json["error"].as_str().unwrap())
    );
    assert_eq!(rows[0]["project"], "p");
}

/// The scheme of `Authorization` is case-insensitive (RFC 7235).
#[tokio::test]
async fn a_bearer_token_is_taken_whatever_the_case_of_its_scheme() {
    let env = env().await;
    let token = &env.tokens["viewer"];
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let req = Request::builder()
            .uri("/api/v1/projects/p")
            .header(header::AUTHORIZATION, format!("{scheme} {token}"))
            .body(Body::empty())
            .unwrap();
        let resp = env.app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{scheme}");
    }
    for bad in [
        format!("Basic {token}"),
        format!("Bearer{token}"),
        "bearer ".into(),
    ] {
        let req = Request::builder()
            .uri("/api/v1/projects/p")
            .header(header::AUTHORIZATION, bad.clone())
            .body(Body::empty())
            .unwrap();
        let resp = env.app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{bad}");
    }
}

/// Roles in the other projects a workflow reaches into are checked at every start and
/// rollback, as they are at that moment: a role taken away stops the stored versions too.
#[tokio::test]
async fn a_role_taken_away_in_another_project_stops_every_start_of_a_workflow_reaching_it() {
    let env = env().await;
    env.admin("POST", "/api/v1/projects", json!({"name": "q"}))
        .await;
    let grant = |role: &str| {
        let role = json!({ "role": role });
        env.admin("PUT", "/api/v1/projects/q/members/editor", role)
    };
    grant("operator").await;
    let q_etl = "name: etl\ntasks: [{ name: a, type: noop }]\n";
    let a = call(
        &env.app,
        "POST",
        "/api/v1/projects/q/workflows",
        Some(ADMIN),
        q_etl,
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let starts = "name: w1\ntasks:\n- { name: child, type: sub_workflow, sub_workflow: { workflow: etl, project: q } }\n";
    let alone = "name: w1\ntasks:\n- { name: child, type: noop }\n";
    for body in [starts, alone] {
        let a = env
            .as_("editor", "POST", "/api/v1/projects/p/workflows", body)
            .await;
        assert!(a.status.is_success(), "{}", a.json);
    }
    let start = |body: &'static str| {
        env.as_(
            "editor",
            "POST",
            "/api/v1/projects/p/workflows/w1/start",
            body,
        )
    };
    let rollback = || {
        let uri = "/api/v1/projects/p/workflows/w1/versions/1/rollback";
        env.as_("editor", "POST", uri, "")
    };
    let backfill = || {
        let uri = "/api/v1/projects/p/workflows/w1/backfill";
        env.as_("editor", "POST", uri, r#"{"dates": ["2026-01-01"]}"#)
    };
    assert_eq!(
        start(r#"{"version": 1}"#).await.status,
        StatusCode::ACCEPTED
    );

    grant("viewer").await;
    let says = "workflow 'w1' starts runs of project 'q' (sub_workflow, foreach, on_failure or \
                dependent): user 'editor' needs the operator role in project 'q' (has viewer)";
    for a in [start(r#"{"version": 1}"#).await, rollback().await] {
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
        assert!(
            a.json["error"].as_str().unwrap().starts_with(says),
            "{}",
            a.json
        );
    }
    // Version 2 reaches nowhere else: it still starts, and backfills.
    assert_eq!(start("{}").await.status, StatusCode::ACCEPTED);
    assert_eq!(backfill().await.status, StatusCode::CREATED);
    // Stored again as the latest, version 1 is refused to backfills too.
    grant("operator").await;
    assert_eq!(rollback().await.status, StatusCode::OK);
    grant("viewer").await;
    let a = backfill().await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
    assert!(
        a.json["error"].as_str().unwrap().starts_with(says),
        "{}",
        a.json
    );
}

/// Cancelling a backfill does not cancel the later stages of its chain in projects where
/// the caller may not cancel them: it is refused, and nothing is cancelled.
#[tokio::test]
async fn a_backfill_is_not_cancelled_with_stages_in_projects_the_caller_may_not_operate() {
    let env = env().await;
    env.admin("POST", "/api/v1/projects", json!({"name": "q"}))
        .await;
    env.admin(
        "PUT",
        "/api/v1/projects/q/members/operator",
        json!({"role": "operator"}),
    )
    .await;
    let waits = "name: after\ntasks:\n- name: gate\n  type: dependent\n  dependent:\n    groups: [{ items: [{ workflow: etl, project: p }] }]\n";
    let a = call(
        &env.app,
        "POST",
        "/api/v1/projects/q/workflows",
        Some(ADMIN),
        waits,
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let uri = "/api/v1/projects/p/workflows/etl/backfill";
    let body = r#"{"dates": ["2026-01-01"], "with_dependents": true}"#;
    let made = env.as_("operator", "POST", uri, body).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.json);
    let root = made.json["id"].as_i64().unwrap();
    let dependent = made.json["dependents"][0]["id"].as_i64().unwrap();

    env.admin(
        "PUT",
        "/api/v1/projects/q/members/operator",
        json!({"role": "viewer"}),
    )
    .await;
    let cancel = format!("/api/v1/backfills/{root}/cancel");
    let a = env.as_("operator", "POST", &cancel, "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
    assert_eq!(
        a.json["error"],
        format!(
            "backfill {root} is followed by backfill {dependent} in project 'q', where user \
             'operator' may not cancel it (the operator role is needed): nothing was \
             cancelled; ask an operator there, or cancel the backfills of your projects one by one"
        )
    );
    for id in [root, dependent] {
        let b = env.store.get_backfill(id).await.unwrap().unwrap();
        assert_eq!(b.state.to_string(), "running", "backfill {id}");
        assert!(b.runs.iter().all(|r| r.state.to_string() == "pending"));
    }
    // Who may cancel both does.
    let a = env.as_("global", "POST", &cancel, "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["skipped"], 2);
}

/// A run records the user who started it, and a rerun the user who asked for it: their
/// roles are what the run's starts of runs in other projects need when they happen.
#[tokio::test]
async fn a_run_is_started_in_the_name_of_its_caller_and_a_rerun_in_the_rerunners() {
    let env = env().await;
    let users = env.store.list_users().await.unwrap();
    let id_of = |name: &str| users.iter().find(|u| u.name == name).map(|u| u.id);
    let store = &env.store;
    let by = |id: i64| async move {
        let row = store.get_instance(id).await.unwrap().unwrap();
        (row.options.started_by, row)
    };
    // The setup's run was started with SHOAL_TOKEN: a global admin who is not a user.
    assert_eq!(by(env.instance).await.0, None);

    let a = env
        .as_(
            "operator",
            "POST",
            "/api/v1/projects/p/workflows/etl/start",
            "{}",
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.json);
    let claimed = env.store.claim_commands("m", 1, 10).await.unwrap();
    let run = claimed[0].instance.id;
    let (started_by, row) = by(run).await;
    assert_eq!(started_by, id_of("operator"));

    let ended = WriteBatch {
        instance_updates: vec![shoal_store::InstanceUpdate {
            id: run,
            owner_epoch: row.owner_epoch,
            state: shoal_common::types::WorkflowState::Success,
            ended_at: Some(now_ms()),
        }],
        epochs: vec![(run, row.owner_epoch)],
        ..Default::default()
    };
    env.store.write_batch(&ended).await.unwrap();
    let uri = format!("/api/v1/instances/{run}/rerun");
    let a = env.as_("editor", "POST", &uri, "").await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.json);
    env.store.claim_commands("m", 2, 10).await.unwrap();
    assert_eq!(by(run).await.0, id_of("editor"));
}

/// Each audit row names what its mutation concerned where its path does not say it all:
/// the workflow and the version it made or acted on, the schedule, user, token (name and
/// id), secret (by name: its value appears nowhere), member and role, the command or
/// backfill it wrote.
#[tokio::test]
async fn an_audit_row_names_what_changed_and_never_a_secret_s_value() {
    let env = env().await;
    let edit = |method: &'static str, uri: String, body: String| {
        let env = &env;
        async move {
            let a = env.as_("editor", method, &uri, &body).await;
            assert!(
                a.status.is_success(),
                "{method} {uri}: {} {}",
                a.status,
                a.json
            );
        }
    };
    let wf = "/api/v1/projects/p/workflows";
    edit(
        "POST",
        wf.into(),
        format!("{WORKFLOW}  - {{ name: c, type: noop }}\n"),
    )
    .await;
    edit("POST", format!("{wf}/etl/offline"), String::new()).await;
    edit("POST", format!("{wf}/etl/online"), String::new()).await;
    edit(
        "POST",
        format!("{wf}/etl/versions/1/rollback"),
        String::new(),
    )
    .await;
    edit("POST", wf.into(), WORKFLOW.replace("etl", "gone")).await;
    edit("DELETE", format!("{wf}/gone"), String::new()).await;
    let schedule = format!("{wf}/etl/schedules/{}/disable", env.schedule);
    edit("POST", schedule, String::new()).await;
    let value = "postgres://etl:hunter2@db.internal/warehouse";
    let secret = "/api/v1/projects/p/secrets/warehouse".to_string();
    edit("PUT", secret.clone(), json!({ "value": value }).to_string()).await;
    edit("DELETE", secret, String::new()).await;
    let member = "/api/v1/projects/p/members/spare";
    env.admin("PUT", member, json!({"role": "viewer"})).await;
    env.admin("DELETE", member, json!(null)).await;
    env.admin("POST", "/api/v1/users/spare/disable", json!(null))
        .await;
    let token = format!("/api/v1/tokens/{}", env.spare_token);
    env.admin("DELETE", &token, json!(null)).await;

    let rows = env.audit("limit=1000").await;
    let spare_token = format!("token 'laptop' (id {})", env.spare_token);
    for (action, object) in [
        ("createUser", "user 'viewer'".to_string()),
        ("createToken", spare_token.clone()),
        ("setMember", "member 'viewer' as viewer".into()),
        ("applyWorkflow", "workflow 'etl' version 1".into()),
        ("createSchedule", format!("schedule {}", env.schedule)),
        ("startWorkflow", format!("command {}", env.command)),
        ("createBackfill", format!("backfill {}", env.backfill)),
        ("applyWorkflow", "workflow 'etl' version 2".into()),
        ("offlineWorkflow", "workflow 'etl' version 2".into()),
        ("onlineWorkflow", "workflow 'etl' version 2".into()),
        ("rollbackWorkflow", "workflow 'etl' version 3".into()),
        ("deleteWorkflow", "workflow 'gone' version 1".into()),
        ("disableSchedule", format!("schedule {}", env.schedule)),
        ("setSecret", "secret 'warehouse'".into()),
        ("deleteSecret", "secret 'warehouse'".into()),
        ("setMember", "member 'spare' as viewer".into()),
        ("removeMember", "member 'spare'".into()),
        ("disableUser", "user 'spare'".into()),
        ("revokeToken", spare_token.clone()),
    ] {
        let of_action: Vec<&Value> = rows.iter().filter(|r| r["action"] == action).collect();
        assert!(
            of_action
                .iter()
                .any(|r| r["object"] == object.as_str() && r["result"] == "ok"),
            "a {action} row names {object}: {of_action:?}"
        );
    }
    let everything = serde_json::to_string(&rows).unwrap();
    assert!(!everything.contains("hunter2"), "{everything}");
}

/// Every route under `/projects/{project}` (walked from the OpenAPI document, so a new
/// one is covered) answers 404 naming a project that does not exist, to a caller the role
/// check lets through; but applying a workflow, which creates the project it names. One
/// without a role there gets the 403 it gets for an existing project it has no role in:
/// the answer does not tell them which projects exist.
#[tokio::test]
async fn every_route_naming_a_missing_project_answers_404_naming_it() {
    let env = env().await;
    let doc = serde_json::to_value(openapi_document()).unwrap();
    let creating = ["applyWorkflow", "validateWorkflow"];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/api/v1/projects/{project}") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            let method = method.to_uppercase();
            let missing = uri(&env, &path.replace("{project}", "no_such_project"));
            let existing = missing.replace("no_such_project", "p");
            let a = env.as_("outsider", &method, &missing, "").await;
            let b = env.as_("outsider", &method, &existing, "").await;
            assert_eq!(
                a.status,
                StatusCode::FORBIDDEN,
                "{method} {missing}: {}",
                a.json
            );
            assert_eq!(
                b.status,
                StatusCode::FORBIDDEN,
                "{method} {existing}: {}",
                b.json
            );
            let hide = |s: &str| s.replace("no_such_project", "p");
            assert_eq!(
                hide(a.json["error"].as_str().unwrap()),
                b.json["error"].as_str().unwrap(),
                "the same answer but for the name it was given"
            );
            if creating.contains(&id) {
                continue;
            }
            let a = call(&env.app, &method, &missing, Some(ADMIN), "").await;
            assert_eq!(
                a.status,
                StatusCode::NOT_FOUND,
                "{method} {missing} ({id}): {}",
                a.json
            );
            assert_eq!(
                a.json["error"], "no project named 'no_such_project'",
                "{method} {missing} ({id})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked} operations");
    assert!(
        env.store
            .get_project("no_such_project")
            .await
            .unwrap()
            .is_none(),
        "no request made it"
    );
    // Applying a workflow creates the project it names.
    let uri = "/api/v1/projects/fresh/workflows";
    let a = call(&env.app, "POST", uri, Some(ADMIN), WORKFLOW).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let a = call(&env.app, "GET", uri, Some(ADMIN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json[0]["name"], "etl");
}
