//! The OpenAPI document against the router it describes: every (method, path) the router
//! answers is in the served document, and every documented operation is answered. The
//! router's paths are read from the router itself (its `Debug` output), not from the list
//! it was built from, so a route added past that list is caught too.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::Value;
use shoal_api_server::{ApiState, Auth, openapi_document, router};
use shoal_store::Store;
use std::collections::BTreeSet;
use tempfile::TempDir;
use tower::ServiceExt;

/// The methods probed on every path.
const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
];

async fn app() -> (Router, TempDir) {
    app_with_token(None).await
}

async fn app_with_token(token: Option<&str>) -> (Router, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let state = ApiState {
        store,
        auth: token.map_or(Auth::Off, |t| Auth::tokens(Some(t.into()))),
        registry: None,
        secret: Default::default(),
        limits: Default::default(),
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
    };
    (router(state), dir)
}

async fn call(app: &Router, method: &Method, uri: &str) -> (StatusCode, String, String) {
    call_with(app, method, uri, None).await
}

async fn call_with(
    app: &Router,
    method: &Method,
    uri: &str,
    bearer: Option<&str>,
) -> (StatusCode, String, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if method != Method::GET {
        // Without auth, writes need a JSON or YAML content type.
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some(t) = bearer {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req.body(Body::empty()).unwrap();
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
    (status, content_type, String::from_utf8_lossy(&bytes).into())
}

/// Whether the router has a route for `method` at `path` (a template): the answer is
/// neither a 405 nor the fallback's "no such endpoint" 404. Path parameters get values
/// that exist nowhere, so handlers answer their own 404s, 400s or 503s.
async fn answers(app: &Router, method: &Method, path: &str) -> bool {
    let (status, _, body) = call(app, method, &probe_uri(path)).await;
    let fallback_404 = status == StatusCode::NOT_FOUND && body.contains("no such endpoint");
    !(status == StatusCode::METHOD_NOT_ALLOWED || fallback_404)
}

/// `path` (a template) with values for its parameters.
fn probe_uri(path: &str) -> String {
    let uri = path
        .replace("{project}", "default")
        .replace("{name}", "probe")
        .replace("{id}", "987654")
        .replace("{action}", "stop")
        .replace("{version}", "1")
        .replace("{user}", "probe")
        .replace("{workflow}", "probe")
        .replace("{trigger}", "probe")
        .replace("{event}", "probe")
        .replace("{token}", "probe");
    assert!(
        !uri.contains('{'),
        "no probe value for a parameter of {path}"
    );
    uri
}

/// Every route path the router holds, read from its `Debug` output (axum has no other
/// way to list routes).
fn router_paths(app: &Router) -> BTreeSet<String> {
    let text = format!("{app:?}");
    let paths: BTreeSet<String> = text
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with('/') && !s.contains("__private__axum"))
        .map(str::to_string)
        .collect();
    assert!(
        paths.contains("/api/v1/instances/{id}") && paths.contains("/metrics"),
        "the router's Debug output no longer shows its paths; update router_paths: {paths:?}"
    );
    paths
}

/// Paths of the router that are not the API's: the web UI (everything outside `/api`
/// and `/metrics`) and the interactive docs, which show the document itself.
fn outside_the_api(path: &str) -> bool {
    let api = path.starts_with("/api/") || path == "/metrics";
    !api || path == "/api/docs" || path.starts_with("/api/docs/")
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| METHODS.iter().any(|m| m.as_str().eq_ignore_ascii_case(k)))
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect()
}

#[tokio::test]
async fn the_document_and_the_router_describe_the_same_operations() {
    let (app, _dir) = app().await;
    let (status, content_type, text) = call(&app, &Method::GET, "/api/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let served: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(served["openapi"], "3.1.0");
    let built: Value = serde_json::to_value(openapi_document()).unwrap();
    assert_eq!(
        served, built,
        "`shoal openapi` prints what the server serves"
    );
    let documented = documented(&served);

    let mut answered = BTreeSet::new();
    for path in router_paths(&app)
        .into_iter()
        .filter(|p| !outside_the_api(p))
    {
        for method in &METHODS {
            if answers(&app, method, &path).await {
                answered.insert((method.to_string(), path.clone()));
            }
        }
    }
    let undocumented: Vec<_> = answered.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "the router answers these, the OpenAPI document lacks them: {undocumented:?}"
    );
    let unanswered: Vec<_> = documented.difference(&answered).collect();
    assert!(
        unanswered.is_empty(),
        "the OpenAPI document has these, the router does not answer them: {unanswered:?}"
    );
    assert!(answered.len() >= 37, "{answered:?}");
}

