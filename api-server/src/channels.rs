//! gRPC channels to the workers (task logs) and masters (stop, pause) the api-server asks.

use shoal_common::cluster_secret::{ClusterSecret, PeerChannel};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Response, Status};

/// How long opening a connection may take; each call has its own overall deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One channel per address, made on first use and kept: a tonic channel reconnects by
/// itself, so an entry never goes stale. Workers and masters listen on different
/// addresses, so one cache serves both. Every call carries the cluster secret.
pub struct Channels {
    channels: Mutex<HashMap<String, Channel>>,
    secret: ClusterSecret,
}

impl Channels {
    pub fn new(secret: ClusterSecret) -> Channels {
        Channels {
            channels: Mutex::default(),
            secret,
        }
    }

    /// The channel to `addr` (`host:port`). Connects lazily: an unreachable peer
    /// shows as `UNAVAILABLE` on the first call. The error says why the address is unusable.
    pub fn get(&self, addr: &str) -> Result<PeerChannel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ch) = channels.get(addr) {
            return Ok(self.secret.channel(addr, ch.clone()));
        }
        let endpoint = self
            .secret
            .endpoint(addr)
            .map_err(|e| format!("invalid address: {e}"))?;
        let ch = endpoint.connect_timeout(CONNECT_TIMEOUT).connect_lazy();
        channels.insert(addr.to_string(), ch.clone());
        Ok(self.secret.channel(addr, ch))
    }
}

/// Runs one gRPC call with a deadline; running out of time is `DEADLINE_EXCEEDED`.
pub async fn call<T>(
    limit: Duration,
    call: impl Future<Output = Result<Response<T>, Status>>,
) -> Result<T, Status> {
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer.map(Response::into_inner),
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no answer within {}s",
            limit.as_secs()
        ))),
    }
}
