//! `GET /metrics` on the api-server's router (real SQLite store, no network) and on the
//! metrics-only server of masters and workers (a real port).
//!
//! Metrics are process-wide and the tests of this file run in one process: only
//! `commands_written_are_counted` writes commands, so its deltas are exact.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use shoal_api_server::{ApiState, Auth, router, serve_metrics};
use shoal_common::types::WorkflowState;
use shoal_store::{InstanceUpdate, Store, WriteBatch};
use std::time::Duration;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const FLOW: &str = "\
name: etl
tasks:
  - { name: a, type: noop }
";

async fn app(token: Option<&str>) -> (Router, Store, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let state = ApiState {
        registry: None,
        secret: Default::default(),
        limits: Default::default(),
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
        store: store.clone(),
        auth: token.map_or(Auth::Off, |t| Auth::tokens(Some(t.into()))),
    };
    (router(state), store, dir)
}

async fn call(app: &Router, method: &str, uri: &str, body: &str) -> (StatusCode, String, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        // Without auth, writes need a JSON or YAML content type.
        .header(header::CONTENT_TYPE, "application/yaml")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        content_type,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

/// The value of the unlabelled series `name` in a `/metrics` text.
fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no series {name} in:\n{text}"))
        .parse()
        .unwrap()
}

async fn scrape(app: &Router) -> String {
    let (status, _, text) = call(app, "GET", "/metrics", "").await;
    assert_eq!(status, StatusCode::OK);
    text
}

#[tokio::test]
async fn metrics_are_served_at_the_root_without_a_token() {
    // A token guards writes; a scrape needs none.
    let (app, _store, _dir) = app(Some("s3cret")).await;
    let (status, content_type, text) = call(&app, "GET", "/metrics", "").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(text.contains("# TYPE shoal_queue_depth gauge\n"), "{text}");
    assert!(text.contains("# TYPE shoal_api_requests_total counter\n"));
    assert!(text.contains("shoal_dispatch_latency_seconds_bucket{le=\"+Inf\"} "));
    assert!(text.contains("shoal_worker_tasks_finished_total{state=\"killed\"} "));
    // Not part of the versioned API.
    let (status, _, _) = call(&app, "GET", "/api/v1/metrics", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn commands_written_are_counted() {
    let (app, store, _dir) = app(None).await;
    let written = |text: &str| value(text, "shoal_api_commands_written_total");
    let requests = |text: &str| value(text, "shoal_api_requests_total");
    let before = scrape(&app).await;

    // Refused starts and plain writes write no command.
    let start = "/api/v1/projects/default/workflows/etl/start";
    let (status, _, _) = call(&app, "POST", start, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&app, "POST", "/api/v1/projects/default/workflows", FLOW).await;
    assert_eq!(status, StatusCode::CREATED);
    let after_refusal = scrape(&app).await;
    assert_eq!(written(&after_refusal), written(&before));
    assert!(requests(&after_refusal) >= requests(&before) + 2.0);

    let (status, _, text) = call(&app, "POST", start, "").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    let after_start = scrape(&app).await;
    assert!(written(&after_start) >= 1.0);
    assert_eq!(written(&after_start), written(&before) + 1.0);

    // A rerun is a command too.
    let inst = store
        .claim_commands("m1:5678", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    let batch = WriteBatch {
        instance_updates: vec![InstanceUpdate {
            id: inst.id,
            owner_epoch: inst.owner_epoch,
            state: WorkflowState::Success,
            ended_at: Some(1_767_225_700_000),
        }],
        ..Default::default()
    };
    store.write_batch(&batch).await.unwrap();
    let rerun = format!("/api/v1/instances/{}/rerun", inst.id);
    let (status, _, text) = call(&app, "POST", &rerun, "").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{text}");
    // A second click is refused (409) and writes nothing.
    let (status, _, _) = call(&app, "POST", &rerun, "").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(written(&scrape(&app).await), written(&before) + 2.0);
}

#[tokio::test]
async fn the_metrics_server_serves_metrics_and_health_until_shutdown() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve_metrics(listener, shutdown.clone()));

    let get = |path: &'static str| async move {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        conn.write_all(req.as_bytes()).await.unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = get("/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{answer}"
    );
    assert!(answer.contains("# TYPE shoal_worker_tasks_running gauge\n"));
    assert!(get("/health").await.starts_with("HTTP/1.1 200"));
    assert!(get("/api/v1/instances").await.starts_with("HTTP/1.1 404"));

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the metrics server stops on shutdown")
        .unwrap()
        .unwrap();
}
