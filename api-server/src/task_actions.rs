//! Operator actions on one task attempt, as DolphinScheduler's task instance view offers
//! them: `kill` a running attempt (through the master driving its instance) and
//! `force-success` a failed one of an ended instance (the store marks it and resubmits the
//! instance, which goes on as if the task had passed).

use crate::Ctx;
use crate::access::Caller;
use crate::actions::{Control, control};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::ApiPath;
use crate::instances::find_task;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;
use shoal_common::types::TaskState;
use utoipa::{IntoParams, ToSchema};

/// What the 404 for an unknown action lists.
const VALID_ACTIONS: &str = "kill, force-success";

/// An accepted task action.
#[derive(Serialize, ToSchema)]
pub struct TaskActionAccepted {
    /// The task instance.
    pub id: i64,
    /// Its workflow instance.
    pub workflow_instance_id: i64,
    /// `kill` or `force-success`.
    pub action: String,
    /// For force-success: the resubmit-failed command that takes the instance on
    /// (`GET /commands/{command_id}` tells when a master took it up).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub command_id: Option<i64>,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct TaskActionPath {
    /// The task instance (one attempt).
    id: i64,
    /// `kill` or `force-success`.
    action: String,
}

/// `POST /task-instances/{id}/{action}`: `kill` ends a running attempt as `killed` (its
/// instance's failure strategy decides what follows); `force-success` marks a failed or
/// killed attempt of a failed or stopped instance `forced_success` and resubmits the
/// instance, so its downstream tasks run. 409 with the reason when the state forbids it.
#[utoipa::path(
    post,
    path = "/task-instances/{id}/{action}",
    operation_id = "actOnTaskInstance",
    tag = "instances",
    params(TaskActionPath),
    responses(
        (status = 202, body = TaskActionAccepted),
        (status = 404, description = "No such task instance, or an unknown action", body = ErrorBody),
        (status = 409, description = "The task's or its instance's state does not allow the action", body = ErrorBody),
        (status = 502, description = "The master failed to answer", body = ErrorBody),
        (status = 503, description = "No master drives the instance at the moment", body = ErrorBody),
    )
)]
pub async fn act(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, action)): ApiPath<(i64, String)>,
) -> Result<(StatusCode, Json<TaskActionAccepted>)> {
    let task = find_task(&ctx, id).await?;
    let instance = task.workflow_instance_id;
    let accepted = |action: &str, command_id| TaskActionAccepted {
        id,
        workflow_instance_id: instance,
        action: action.to_string(),
        command_id,
    };
    match action.as_str() {
        "kill" => {
            if !matches!(task.state, TaskState::Dispatched | TaskState::Running) {
                return Err(Error::Conflict(format!(
                    "task instance {id} is {}; only a dispatched or running attempt can be killed",
                    task.state
                )));
            }
            let row = ctx.store.get_instance(instance).await?.ok_or_else(|| {
                Error::NotFound(format!("workflow instance {instance} does not exist"))
            })?;
            let _master_answer = control(&ctx, &row, Control::KILL_TASK, id).await?;
            tracing::info!(task_instance = id, instance, by = %caller.name, "task kill requested");
            Ok((StatusCode::ACCEPTED, Json(accepted("kill", None))))
        }
        "force-success" | "force_success" => {
            let forced = ctx.store.force_task_success(id, &caller.name).await?;
            tracing::info!(task_instance = id, instance, command_id = forced.command_id, by = %caller.name, "task forced to success");
            let body = accepted("force-success", Some(forced.command_id));
            Ok((StatusCode::ACCEPTED, Json(body)))
        }
        other => Err(Error::NotFound(format!(
            "unknown action '{other}' on task instance {id}; valid actions: {VALID_ACTIONS}"
        ))),
    }
}
