//! python, http and sql tasks, and timeouts, run by a real worker: a real python3, a real
//! HTTP server (axum on 127.0.0.1:0), a real SQLite file and the real Postgres on
//! 127.0.0.1:5432.

use super::*;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::{any, get};
use serde_json::{Value, json};
use std::time::Instant;

const POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A task from its full definition; the type comes from the definition's `type`.
pub(super) fn def_task(id: i64, definition: Value, master: &str) -> TaskSpec {
    let mut definition = definition;
    definition["name"] = json!(format!("t{id}"));
    TaskSpec {
        task_instance_id: id,
        workflow_instance_id: 200,
        attempt: 1,
        name: format!("t{id}"),
        task_type: definition["type"].as_str().unwrap().to_string(),
        definition_json: definition.to_string(),
        params: HashMap::new(),
        master_addr: master.into(),
        owner_epoch: 1,
        tenant: String::new(),
        ..Default::default()
    }
}

pub(super) async fn log_text(w: &mut Setup, t: &TaskSpec) -> String {
    String::from_utf8(w.read_log(t, 0, 0).await.expect("log found")).unwrap()
}

pub(super) fn outputs(e: &TaskEvent) -> BTreeMap<&str, &str> {
    e.output
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

// ---------------------------------------------------------------- python

#[tokio::test]
async fn python_task_sets_output_params_from_its_prints() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let mut t = def_task(
        101,
        json!({
            "type": "python",
            "script": "import os, sys\n\
                       print('hello from python')\n\
                       print('${setValue(x=1)}')\n\
                       print('${setValue(greeting=%s)}' % os.environ['greeting'])\n\
                       print('to stderr', file=sys.stderr)\n",
        }),
        &master.addr,
    );
    t.params.insert("greeting".into(), "hi there".into());
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [101]);

    let events = master.until_done(101).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{events:?}"
    );
    assert_eq!(
        outputs(&events[1]),
        BTreeMap::from([("greeting", "hi there"), ("x", "1")])
    );
    let log = log_text(&mut w, &t).await;
    // stdout and stderr in the order the script wrote them, lines intact.
    assert_eq!(
        log,
        "hello from python\n${setValue(x=1)}\n${setValue(greeting=hi there)}\nto stderr\n"
    );
}

#[tokio::test]
async fn python_exit_status_is_the_task_exit_code() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = def_task(
        102,
        json!({"type": "python", "script": "print('before')\nraise SystemExit(2)"}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [102]);
    let events = master.until_done(102).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Failure]
    );
    assert_eq!(events[1].exit_code, 2);
    assert!(
        events[1].message.contains("code 2"),
        "{}",
        events[1].message
    );
    assert!(log_text(&mut w, &t).await.starts_with("before\n"));

    let empty = def_task(103, json!({"type": "python", "script": " "}), &master.addr);
    assert_eq!(w.dispatch(vec![empty]).await.accepted, [103]);
    let events = master.until_done(103).await;
    assert_eq!(kinds(&events), [TaskEventKind::Failure]);
    assert!(
        events[0].message.contains("no script"),
        "{}",
        events[0].message
    );
}

// ---------------------------------------------------------------- http

/// What the test server saw of one request.
#[derive(Debug)]
struct Seen {
    method: Method,
    headers: HeaderMap,
    body: String,
}

struct HttpServer {
    base: String,
    seen: mpsc::UnboundedReceiver<Seen>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start_http_server() -> HttpServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (tx, seen) = mpsc::unbounded_channel::<Seen>();
    let app = axum::Router::new()
        .route(
            "/item",
            get(|| async {
                axum::Json(json!({
                    "data": {"id": 42, "name": "shoal", "tags": ["a", "b"], "ratio": 0.5},
                    "a.b": true
                }))
            }),
        )
        .route(
            "/echo",
            any(
                |State(tx): State<mpsc::UnboundedSender<Seen>>,
                 method: Method,
                 headers: HeaderMap,
                 body: String| async move {
                    let _ = tx.send(Seen {
                        method,
                        headers,
                        body,
                    });
                    (StatusCode::CREATED, axum::Json(json!({"ok": true})))
                },
            ),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "nothing here") }),
        )
        .route(
            "/hang",
            get(|| async {
                // A server that never answers in time: what the timeout tests hit.
                tokio::time::sleep(Duration::from_secs(120)).await;
                "late"
            }),
        )
        .route("/text", get(|| async { "plain text, not json" }))
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    HttpServer {
        base,
        seen,
        _stop: stop,
    }
}

