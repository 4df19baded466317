//! Completions of external tasks by their workers: one task a call, or up to
//! [`MAX_BATCH`] in one call and one transaction. Either way each task ends by its own
//! conditional write under its lease, so a completion counts once per attempt, and a
//! batch's stale completions are answered one by one while the others count.

use super::works_in;
use crate::Ctx;
use crate::access::Caller;
use crate::completions::{Completed, Completion, Ending, end_all, end_one};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, path};
use axum::Json;
use axum::extract::{Extension, State};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shoal_common::access::Role;
use shoal_common::types::TaskState;
use shoal_store::{audit_object, audit_project};
use std::collections::{BTreeSet, HashSet};
use utoipa::ToSchema;

/// The most completions one batch may carry.
pub const MAX_BATCH: usize = 100;

/// How an external task ended: its lease token and the fields of any completion
/// (`failure` fails the attempt and its retries apply; unknown fields are refused).
// Read by `external_completion` as the token and a `Completion`, which refuses unknown
// fields (`flatten` would not): this type describes the body for the OpenAPI document.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ExternalCompletion {
    lease_token: String,
    #[serde(flatten)]
    completion: Completion,
}

/// How one external task of a batch ended: its id and the fields of a single completion
/// (unknown fields are refused).
// Read by `batched`, as `ExternalCompletion` is: this type describes an item for the
// OpenAPI document.
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

/// How a completion by an external worker ends a task: under its lease.
fn ending(id: i64, (token, c): (String, Completion)) -> Result<Ending> {
    Ending::new(id, c, "by its external worker", Some(&token))
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
    let req = external_completion(body.json()?)
        .map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))?;
    end_one(&ctx, ending(id, req)?).await
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
        let end = ending(id, c)
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
fn batched(item: Value) -> std::result::Result<(i64, (String, Completion)), String> {
    let mut fields = object(item)?;
    let id = take(&mut fields, "task_instance_id")?;
    Ok((id, external_completion(Value::Object(fields))?))
}

/// An external completion's body: the lease token, and the completion.
fn external_completion(body: Value) -> std::result::Result<(String, Completion), String> {
    let mut fields = object(body)?;
    let token = take(&mut fields, "lease_token")?;
    let completion = serde_json::from_value(Value::Object(fields)).map_err(|e| e.to_string())?;
    Ok((token, completion))
}

fn object(v: Value) -> std::result::Result<Map<String, Value>, String> {
    match v {
        Value::Object(fields) => Ok(fields),
        v => Err(format!("{v} is not an object")),
    }
}

/// Field `name` of `fields`, taken out.
fn take<T: DeserializeOwned>(
    fields: &mut Map<String, Value>,
    name: &str,
) -> std::result::Result<T, String> {
    let v = fields
        .remove(name)
        .ok_or_else(|| format!("missing field `{name}`"))?;
    serde_json::from_value(v).map_err(|e| format!("{name}: {e}"))
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
