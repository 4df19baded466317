//! shoal's REST API.
//!
//! The api-server validates input, stores definitions and writes commands; it never changes
//! the state of a run itself (the owning master does, also when asked to stop or pause).
//! Everything lives under `/api/v1` (and Prometheus' `GET /metrics`), leaving `/` free for
//! the web UI. Errors are JSON `{"error": "..."}` bodies, produced in one place
//! ([`error::Error`]'s `IntoResponse`).

mod actions;
mod alerts;
mod auth;
mod backfills;
mod channels;
mod cluster;
mod commands;
pub mod error;
mod extract;
mod instances;
mod logs;
mod metrics;
mod schedules;
mod task_groups;
mod workflows;

pub use error::{Error, Result};
pub use metrics::{metrics_router, serve_metrics};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::{delete, get, post};
use shoal_common::registry::Registry;
use shoal_common::store::Store;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

/// What the api-server is started with.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    /// When set, mutating requests need `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Cluster membership, for `GET /cluster` (None: the api-server was started without
    /// a registry, and the listing says so).
    pub registry: Option<Registry>,
}

/// The state handlers see: the public [`ApiState`] plus what the server keeps for itself.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub store: Store,
    pub registry: Option<Registry>,
    /// gRPC channels to workers and masters.
    pub peers: Arc<channels::Channels>,
}

/// The whole HTTP surface: `/api/v1/...`, `GET /metrics` (Prometheus) plus JSON 404/405
/// answers for anything else.
pub fn router(state: ApiState) -> Router {
    let ctx = Ctx {
        store: state.store,
        registry: state.registry,
        peers: Arc::new(channels::Channels::default()),
    };
    let token: Option<Arc<str>> = state.token.filter(|t| !t.is_empty()).map(Arc::from);

    let api = Router::new()
        .route("/health", get(health))
        .route(
            "/projects/{project}/workflows",
            post(workflows::apply).get(workflows::list),
        )
        .route("/projects/{project}/workflows/{name}", get(workflows::get))
        .route(
            "/projects/{project}/workflows/{name}/start",
            post(commands::start),
        )
        .route(
            "/projects/{project}/workflows/{name}/schedules",
            post(schedules::create).get(schedules::list),
        )
        .route(
            "/projects/{project}/workflows/{name}/schedules/{id}",
            get(schedules::get)
                .put(schedules::update)
                .delete(schedules::delete),
        )
        .route(
            "/projects/{project}/workflows/{name}/schedules/{id}/enable",
            post(schedules::enable),
        )
        .route(
            "/projects/{project}/workflows/{name}/schedules/{id}/disable",
            post(schedules::disable),
        )
        .route(
            "/projects/{project}/workflows/{name}/schedules/{id}/preview",
            get(schedules::preview),
        )
        .route(
            "/projects/{project}/workflows/{name}/backfill",
            post(backfills::create),
        )
        .route("/backfills", get(backfills::list))
        .route("/backfills/{id}", get(backfills::get))
        .route("/backfills/{id}/cancel", post(backfills::cancel))
        .route("/commands/{id}", get(commands::status))
        .route("/cluster", get(cluster::nodes))
        .route("/instances", get(instances::list))
        .route("/instances/{id}", get(instances::get))
        .route("/instances/{id}/{action}", post(actions::act))
        .route("/task-instances/{id}", get(instances::task))
        .route("/task-instances/{id}/log", get(logs::task_log))
        .route(
            "/task-groups",
            post(task_groups::create).get(task_groups::list),
        )
        .route("/task-groups/{name}", delete(task_groups::delete))
        .route(
            "/alert-channels",
            post(alerts::create_channel).get(alerts::list_channels),
        )
        .route("/alert-channels/{name}", delete(alerts::delete_channel))
        .route("/alerts", get(alerts::list))
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(ctx);

    Router::new()
        .route("/metrics", get(metrics::handler))
        .nest("/api/v1", api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
}

/// Serves `router(state)` on `listener` until `shutdown` is cancelled, then finishes the
/// requests in flight and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    shutdown: CancellationToken,
) -> Result<()> {
    let addr = listener.local_addr()?;
    let auth = state.token.as_deref().is_some_and(|t| !t.is_empty());
    tracing::info!(%addr, auth, "api-server listening");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    tracing::info!(%addr, "api-server stopped");
    Ok(())
}

async fn health() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

async fn not_found(uri: axum::http::Uri) -> Error {
    Error::NotFound(format!("no such endpoint: {}", uri.path()))
}

async fn method_not_allowed(method: Method) -> Error {
    Error::MethodNotAllowed(method.to_string())
}
