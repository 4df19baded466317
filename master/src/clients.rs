//! One lazily connected gRPC channel per worker address, shared by dispatch and kills.

use shoal_common::proto::worker_client::WorkerClient;
use shoal_common::proto::{ProbeRequest, ProbeResponse, TaskAttempt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

#[derive(Clone, Default)]
pub struct WorkerClients {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

impl WorkerClients {
    pub fn get(&self, addr: &str) -> crate::Result<WorkerClient<Channel>> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ch) = map.get(addr) {
            return Ok(WorkerClient::new(ch.clone()));
        }
        let ch = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| crate::Error::BadAddress(addr.to_string(), e.to_string()))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30))
            .connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(WorkerClient::new(ch))
    }

    /// Which of `tasks` the worker at `addr` has, and which it gave up; the error says
    /// why it could not be asked.
    pub async fn probe(
        &self,
        addr: &str,
        tasks: Vec<TaskAttempt>,
    ) -> Result<ProbeResponse, String> {
        let mut client = self.get(addr).map_err(|e| e.to_string())?;
        match client.probe(ProbeRequest { tasks }).await {
            Ok(resp) => Ok(resp.into_inner()),
            Err(status) => Err(status.to_string()),
        }
    }
}