fn http_task(id: i64, http: Value, master: &str) -> TaskSpec {
    def_task(id, json!({"type": "http", "http": http}), master)
}

#[tokio::test]
async fn http_task_extracts_json_outputs() {
    let server = start_http_server().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let url = format!("{}/item", server.base);
    let t = http_task(
        111,
        json!({
            "url": url,
            "outputs": {
                "id": "$.data.id",
                "name": "$.data.name",
                "tags": "$.data.tags",
                "first_tag": "$.data.tags[0]",
                "ratio": "$['data']['ratio']",
                "dotted": "$['a.b']",
            },
        }),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [111]);
    let events = master.until_done(111).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{events:?}"
    );
    assert_eq!(
        outputs(&events[1]),
        BTreeMap::from([
            ("dotted", "true"),
            ("first_tag", "a"),
            ("id", "42"),
            ("name", "shoal"),
            ("ratio", "0.5"),
            ("tags", r#"["a","b"]"#),
        ])
    );
    let log = log_text(&mut w, &t).await;
    assert!(log.contains(&format!("[shoal] GET {url}\n")), "{log}");
    assert!(log.contains("[shoal] response status: 200 OK\n"), "{log}");
    assert!(log.contains(r#""name":"shoal""#), "{log}");

    // A path the response does not have fails the task and names the path.
    let t = http_task(
        112,
        json!({"url": url, "outputs": {"id": "$.data.id", "owner": "$.data.owner.name"}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [112]);
    let events = master.until_done(112).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Failure]
    );
    let message = &events[1].message;
    assert!(
        message.contains("'$.data.owner.name'") && message.contains("owner"),
        "{message}"
    );
    assert!(log_text(&mut w, &t).await.contains(message.as_str()));

    // Outputs from a body that is not JSON.
    let t = http_task(
        113,
        json!({"url": format!("{}/text", server.base), "outputs": {"x": "$.x"}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t]).await.accepted, [113]);
    let events = master.until_done(113).await;
    assert_eq!(events.last().unwrap().kind, TaskEventKind::Failure as i32);
    assert!(
        events.last().unwrap().message.contains("not JSON"),
        "{events:?}"
    );
}

#[tokio::test]
async fn http_task_sends_method_headers_and_body() {
    let mut server = start_http_server().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = http_task(
        114,
        json!({
            "url": format!("{}/echo", server.base),
            "method": "post",
            "headers": {"Content-Type": "application/json", "X-Token": "s3cret"},
            "body": r#"{"k":"v"}"#,
            "expected_status": [201],
            "outputs": {"ok": "$.ok"},
        }),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [114]);
    let events = master.until_done(114).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Success],
        "{events:?}"
    );
    assert_eq!(outputs(&events[1]), BTreeMap::from([("ok", "true")]));

    let seen = tokio::time::timeout(WAIT, server.seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.method, Method::POST);
    assert_eq!(seen.headers["x-token"], "s3cret");
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(seen.body, r#"{"k":"v"}"#);

    let log = log_text(&mut w, &t).await;
    assert!(log.contains("[shoal] POST "), "{log}");
    assert!(
        log.contains("request headers: content-type, x-token"),
        "{log}"
    );
    assert!(
        !log.contains("s3cret"),
        "header values stay out of the log: {log}"
    );
    assert!(log.contains("201 Created"), "{log}");

    // 201 is not what this task expects.
    let t = http_task(
        115,
        json!({"url": format!("{}/echo", server.base), "method": "PUT", "expected_status": [200, 204]}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t]).await.accepted, [115]);
    let events = master.until_done(115).await;
    assert_eq!(events.last().unwrap().kind, TaskEventKind::Failure as i32);
    let message = &events.last().unwrap().message;
    assert!(
        message.contains("201") && message.contains("200, 204"),
        "{message}"
    );
    assert_eq!(server.seen.recv().await.unwrap().method, Method::PUT);
}

