//! Serves the router on a listener's connections (plain TCP, or TLS from [`crate::https`]).
//!
//! axum's own `serve` gives hyper no timer, so a client that sends half a request holds
//! its connection (and a task) for as long as it likes. Here every HTTP/1 connection must
//! deliver a request's headers within [`HEADER_READ_TIMEOUT`] of starting it.

use axum::Router;
use axum::extract::ConnectInfo;
use axum::serve::Listener;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// A request whose headers have not all arrived by then is dropped with its connection.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets the requests in
/// flight finish (connections are told to close after them) and returns.
pub(crate) async fn run<L>(mut listener: L, app: Router, shutdown: CancellationToken)
where
    L: Listener<Addr = SocketAddr>,
{
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connections = TaskTracker::new();
    loop {
        let (io, peer) = tokio::select! {
            // Cancellation-safe: accepting again later loses nothing.
            conn = listener.accept() => conn,
            _ = shutdown.cancelled() => break,
        };
        // The peer address is what the audit log and webhook allowlists see.
        let service = app
            .clone()
            .map_request(move |mut req: axum::http::Request<_>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
        let (builder, shutdown) = (builder.clone(), shutdown.clone());
        connections.spawn(async move {
            let conn = builder.serve_connection_with_upgrades(
                TokioIo::new(io),
                TowerToHyperService::new(service),
            );
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => return log_end(peer, result),
                _ = shutdown.cancelled() => conn.as_mut().graceful_shutdown(),
            }
            log_end(peer, conn.await);
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

fn log_end(peer: SocketAddr, result: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
