//! The `/metrics` listener of masters and workers, and their default ports.

use anyhow::Context;
use std::net::{IpAddr, SocketAddr};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Default `--metrics-port` of `shoal master`.
pub(super) const MASTER_METRICS_PORT: u16 = 9700;
/// Default `--metrics-port` of `shoal worker`.
pub(super) const WORKER_METRICS_PORT: u16 = 9701;

/// Binds the `/metrics` listener of a master or worker. None when `port` is 0, or when it
/// is the role's `default` port and that is taken: several masters or workers on one host
/// all start with the default, and a missing scrape target should not stop scheduling. A
/// port chosen on purpose must be free.
pub(super) async fn metrics_listener(
    bind: IpAddr,
    port: u16,
    default: u16,
) -> anyhow::Result<Option<TcpListener>> {
    if port == 0 {
        return Ok(None);
    }
    let addr = SocketAddr::new(bind, port);
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if port == default && e.kind() == std::io::ErrorKind::AddrInUse => {
            warn!(
                %addr,
                "default metrics port in use (another shoal on this host?), metrics not served; set --metrics-port"
            );
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| {
            format!("cannot listen for metrics on {addr}: pick another --metrics-port, or 0 to turn metrics off")
        }),
    }
}

/// Serves `/metrics` on `listener` (if any) until `shutdown` is cancelled.
pub(super) fn spawn_metrics(
    listener: Option<TcpListener>,
    shutdown: CancellationToken,
) -> JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        if let Some(listener) = listener {
            shoal_api_server::serve_metrics(listener, shutdown).await?;
        }
        Ok(())
    })
}
