//! The master's gRPC service: workers report task events here, and the api-server
//! forwards operator requests (stop, pause) for instances this master drives.

use crate::engine::{Control, ControlError, EngineMsg};
use shoal_common::proto::master_server::Master;
use shoal_common::proto::{
    ControlAction, ControlRequest, ControlResponse, ReportEventsRequest, ReportEventsResponse,
};
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

pub struct MasterService {
    pub engine: mpsc::UnboundedSender<EngineMsg>,
}

fn shutting_down<T>(_: T) -> Status {
    Status::unavailable("master is shutting down")
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
            .map_err(shutting_down)?;
        let acked = acked.await.map_err(shutting_down)?;
        Ok(Response::new(ReportEventsResponse { acked }))
    }

    /// Answers once the new state is committed.
    async fn control(
        &self,
        req: Request<ControlRequest>,
    ) -> Result<Response<ControlResponse>, Status> {
        let req = req.into_inner();
        let control = match req.action() {
            ControlAction::Stop => Control::Stop,
            ControlAction::Pause => Control::Pause,
            ControlAction::KillTask => Control::KillTask(req.task_instance_id),
            ControlAction::Unspecified => {
                return Err(Status::invalid_argument("control action missing"));
            }
        };
        let (reply, answer) = oneshot::channel();
        let instance = req.workflow_instance_id;
        self.engine
            .send(EngineMsg::Control {
                instance,
                control,
                reply,
            })
            .map_err(shutting_down)?;
        match answer.await.map_err(shutting_down)? {
            Ok(state) => Ok(Response::new(ControlResponse {
                state: state.as_str().to_string(),
            })),
            Err(e @ ControlError::NotHere(_)) => Err(Status::not_found(e.to_string())),
            Err(e @ ControlError::Refused(_)) => Err(Status::failed_precondition(e.to_string())),
            Err(e @ ControlError::NotRecorded(_)) => Err(Status::unavailable(e.to_string())),
        }
    }
}