#[tokio::test]
async fn http_task_with_an_unexpected_status_fails_and_logs_the_body() {
    let server = start_http_server().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = http_task(
        116,
        json!({"url": format!("{}/missing", server.base)}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [116]);
    let events = master.until_done(116).await;
    assert_eq!(
        kinds(&events),
        [TaskEventKind::Running, TaskEventKind::Failure]
    );
    let message = &events[1].message;
    assert!(
        message.contains("404") && message.contains("2xx"),
        "{message}"
    );
    let log = log_text(&mut w, &t).await;
    assert!(log.contains("404 Not Found"), "{log}");
    assert!(log.contains("nothing here\n"), "{log}");

    // Nothing listens there: the failure says why.
    let t = http_task(
        117,
        json!({"url": format!("http://{}/", free_addr())}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t]).await.accepted, [117]);
    let events = master.until_done(117).await;
    let last = events.last().unwrap();
    assert_eq!(last.kind, TaskEventKind::Failure as i32);
    assert!(last.message.contains("request failed"), "{}", last.message);
}

#[tokio::test]
async fn killing_an_http_task_cancels_its_request() {
    let server = start_http_server().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = http_task(
        118,
        json!({"url": format!("{}/hang", server.base)}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [118]);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);
    let asked = Instant::now();
    assert!(w.kill(&t).await);
    assert_eq!(
        kinds(&master.until_done(118).await),
        [TaskEventKind::Killed]
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert!(log_text(&mut w, &t).await.contains("[shoal] task killed"));
}

#[tokio::test]
async fn http_task_timeout_fail_cancels_the_request() {
    let server = start_http_server().await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = def_task(
        119,
        json!({
            "type": "http",
            "http": {"url": format!("{}/hang", server.base)},
            "timeout": "1s",
            "timeout_strategy": "fail",
        }),
        &master.addr,
    );
    let sent = Instant::now();
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [119]);
    let events = master.until_done(119).await;
    assert_eq!(
        kinds(&events),
        [
            TaskEventKind::Running,
            TaskEventKind::Timeout,
            TaskEventKind::Failure
        ]
    );
    assert_eq!(events[1].message, "passed its timeout of 1s");
    assert_eq!(events[2].message, "timed out after 1s");
    let took = sent.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(
        log_text(&mut w, &t)
            .await
            .contains("[shoal] timed out after 1s")
    );
}

// ---------------------------------------------------------------- sql

pub(super) fn sql_task(
    id: i64,
    datasource: &str,
    query: &str,
    output: &str,
    master: &str,
) -> TaskSpec {
    def_task(
        id,
        json!({
            "type": "sql",
            "sql": {"datasource": datasource, "query": query, "output": output},
        }),
        master,
    )
}

/// Runs one task to its end and returns its terminal event.
pub(super) async fn run_one(w: &mut Setup, master: &mut MasterProc, t: &TaskSpec) -> TaskEvent {
    assert_eq!(
        w.dispatch(vec![t.clone()]).await.accepted,
        [t.task_instance_id]
    );
    master.until_done(t.task_instance_id).await.pop().unwrap()
}

pub(super) fn json_output(e: &TaskEvent, name: &str) -> Value {
    serde_json::from_str(&e.output[name]).unwrap_or_else(|err| panic!("{name}: {err}"))
}

