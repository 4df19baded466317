//! Completions of external tasks by their workers: one task a call, or up to
//! [`MAX_BATCH`] in one call and one transaction. Either way each task ends by its own
//! conditional write under its lease, so a completion counts once per attempt, and a
//! batch's stale completions are answered one by one while the others count.

use super::{not_held, works_in};
use crate::Ctx;
use crate::access::Caller;
use crate::completions::{Completed, ending};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, path};
use axum::Json;
use axum::extract::{Extension, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::access::{Role, token_hash};
use shoal_common::start::Params;
use shoal_common::types::TaskState;
use shoal_store::{Holder, WaitEnd, audit_object, audit_project};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use utoipa::ToSchema;

/// The most completions one batch may carry.
pub const MAX_BATCH: usize = 100;

/// How an external task ended.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalCompletion {
    lease_token: String,
    /// `success` (the default) or `failure` (its retries apply).
    #[serde(default)]
    state: Option<TaskState>,
    /// Outputs downstream tasks see as `${name}`: strings, numbers or booleans.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, crate::commands::StartParam>)]
    outputs: BTreeMap<String, Value>,
    /// Shown on the task.
    #[serde(default)]
    message: Option<String>,
}

/// How one external task of a batch ended: its id and the fields of a single completion
/// (unknown fields are refused).
// Read by `batched` as the id and an `ExternalCompletion`, which refuses unknown fields
// (`flatten` would not): this type describes an item for the OpenAPI document.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct BatchedCompletion {
    task_instance_id: i64,
    #[serde(flatten)]
    completion: ExternalCompletion,
}

/// What became of one completion of a batch, in the order they were sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchOutcome {
    pub task_instance_id: i64,
    /// 200: the task ended as asked. Else what its own call would have answered and
    /// nothing was written for it: 409, the lease was lost (it lapsed, another poll took
    /// the task, or it ended: drop it); 404, no such task instance; 403, the caller may
    /// not work on its project's tasks.
    pub status: u16,
    /// The state it ended in (200 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub state: Option<TaskState>,
    /// Why it did not end (all but 200).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
}

/// A completion checked: what its conditional write ends the task with.
struct Ending {
    id: i64,
    state: TaskState,
    outputs: Params,
    message: String,
    token_hash: String,
}

impl Ending {
    fn new(id: i64, c: ExternalCompletion) -> Result<Ending> {
        let by = "by its external worker";
        let (state, outputs, message) = ending(c.state, c.outputs, c.message, by)?;
        Ok(Ending {
            id,
            state,
            outputs,
            message,
            token_hash: token_hash(&c.lease_token),
        })
    }
}

/// `POST /external/{id}/complete`: ends a taken task; its outputs flow downstream.
#[utoipa::path(
    post,
    path = "/external/{id}/complete",
    operation_id = "completeExternalTask",
    tag = "external",
    params(path::Id),
    request_body = ExternalCompletion,
    responses(
        (status = 200, description = "The task ended; its instance goes on", body = Completed),
        (status = 400, description = "A bad state or output", body = ErrorBody),
        (status = 404, description = "No such task instance", body = ErrorBody),
        (status = 409, description = "The token is not the task's lease (it lapsed, or the task ended)", body = ErrorBody),
    )
)]
pub async fn complete(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    body: Body,
) -> Result<Json<Completed>> {
    let req: ExternalCompletion = body.json()?;
    let end = Ending::new(id, req)?;
    let state = end.state;
    let result = end_all(&ctx, &[end]).await?.into_iter().next();
    result.expect("one result a completion")?;
    tracing::info!(task_instance_id = id, %state, "external task completed");
    Ok(Json(Completed { id, state }))
}

