//! NATS connections (through `async-nats`), for JetStream.

use super::{BrokerKind, CONNECT_TIMEOUT, parse_url};
use async_nats::{Client, ConnectOptions};

/// Connects to the server at `url` (`nats://user:password@host:4222`, `tls://` for TLS)
/// as `name`; the client and the server as messages name it.
pub async fn connect(url: &str, name: &str) -> Result<(Client, String), String> {
    let addr = parse_url(BrokerKind::Nats, url)?;
    let shown = addr.shown(BrokerKind::Nats);
    let mut options = ConnectOptions::new();
    if addr.tls {
        let config = super::tls::client_config()?;
        options = options
            .require_tls(true)
            .tls_client_config((*config).clone());
    }
    let client = options
        .name(name)
        .connection_timeout(CONNECT_TIMEOUT)
        .connect(url.trim())
        .await
        .map_err(|e| format!("cannot connect to {shown}: {e}"))?;
    Ok((client, shown))
}
