//! The master's gRPC service: workers report task events here.

use crate::engine::EngineMsg;
use shoal_common::proto::master_server::Master;
use shoal_common::proto::{ReportEventsRequest, ReportEventsResponse};
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

pub struct MasterService {
    pub engine: mpsc::UnboundedSender<EngineMsg>,
}

#[tonic::async_trait]
impl Master for MasterService {
    /// Answers once the engine has committed the events, so a worker drops an event from
    /// its outbox only when it is durable.
    async fn report_events(
        &self,
        req: Request<ReportEventsRequest>,
    ) -> Result<Response<ReportEventsResponse>, Status> {
        let req = req.into_inner();
        let (ack, acked) = oneshot::channel();
        self.engine
            .send(EngineMsg::WorkerEvents {
                worker: req.worker,
                events: req.events,
                ack,
            })
            .map_err(|_| Status::unavailable("master is shutting down"))?;
        let acked = acked
            .await
            .map_err(|_| Status::unavailable("master is shutting down"))?;
        Ok(Response::new(ReportEventsResponse { acked }))
    }
}