/// `POST /external/complete`: ends up to 100 taken tasks at once, in one transaction; a
/// task whose lease was lost is answered on its own, and the others end.
#[utoipa::path(
    post,
    path = "/external/complete",
    operation_id = "completeExternalTasks",
    tag = "external",
    request_body = Vec<BatchedCompletion>,
    responses(
        (status = 200, description = "What became of each completion, in the order sent", body = Vec<BatchOutcome>),
        (status = 400, description = "No completion, more than 100, a task named twice, or a bad item (named by its place); nothing was written", body = ErrorBody),
        (status = 403, description = "The caller works in no project (worker, operator or higher role)", body = ErrorBody),
    )
)]
pub async fn complete_batch(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<Json<Vec<BatchOutcome>>> {
    works_in(&caller)?;
    // Items one by one, so that an error names the one that is wrong.
    let batch: Vec<Value> = body.json()?;
    if batch.is_empty() || batch.len() > MAX_BATCH {
        return Err(Error::BadRequest(format!(
            "a batch has {} completions: send 1 to {MAX_BATCH} a call",
            batch.len()
        )));
    }
    let mut named = HashSet::with_capacity(batch.len());
    let mut ends = Vec::with_capacity(batch.len());
    for (i, item) in batch.into_iter().enumerate() {
        let (id, c) =
            batched(item).map_err(|e| Error::BadRequest(format!("completion {i}: {e}")))?;
        if !named.insert(id) {
            return Err(Error::BadRequest(format!(
                "task instance {id} is named twice in the batch: complete it once"
            )));
        }
        let end = Ending::new(id, c)
            .map_err(|e| Error::BadRequest(format!("completion {i} (task instance {id}): {e}")))?;
        ends.push(end);
    }
    let ids: Vec<i64> = ends.iter().map(|e| e.id).collect();
    let projects = ctx.store.projects_of_tasks(&ids).await?;
    let named_projects: BTreeSet<&String> = projects.values().collect();
    if let (1, Some(project)) = (named_projects.len(), named_projects.first()) {
        audit_project(project);
    }
    audit_object(&format!("task instances {}", join(&ids)));
    // Each task as the guard checks a single completion's: one in a project where the
    // caller has no role is answered as one that does not exist.
    let mut outcomes: Vec<Option<BatchOutcome>> = Vec::with_capacity(ends.len());
    let mut allowed = Vec::with_capacity(ends.len());
    for end in ends {
        let refused = match projects.get(&end.id) {
            Some(p) if caller.role_in(p).is_some() => caller.check(p, Role::Worker).err(),
            _ => Some(Error::NotFound(format!(
                "task instance {} does not exist",
                end.id
            ))),
        };
        match refused {
            Some(e) => outcomes.push(Some(outcome(end.id, end.state, Err(e)))),
            None => {
                outcomes.push(None);
                allowed.push(end);
            }
        }
    }
    let results = end_all(&ctx, &allowed).await?;
    let completed = results.iter().filter(|r| r.is_ok()).count();
    tracing::info!(
        completed,
        of = outcomes.len(),
        "external tasks completed in a batch"
    );
    let mut ended = results.into_iter().zip(allowed);
    let outcomes = outcomes.into_iter().map(|o| {
        o.unwrap_or_else(|| {
            let (result, end) = ended.next().expect("one result an allowed completion");
            outcome(end.id, end.state, result)
        })
    });
    Ok(Json(outcomes.collect()))
}

/// A batch's item: the task's id, and how it ended.
fn batched(item: Value) -> std::result::Result<(i64, ExternalCompletion), String> {
    let Value::Object(mut fields) = item else {
        return Err(format!("{item} is not an object"));
    };
    let id = fields
        .remove("task_instance_id")
        .ok_or("missing field `task_instance_id`")?;
    let id = serde_json::from_value(id).map_err(|e| format!("task_instance_id: {e}"))?;
    let completion = serde_json::from_value(Value::Object(fields)).map_err(|e| e.to_string())?;
    Ok((id, completion))
}

fn join(ids: &[i64]) -> String {
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    ids.join(", ")
}

fn outcome(id: i64, state: TaskState, result: Result<()>) -> BatchOutcome {
    match result {
        Ok(()) => BatchOutcome {
            task_instance_id: id,
            status: 200,
            state: Some(state),
            error: None,
        },
        Err(e) => BatchOutcome {
            task_instance_id: id,
            status: e.status().as_u16(),
            state: None,
            error: Some(e.client_message()),
        },
    }
}

/// Ends the tasks of `ends` in one transaction, each under its lease; for each, in order,
/// nothing or why it did not end (404, or 409 naming why).
async fn end_all(ctx: &Ctx, ends: &[Ending]) -> Result<Vec<Result<()>>> {
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
            holder: Holder::Lease(&e.token_hash),
        })
        .collect();
    let ended = ctx.store.end_waits(&writes).await?;
    let mut results = Vec::with_capacity(ends.len());
    for (end, ended) in ends.iter().zip(ended) {
        if ended {
            tracing::debug!(task_instance_id = end.id, state = %end.state, "external task completed");
            results.push(Ok(()));
        } else {
            results.push(Err(not_held(ctx, end.id).await));
        }
    }
    Ok(results)
}