#[tokio::test]
async fn every_operation_documents_its_errors_and_names_its_schemas() {
    let doc = serde_json::to_value(openapi_document()).unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "InstanceSummary",
        "InstanceDetail",
        "TaskInstance",
        "Workflow",
        "WorkflowSummary",
        "WorkflowVersion",
        "Validated",
        "Schedule",
        "Backfill",
        "Node",
        "TaskGroup",
        "AlertChannel",
        "Alert",
        "CommandStatus",
        "Project",
        "Session",
        "ErrorBody",
        "WorkflowDef",
    ] {
        assert!(schemas.contains_key(name), "no schema {name}");
    }
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_string()), "operationId {id} is used twice");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.contains_key("500"), "{method} {path}: no 500");
            let open = [
                "/api/v1/health",
                "/api/v1/openapi.json",
                "/api/v1/schema/workflow",
                "/metrics",
                "/api/v1/callbacks/{token}",
            ];
            if !open.contains(&path.as_str()) {
                assert!(responses.contains_key("401"), "{method} {path}: no 401");
                assert!(op["security"].is_array(), "{method} {path}: no security");
            }
            for (status, r) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
    // Nullable fields are required (always sent, maybe null); optional ones are not.
    let summary = &schemas["InstanceSummary"];
    let required = summary["required"].as_array().unwrap();
    assert!(required.contains(&"ended_at".into()), "{summary}");
    assert_eq!(
        summary["properties"]["ended_at"]["type"],
        serde_json::json!(["string", "null"])
    );
    let error = &schemas["ErrorBody"];
    assert_eq!(error["required"], serde_json::json!(["error"]));
    let instances = &doc["paths"]["/api/v1/instances"]["get"];
    assert!(
        instances["responses"]["200"]["headers"]["X-Total-Count"].is_object(),
        "{instances}"
    );
}

#[tokio::test]
async fn the_interactive_docs_are_served_from_the_binary() {
    let (app, _dir) = app().await;
    let (status, _, _) = call(&app, &Method::GET, "/api/docs").await;
    assert!(status.is_redirection(), "{status}");
    let (status, content_type, page) = call(&app, &Method::GET, "/api/docs/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let (status, _, config) = call(&app, &Method::GET, "/api/docs/swagger-initializer.js").await;
    assert_eq!(status, StatusCode::OK);
    assert!(config.contains("/api/v1/openapi.json"), "{config}");
    // Every script and style the page loads is served here, none from elsewhere.
    for asset in ["swagger-ui-bundle.js", "swagger-ui.css"] {
        assert!(page.contains(asset), "{page}");
        let (status, _, _) = call(&app, &Method::GET, &format!("/api/docs/{asset}")).await;
        assert_eq!(status, StatusCode::OK, "{asset}");
    }
    assert!(
        !page.contains("https://") && !page.contains("http://"),
        "{page}"
    );
}

/// With a token, every operation of the document (the router's, by the test above) but
/// the open ones answers 401 to a request without it or with another: a new route cannot
/// be left open by mistake.
#[tokio::test]
async fn with_a_token_every_operation_but_the_open_ones_needs_it() {
    let (app, _dir) = app_with_token(Some("s3cret")).await;
    let doc = serde_json::to_value(openapi_document()).unwrap();
    // What each open operation answers without a token. A trigger and a callback URL
    // take their own credentials, not a user's token: the probes name none that exist.
    let open = [
        ("GET", "/api/v1/health", StatusCode::OK),
        ("GET", "/api/v1/openapi.json", StatusCode::OK),
        ("GET", "/api/v1/schema/workflow", StatusCode::OK),
        ("GET", "/metrics", StatusCode::OK),
        (
            "POST",
            "/api/v1/hooks/{project}/{workflow}/{trigger}",
            StatusCode::NOT_FOUND,
        ),
        (
            "GET",
            "/api/v1/hooks/{project}/{workflow}/{trigger}",
            StatusCode::NOT_FOUND,
        ),
        (
            "PUT",
            "/api/v1/hooks/{project}/{workflow}/{trigger}",
            StatusCode::NOT_FOUND,
        ),
        ("POST", "/api/v1/callbacks/{token}", StatusCode::NOT_FOUND),
    ];
    let mut guarded = 0;
    for (method, path) in documented(&doc) {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let uri = probe_uri(&path);
        let (without, ..) = call_with(&app, &m, &uri, None).await;
        let (wrong, ..) = call_with(&app, &m, &uri, Some("guess")).await;
        let (with, ..) = call_with(&app, &m, &uri, Some("s3cret")).await;
        if let Some((.., answer)) = open.iter().find(|(m, p, _)| (*m, *p) == (&method, &path)) {
            assert_eq!(without, *answer, "{method} {path} is open");
            continue;
        }
        assert_eq!(
            (without, wrong),
            (StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED),
            "{method} {path}"
        );
        assert_ne!(
            with,
            StatusCode::UNAUTHORIZED,
            "{method} {path} takes the token"
        );
        guarded += 1;
    }
    assert!(guarded >= 35, "{guarded} guarded operations");
}
