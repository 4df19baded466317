//! One lazily connected gRPC channel per peer address (workers for dispatch, kills and
//! probes; masters for stopping a child run), each call carrying the cluster secret.

use shoal_common::cluster_secret::{ClusterSecret, PeerChannel};
use shoal_common::proto::master_client::MasterClient;
use shoal_common::proto::worker_client::WorkerClient;
use shoal_common::proto::{ProbeRequest, ProbeResponse, TaskAttempt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

#[derive(Clone)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    secret: ClusterSecret,
}

impl Peers {
    pub fn new(secret: ClusterSecret) -> Peers {
        Peers {
            channels: Arc::default(),
            secret,
        }
    }

    pub fn worker(&self, addr: &str) -> crate::Result<WorkerClient<PeerChannel>> {
        Ok(WorkerClient::new(self.channel(addr)?))
    }

    pub fn master(&self, addr: &str) -> crate::Result<MasterClient<PeerChannel>> {
        Ok(MasterClient::new(self.channel(addr)?))
    }

    fn channel(&self, addr: &str) -> crate::Result<PeerChannel> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ch) = map.get(addr) {
            return Ok(self.secret.channel(addr, ch.clone()));
        }
        let ch = self
            .secret
            .endpoint(addr)
            .map_err(|e| crate::Error::BadAddress(addr.to_string(), e))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30))
            .connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(self.secret.channel(addr, ch))
    }

    /// Which of `tasks` the worker at `addr` has, and which it gave up; the error says
    /// why it could not be asked.
    pub async fn probe(
        &self,
        addr: &str,
        tasks: Vec<TaskAttempt>,
    ) -> Result<ProbeResponse, String> {
        let mut client = self.worker(addr).map_err(|e| e.to_string())?;
        match client.probe(ProbeRequest { tasks }).await {
            Ok(resp) => Ok(resp.into_inner()),
            Err(status) => Err(status.to_string()),
        }
    }
}
