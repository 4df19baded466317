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
use shoal_store::{Holder, WaitEnd};
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

/// A completion checked: what its conditional write ends the task with.
pub(crate) struct Ending {
    pub id: i64,
    pub state: TaskState,
    outputs: Params,
    message: String,
    /// The hash of the lease token it must hold (an external worker's), or none: anyone's.
    lease: Option<String>,
}

impl Ending {
    /// Checks a completion of task `id` (`by`: how it was completed, its message unless
    /// given) by whoever holds `lease_token` (none: anyone): the state is success unless
    /// given, and success or failure; the outputs become parameters.
    pub(crate) fn new(
        id: i64,
        c: Completion,
        by: &str,
        lease_token: Option<&str>,
    ) -> Result<Ending> {
        let state = c.state.unwrap_or(TaskState::Success);
        if !matches!(state, TaskState::Success | TaskState::Failure) {
            return Err(Error::BadRequest(format!(
                "state '{state}' cannot complete a task: use success or failure"
            )));
        }
        let outputs = given_outputs(c.outputs)?;
        let message = c.message.unwrap_or_else(|| match state {
            TaskState::Success => format!("completed {by}"),
            _ => format!("failed {by}"),
        });
        Ok(Ending {
            id,
            state,
            outputs,
            message,
            lease: lease_token.map(token_hash),
        })
    }

    fn holder(&self) -> Holder<'_> {
        match &self.lease {
            Some(hash) => Holder::Lease(hash),
            None => Holder::Anyone,
        }
    }
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

/// Ends one task as `end` says, or says why it did not (404, or 409 naming why).
pub(crate) async fn end_one(ctx: &Ctx, end: Ending) -> Result<Json<Completed>> {
    let (id, state) = (end.id, end.state);
    let result = end_all(ctx, &[end]).await?.into_iter().next();
    result.expect("one result a completion")?;
    tracing::info!(task_instance_id = id, %state, "waiting task completed");
    Ok(Json(Completed { id, state }))
}

/// Ends the tasks of `ends` in one transaction, each by its own conditional write (under
/// its lease, if it names one); for each, in order, nothing or why it did not end (404,
/// or 409 naming why).
pub(crate) async fn end_all(ctx: &Ctx, ends: &[Ending]) -> Result<Vec<Result<()>>> {
    if ends.is_empty() {
        return Ok(Vec::new());
    }
    let writes: Vec<WaitEnd> = ends
        .iter()
        .map(|e| WaitEnd {
            id: e.id,
            state: e.state,
            output: &e.outputs,
            message: &e.message,
            holder: e.holder(),
        })
        .collect();
    let ended = ctx.store.end_waits(&writes).await?;
    let mut results = Vec::with_capacity(ends.len());
    for (end, ended) in ends.iter().zip(ended) {
        if ended {
            tracing::debug!(task_instance_id = end.id, state = %end.state, "waiting task completed");
            results.push(Ok(()));
        } else {
            results.push(Err(not_ended(ctx, end.id, end.lease.is_some()).await));
        }
    }
    Ok(results)
}

/// Why task `id` was not ended by a completion (`by_lease`: one under a lease token, an
/// external worker's, which heartbeats and log lines share): 404 for no such task, else
/// 409 naming why: not a task such a completion ends, ended already, or not waiting (for
/// a lease: not held by this token).
pub(crate) async fn not_ended(ctx: &Ctx, id: i64, by_lease: bool) -> Error {
    let row = match find_task(ctx, id).await {
        Ok(row) => row,
        Err(e) => return e,
    };
    let kind = row.task_type.parse::<TaskType>().ok();
    let takes = match by_lease {
        true => kind == Some(TaskType::External),
        false => matches!(
            kind,
            Some(TaskType::Wait | TaskType::Callback | TaskType::External)
        ),
    };
    let (s, task_type) = (row.state, &row.task_type);
    let why = row.message.map(|m| format!(" ({m})")).unwrap_or_default();
    Error::Conflict(match (by_lease, takes, s.is_terminal()) {
        (true, false, _) => {
            format!("task instance {id} is a {task_type} task, not an external one")
        }
        (false, false, _) => format!(
            "task instance {id} is a {task_type} task: only wait, callback and external tasks are completed"
        ),
        (true, true, true) => format!("task instance {id} ended already: {s}{why}; drop it"),
        (false, true, true) => format!("task instance {id} is {s} already{why}"),
        (true, true, false) => format!(
            "this lease token does not hold task instance {id}: its lease lapsed and it went back to its queue, or another poll took it; drop it"
        ),
        (false, true, false) => {
            format!("task instance {id} is {s}, not waiting yet; try again shortly")
        }
    })
}

async fn end(ctx: &Ctx, id: i64, body: Body, by: &str) -> Result<Json<Completed>> {
    let req: Completion = body.json_or_default()?;
    end_one(ctx, Ending::new(id, req, by, None)?).await
}
