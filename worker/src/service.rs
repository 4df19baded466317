//! The worker's gRPC service (`shoal.v1.Worker`): dispatch, kill and log reads.

use crate::executor::Executor;
use crate::{Error, logs};
use shoal_common::proto::worker_server::Worker;
use shoal_common::proto::{
    DispatchRequest, DispatchResponse, KillRequest, KillResponse, ProbeRequest, ProbeResponse,
    ReadLogRequest, ReadLogResponse,
};
use std::path::PathBuf;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::debug;

pub(crate) struct WorkerService {
    executor: Arc<Executor>,
    logs: PathBuf,
}

impl WorkerService {
    pub(crate) fn new(executor: Arc<Executor>, logs: PathBuf) -> Self {
        WorkerService { executor, logs }
    }
}

#[tonic::async_trait]
impl Worker for WorkerService {
    async fn dispatch(
        &self,
        request: Request<DispatchRequest>,
    ) -> Result<Response<DispatchResponse>, Status> {
        let DispatchRequest { tasks, adopt_only } = request.into_inner();
        let n = tasks.len();
        let response = self.executor.dispatch(tasks, adopt_only);
        debug!(
            tasks = n,
            accepted = response.accepted.len(),
            rejected = response.rejected.len(),
            reason = %response.reason,
            "dispatch handled"
        );
        Ok(Response::new(response))
    }

    async fn probe(
        &self,
        request: Request<ProbeRequest>,
    ) -> Result<Response<ProbeResponse>, Status> {
        let tasks = request.into_inner().tasks;
        Ok(Response::new(self.executor.probe(&tasks)))
    }

    async fn kill(&self, request: Request<KillRequest>) -> Result<Response<KillResponse>, Status> {
        let kill = request.into_inner();
        let (task_instance_id, attempt) = (kill.task_instance_id, kill.attempt);
        let found = self.executor.kill(&kill);
        if !found {
            debug!(
                task_instance_id,
                attempt, "kill for a task not running here"
            );
        }
        Ok(Response::new(KillResponse { found }))
    }

    async fn read_log(
        &self,
        request: Request<ReadLogRequest>,
    ) -> Result<Response<ReadLogResponse>, Status> {
        let r = request.into_inner();
        let path = logs::log_path(
            &self.logs,
            r.workflow_instance_id,
            r.task_instance_id,
            r.attempt,
        );
        let content = logs::read(path.clone(), r.offset, r.limit)
            .await
            .map_err(|source| Error::Io { path, source })?;
        Ok(Response::new(match content {
            Some(content) => ReadLogResponse {
                content,
                found: true,
            },
            None => ReadLogResponse {
                content: Vec::new(),
                found: false,
            },
        }))
    }
}
