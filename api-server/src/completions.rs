//! Completing wait and callback tasks (and external ones, in place of their worker): an
//! operator (or an approval UI) through
//! `POST /task-instances/{id}/complete`, an outside system through the one-time URL a
//! callback task handed it. Either ends the waiting attempt with one conditional write;
//! the master driving the instance learns it from the row and goes on.

use crate::Ctx;
use crate::commands::startup_params;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, path};
use crate::instances::find_task;
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::access::token_hash;
use shoal_common::definition::TIMED_OUT;
use shoal_common::start::Params;
use shoal_common::types::{TaskState, TaskType};
use shoal_store::Holder;
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// How a waiting task ends.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// `success` (the default) or `failure`.
    #[serde(default)]
    state: Option<TaskState>,
    /// Output parameters downstream tasks see as `${name}`; strings, numbers or booleans.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, crate::commands::StartParam>)]
    outputs: BTreeMap<String, Value>,
    /// Shown on the task (default: how it was completed).
    #[serde(default)]
    message: Option<String>,
}

/// The task ended as asked.
#[derive(Serialize, ToSchema)]
pub struct Completed {
    pub id: i64,
    pub state: TaskState,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct TokenPath {
    /// The one-time token of the callback URL.
    token: String,
}

/// `POST /task-instances/{id}/complete` `{"state": "success", "outputs": {...}}`: ends a
/// waiting `wait` or `callback` task.
#[utoipa::path(
    post,
    path = "/task-instances/{id}/complete",
    operation_id = "completeTaskInstance",
    tag = "instances",
    params(path::Id),
    request_body(content = Option<Completion>, description = "Optional; an empty body completes it as success"),
    responses(
        (status = 200, description = "The task ended; its instance goes on", body = Completed),
        (status = 400, description = "A bad body or output name", body = ErrorBody),
        (status = 404, description = "No such task instance", body = ErrorBody),
        (status = 409, description = "Not a waiting wait or callback task (e.g. completed already)", body = ErrorBody),
    )
)]
pub async fn complete(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    body: Body,
) -> Result<Json<Completed>> {
    end(&ctx, id, body, "through the API").await
}

/// `POST /callbacks/{token}` `{"state": "success", "outputs": {...}}`: the outside system
/// a callback task called reports back. The token is the credential and works once.
#[utoipa::path(
    post,
    path = "/callbacks/{token}",
    operation_id = "completeCallback",
    tag = "instances",
    params(TokenPath),
    request_body(content = Option<Completion>, description = "Optional; an empty body completes it as success"),
    responses(
        (status = 200, description = "The task ended; its instance goes on", body = Completed),
        (status = 400, description = "A bad body or output name", body = ErrorBody),
        (status = 404, description = "No callback has this token", body = ErrorBody),
        (status = 409, description = "The task was completed already (the token was used) or timed out", body = ErrorBody),
    )
)]
pub async fn callback(
    State(ctx): State<Ctx>,
    ApiPath(token): ApiPath<String>,
    body: Body,
) -> Result<Json<Completed>> {
    let Some(id) = ctx.store.callback_task(&token_hash(&token)).await? else {
        return Err(Error::NotFound(
            "no callback has this token: check the URL the task sent".into(),
        ));
    };
    end(&ctx, id, body, "by its callback").await
}

/// How a completion ends its task: the state (success unless given), the outputs as
/// parameters, the message (how it was completed unless given).
pub(crate) fn ending(
    state: Option<TaskState>,
    outputs: BTreeMap<String, Value>,
    message: Option<String>,
    by: &str,
) -> Result<(TaskState, Params, String)> {
    let state = state.unwrap_or(TaskState::Success);
    if !matches!(state, TaskState::Success | TaskState::Failure) {
        return Err(Error::BadRequest(format!(
            "state '{state}' cannot complete a task: use success or failure"
        )));
    }
    let outputs = given_outputs(outputs)?;
    let message = message.unwrap_or_else(|| match state {
        TaskState::Success => format!("completed {by}"),
        _ => format!("failed {by}"),
    });
    Ok((state, outputs, message))
}

/// The outputs a completion (or an event) gives its task, as parameters.
pub(crate) fn given_outputs(outputs: BTreeMap<String, Value>) -> Result<Params> {
    let outputs = startup_params(outputs)?;
    if outputs.contains_key(TIMED_OUT) {
        return Err(Error::BadRequest(format!(
            "output '{TIMED_OUT}' is set by shoal when a task times out: name it otherwise"
        )));
    }
    Ok(outputs)
}

async fn end(ctx: &Ctx, id: i64, body: Body, by: &str) -> Result<Json<Completed>> {
    let req: Completion = body.json_or_default()?;
    let (state, outputs, message) = ending(req.state, req.outputs, req.message, by)?;
    if (ctx.store)
        .end_waiting(id, state, &outputs, &message, Holder::Anyone)
        .await?
    {
        tracing::info!(task_instance_id = id, %state, by, "waiting task completed");
        return Ok(Json(Completed { id, state }));
    }
    let row = find_task(ctx, id).await?;
    let kind = row.task_type.parse::<TaskType>().ok();
    Err(Error::Conflict(match row.state {
        _ if !matches!(
            kind,
            Some(TaskType::Wait | TaskType::Callback | TaskType::External)
        ) =>
        {
            format!(
                "task instance {id} is a {} task: only wait, callback and external tasks are completed",
                row.task_type
            )
        }
        s if s.is_terminal() => format!(
            "task instance {id} is {s} already{}",
            row.message.map(|m| format!(" ({m})")).unwrap_or_default()
        ),
        s => format!("task instance {id} is {s}, not waiting yet; try again shortly"),
    }))
}