#[tokio::test]
async fn sql_task_on_a_sqlite_file() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lite.db");
    let datasources = BTreeMap::from([
        (
            "lite".to_string(),
            format!("sqlite://{}?mode=rwc", db.display()),
        ),
        ("pg".to_string(), POSTGRES_URL.to_string()),
    ]);
    let mut w = start_worker_with(4, datasources).await;

    let setup = sql_task(
        121,
        "lite",
        "CREATE TABLE t (id INTEGER, name TEXT, score REAL, ok BOOLEAN, note TEXT);
         INSERT INTO t VALUES (1, 'a', 1.5, 1, NULL), (2, 'b', 2.0, 0, 'x'), (3, 'c', NULL, 1, 'y');",
        "none",
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &setup).await;
    assert_eq!(done.kind, TaskEventKind::Success as i32, "{done:?}");
    assert!(done.output.is_empty());
    let log = log_text(&mut w, &setup).await;
    assert!(
        log.contains("[shoal] sql on datasource 'lite':\nCREATE TABLE t"),
        "{log}"
    );
    assert!(log.contains("0 rows returned, 3 rows affected"), "{log}");

    let query = "SELECT id, name, score, ok, note FROM t ORDER BY id";
    let t = sql_task(122, "lite", query, "first_row", &master.addr);
    let first = run_one(&mut w, &mut master, &t).await;
    assert_eq!(first.kind, TaskEventKind::Success as i32, "{first:?}");
    assert_eq!(
        outputs(&first),
        BTreeMap::from([
            ("id", "1"),
            ("name", "a"),
            ("note", ""),
            ("ok", "true"),
            ("score", "1.5")
        ])
    );

    let t = sql_task(123, "lite", query, "all_rows", &master.addr);
    let all = run_one(&mut w, &mut master, &t).await;
    assert_eq!(all.kind, TaskEventKind::Success as i32, "{all:?}");
    assert_eq!(all.output.len(), 5);
    assert_eq!(json_output(&all, "id"), json!([1, 2, 3]));
    assert_eq!(json_output(&all, "name"), json!(["a", "b", "c"]));
    assert_eq!(json_output(&all, "score"), json!([1.5, 2.0, null]));
    assert_eq!(json_output(&all, "ok"), json!([true, false, true]));
    assert_eq!(json_output(&all, "note"), json!([null, "x", "y"]));
    assert!(log_text(&mut w, &t).await.contains("3 rows returned"));

    // A database error: its message in the event and the log.
    let t = sql_task(124, "lite", "SELECT * FROM nope", "none", &master.addr);
    let failed = run_one(&mut w, &mut master, &t).await;
    assert_eq!(failed.kind, TaskEventKind::Failure as i32);
    assert!(
        failed.message.contains("no such table: nope"),
        "{}",
        failed.message
    );
    assert!(log_text(&mut w, &t).await.contains("no such table: nope"));

    // An unknown datasource: named, with the configured ones.
    let t = sql_task(125, "ghost", "SELECT 1", "none", &master.addr);
    let failed = run_one(&mut w, &mut master, &t).await;
    assert_eq!(failed.kind, TaskEventKind::Failure as i32);
    assert!(
        failed.message.contains("unknown datasource 'ghost'")
            && failed.message.contains("lite, pg"),
        "{}",
        failed.message
    );
    assert!(log_text(&mut w, &t).await.contains("'ghost'"));
}

#[tokio::test]
async fn sql_task_on_postgres() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let datasources = BTreeMap::from([("pg".to_string(), POSTGRES_URL.to_string())]);
    let mut w = start_worker_with(4, datasources).await;

    let t = sql_task(
        131,
        "pg",
        "SELECT 1 AS one, 'a' AS txt",
        "first_row",
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(done.kind, TaskEventKind::Success as i32, "{done:?}");
    assert_eq!(outputs(&done), BTreeMap::from([("one", "1"), ("txt", "a")]));
    assert!(log_text(&mut w, &t).await.contains("1 rows returned"));

    let t = sql_task(
        132,
        "pg",
        "SELECT g AS n, g % 2 = 0 AS even, g * 1.5 AS half, NULL::text AS nothing, \
                DATE '2026-01-01' + g AS day \
         FROM generate_series(1, 3) AS g",
        "all_rows",
        &master.addr,
    );
    let all = run_one(&mut w, &mut master, &t).await;
    assert_eq!(all.kind, TaskEventKind::Success as i32, "{all:?}");
    assert_eq!(json_output(&all, "n"), json!([1, 2, 3]));
    assert_eq!(json_output(&all, "even"), json!([false, true, false]));
    assert_eq!(json_output(&all, "half"), json!([1.5, 3.0, 4.5]));
    assert_eq!(json_output(&all, "nothing"), json!([null, null, null]));
    assert_eq!(
        json_output(&all, "day"),
        json!(["2026-01-02", "2026-01-03", "2026-01-04"])
    );

    let t = sql_task(
        133,
        "pg",
        "SELECT * FROM shoal_no_such_table",
        "none",
        &master.addr,
    );
    let failed = run_one(&mut w, &mut master, &t).await;
    assert_eq!(failed.kind, TaskEventKind::Failure as i32);
    assert!(
        failed
            .message
            .contains("relation \"shoal_no_such_table\" does not exist"),
        "{}",
        failed.message
    );
}

