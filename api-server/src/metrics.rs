//! `GET /metrics`: the process's metrics ([`shoal_common::metrics`]) for Prometheus, and
//! the api-server's own counters.
//!
//! The api-server serves `/metrics` on its API port. A process without a REST API (a
//! cluster master or worker) serves it on a port of its own with [`serve_metrics`].

use crate::Result;
use axum::Router;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use shoal_common::metrics::{self, API_COMMANDS_WRITTEN, API_REQUESTS};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// `GET /metrics`: every metric of the process in the Prometheus text format. No auth,
/// like the other reads.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "getMetrics",
    tag = "meta",
    responses((status = 200, description = "Every metric of the process in the Prometheus text format (0.0.4)", body = String, content_type = "text/plain"))
)]
pub(crate) async fn handler() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(),
    )
}

/// Middleware of the REST API: counts every request, and the commands written.
///
/// A command is written exactly when a command route answers 202 (start, and the
/// resume/rerun/resubmit-failed actions; stop and pause answer 202 without writing one),
/// so the count is taken from the answer instead of from inside each handler. A webhook
/// call counts its own: its answer does not tell (a sync one answers 200 or 504, and a
/// repeated idempotency key writes none).
pub(crate) async fn track(req: Request, next: Next) -> Response {
    API_REQUESTS.inc();
    let writes_command = writes_command(req.method(), req.uri().path());
    let response = next.run(req).await;
    if writes_command && response.status() == StatusCode::ACCEPTED {
        API_COMMANDS_WRITTEN.inc();
    }
    response
}

/// Whether the request goes to a route that writes a command when it succeeds. `path` is
/// relative to `/api/v1` (as seen inside the nested router) or absolute.
fn writes_command(method: &Method, path: &str) -> bool {
    if method != Method::POST {
        return false;
    }
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(
        segments.as_slice(),
        ["projects", _, "workflows", _, "start"]
            | [
                "instances",
                _,
                "resume" | "rerun" | "resubmit-failed" | "resubmit_failed"
            ]
    )
}

/// Only `/metrics` and `/health`: what a master or worker serves on its metrics port.
pub fn metrics_router() -> Router {
    Router::new()
        .route("/metrics", get(handler))
        .route("/health", get(crate::health))
}

/// Serves [`metrics_router`] on `listener` until `shutdown` is cancelled.
pub async fn serve_metrics(listener: TcpListener, shutdown: CancellationToken) -> Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "metrics listening");
    axum::serve(listener, metrics_router())
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    tracing::info!(%addr, "metrics stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_routes_are_recognised() {
        let post = |p: &str| writes_command(&Method::POST, p);
        assert!(post("/projects/default/workflows/etl/start"));
        assert!(post("/api/v1/projects/default/workflows/etl/start"));
        assert!(post("/instances/7/resume"));
        assert!(post("/instances/7/rerun"));
        assert!(post("/instances/7/resubmit-failed"));
        assert!(post("/instances/7/resubmit_failed"));
        assert!(!post("/instances/7/stop"));
        assert!(!post("/instances/7/pause"));
        assert!(!post("/projects/default/workflows"));
        assert!(!post("/projects/default/workflows/start"));
        assert!(!writes_command(
            &Method::GET,
            "/projects/default/workflows/etl/start"
        ));
    }
}
