//! Operator actions on one task attempt, as DolphinScheduler's task instance view offers
//! them: `kill` a running attempt (through the master driving its instance),
//! `force-success` a failed one of an ended instance (the store marks it and resubmits the
//! instance, which goes on as if the task had passed), and `rerun` an ended task of an
//! ended instance (with `downstream`, what follows it too) while every other task keeps
//! its state.

use crate::Ctx;
use crate::access::Caller;
use crate::actions::{Control, control};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body};
use crate::instances::find_task;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::start::RerunTask;
use shoal_common::types::{CommandKind, TaskState};
use shoal_store::{NewCommand, TaskInstanceRow, recovery_allowed};
use utoipa::{IntoParams, ToSchema};

/// What the 404 for an unknown action lists.
const VALID_ACTIONS: &str = "kill, force-success, rerun";

/// An accepted task action.
#[derive(Serialize, ToSchema)]
pub struct TaskActionAccepted {
    /// The task instance.
    pub id: i64,
    /// Its workflow instance.
    pub workflow_instance_id: i64,
    /// `kill`, `force-success` or `rerun`.
    pub action: String,
    /// For force-success and rerun: the command that takes the instance on
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
    /// `kill`, `force-success` or `rerun`.
    action: String,
}

/// Options of a rerun (the other actions take no body).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RerunOptions {
    /// Rerun what depends on the task too (default: the task alone).
    #[serde(default)]
    downstream: bool,
}

/// `POST /task-instances/{id}/{action}`: `kill` ends a running attempt as `killed` (its
/// instance's failure strategy decides what follows); `force-success` marks a failed or
/// killed attempt of a failed or stopped instance `forced_success` and resubmits the
/// instance, so its downstream tasks run; `rerun` runs an ended task of an ended instance
/// again as a new attempt (`{"downstream": true}`: and what depends on it), every other
/// task keeping its state. 409 with the reason when the state forbids it.
#[utoipa::path(
    post,
    path = "/task-instances/{id}/{action}",
    operation_id = "actOnTaskInstance",
    tag = "instances",
    params(TaskActionPath),
    request_body(content = Option<RerunOptions>, description = "For rerun only; optional"),
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
    body: Body,
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
        "rerun" => {
            let options: RerunOptions = body.json_or_default()?;
            let command_id = rerun(&ctx, &caller, &task, options.downstream).await?;
            tracing::info!(task_instance = id, instance, command_id, by = %caller.name, "task rerun requested");
            Ok((
                StatusCode::ACCEPTED,
                Json(accepted("rerun", Some(command_id))),
            ))
        }
        other => Err(Error::NotFound(format!(
            "unknown action '{other}' on task instance {id}; valid actions: {VALID_ACTIONS}"
        ))),
    }
}

/// Writes the command that reruns `task` (and with `downstream` what follows it) in its
/// ended instance; returns its id.
async fn rerun(
    ctx: &Ctx,
    caller: &Caller,
    task: &TaskInstanceRow,
    downstream: bool,
) -> Result<i64> {
    let (id, instance_id) = (task.id, task.workflow_instance_id);
    let instance = ctx.store.get_instance(instance_id).await?.ok_or_else(|| {
        Error::NotFound(format!("workflow instance {instance_id} does not exist"))
    })?;
    if let Err(reason) = recovery_allowed(CommandKind::RerunTask, instance.state) {
        return Err(Error::Conflict(format!(
            "workflow instance {instance_id} is {}; {reason}",
            instance.state
        )));
    }
    let stored = ctx
        .store
        .get_definition(
            &instance.project,
            &instance.workflow,
            Some(instance.version),
        )
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "version {} of workflow '{}' does not exist",
                instance.version, instance.workflow
            ))
        })?;
    let tasks = &stored.definition.tasks;
    let Some(def) = tasks.iter().find(|t| t.name == task.name) else {
        return Err(Error::Conflict(format!(
            "task instance {id} ('{}') belongs to a foreach or do_while task; rerun that one's \
             instance instead",
            task.name
        )));
    };
    let fans = |t: &&shoal_common::definition::TaskDef| t.foreach.is_some() || t.do_while.is_some();
    if fans(&def) {
        return Err(Error::Conflict(format!(
            "'{}' is a foreach or do_while task, which cannot be rerun alone yet; rerun or \
             resubmit the instance",
            task.name
        )));
    }
    if downstream && tasks.iter().any(|t| fans(&t)) {
        return Err(Error::Conflict(
            "workflow has foreach or do_while tasks: rerunning a task with what follows it \
             is not supported for it yet; rerun the task alone, or rerun or resubmit the \
             instance"
                .into(),
        ));
    }
    let mut cmd = NewCommand::recovery(CommandKind::RerunTask, &instance);
    cmd.options.started_by = caller.user_id;
    cmd.options.rerun_task = Some(RerunTask {
        task: task.name.clone(),
        downstream,
    });
    Ok(ctx.store.insert_command(&cmd).await?)
}