#[tokio::test]
async fn sql_task_timeout_fail_cancels_the_statement_on_the_server() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let datasources = BTreeMap::from([("pg".to_string(), POSTGRES_URL.to_string())]);
    let mut w = start_worker_with(4, datasources).await;
    let marker = format!("shoal_timeout_test_{}_{}", std::process::id(), now_nanos());
    let t = def_task(
        134,
        json!({
            "type": "sql",
            "sql": {"datasource": "pg", "query": format!("SELECT pg_sleep(60) AS {marker}")},
            "timeout": "1s",
            "timeout_strategy": "fail",
        }),
        &master.addr,
    );
    let done = run_one(&mut w, &mut master, &t).await;
    assert_eq!(done.kind, TaskEventKind::Failure as i32, "{done:?}");
    assert_eq!(done.message, "timed out after 1s");

    // The statement does not run on in the server.
    let pool = sqlx::PgPool::connect(POSTGRES_URL).await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let running: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()",
        )
        .bind(&marker)
        .fetch_one(&pool)
        .await
        .unwrap();
        if running == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "statement still running on the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pool.close().await;
}

pub(super) fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

// ---------------------------------------------------------------- timeouts

#[tokio::test]
async fn timeout_fail_kills_the_process_group() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let fifo = w.path("pids");
    mkfifo(&fifo);
    let t = def_task(
        141,
        json!({
            "type": "shell",
            "command": format!("sleep 30 &\necho \"$$ $!\" > '{}'\nwait", fifo.display()),
            "timeout": "1s",
            "timeout_strategy": "fail",
        }),
        &master.addr,
    );
    let sent = Instant::now();
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [141]);
    let pids: Vec<i32> = read_fifo(&fifo)
        .await
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");

    let events = master.until_done(141).await;
    let took = sent.elapsed();
    assert_eq!(
        kinds(&events),
        [
            TaskEventKind::Running,
            TaskEventKind::Timeout,
            TaskEventKind::Failure
        ]
    );
    assert_eq!(events[2].message, "timed out after 1s");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "{took:?}"
    );
    for pid in pids {
        wait_gone(pid).await;
    }
    let log = log_text(&mut w, &t).await;
    assert!(log.contains("[shoal] timed out after 1s"), "{log}");
    assert!(!log.contains("task killed"), "{log}");
}

#[tokio::test]
async fn timeout_warn_logs_once_and_lets_the_task_finish() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = start_worker(4).await;
    let t = def_task(
        142,
        json!({
            "type": "shell",
            "command": "sleep 1.5\necho done\necho '${setValue(finished=yes)}'",
            "timeout": "1s",
        }),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [142]);
    let events = master.until_done(142).await;
    assert_eq!(
        kinds(&events),
        [
            TaskEventKind::Running,
            TaskEventKind::Timeout,
            TaskEventKind::Success
        ],
        "{events:?}"
    );
    assert_eq!(events[1].message, "passed its timeout of 1s");
    assert_eq!(outputs(&events[2]), BTreeMap::from([("finished", "yes")]));
    let log = log_text(&mut w, &t).await;
    let warning = "[shoal] warning: task exceeded its timeout of 1s\n";
    assert_eq!(log.matches(warning).count(), 1, "{log}");
    assert!(log.find(warning) < log.find("done\n"), "{log}");
}
