//! External workers: services outside the cluster, in any language, that take `external`
//! tasks by a long poll, hold each under a lease they renew by heartbeats, append to its
//! log and complete it. A completion is one conditional write, like any waiting task's:
//! exactly one of the lease holder's completion, a lapsed lease or a timeout counts.

pub(crate) mod completion;
mod wake;

pub(crate) use wake::Offers;

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_identifier, path};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::access::{random_hex, token_hash};
use shoal_common::secret_key::external_params_context;
use shoal_common::types::{ms_to_rfc3339, now_ms};
use shoal_store::Leased;
use std::time::Duration;
use tokio::time::Instant;
use utoipa::ToSchema;

/// The longest a poll may wait for a task.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The most tasks one poll may take.
const MAX_TAKE: u64 = 100;
/// The most queues one poll may name.
const MAX_QUEUES: usize = 64;
/// Largest text one log call appends.
const MAX_LOG_TEXT: usize = 1024 * 1024;
/// A waiting poll looks again this often even without a wake (a lost notification).
const RECHECK: Duration = Duration::from_secs(1);

/// What an external worker asks for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Poll {
    /// Queues to take tasks from (the `queue` of `external` tasks).
    queues: Vec<String>,
    /// Who takes them: shown on the task and in the audit log.
    worker: String,
    /// Most tasks to take (1 to 100; default 1).
    #[serde(default)]
    max: Option<u64>,
    /// How long to wait when none is ready (e.g. `20s`; at most 60s; default 0: answer at
    /// once). The answer comes as soon as one is ready.
    #[serde(default, with = "shoal_common::duration::option")]
    #[schema(value_type = Option<String>, example = "20s")]
    wait: Option<Duration>,
}

/// A task an external worker took.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExternalTask {
    pub task_instance_id: i64,
    /// Proves the lease in heartbeats, log lines and the completion (shared by the tasks
    /// one poll took).
    pub lease_token: String,
    pub queue: String,
    pub project: String,
    pub workflow: String,
    pub workflow_instance_id: i64,
    /// The task's name.
    pub task: String,
    pub attempt: i32,
    /// The task's params, expanded (secrets they name included).
    #[schema(value_type = BTreeMap<String, String>)]
    pub params: Value,
    /// Renew the lease by a heartbeat before this, or the attempt fails as lost.
    #[schema(format = DateTime)]
    pub lease_expires_at: String,
}

/// Proves a lease.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseProof {
    lease_token: String,
}

/// The lease was renewed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Renewed {
    #[schema(format = DateTime)]
    pub lease_expires_at: String,
}

/// Lines for the task's log.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LogLines {
    lease_token: String,
    /// Appended as given (end lines with `\n`).
    text: String,
}

/// The projects whose external tasks the caller may work on (None: all); 403 for none.
fn works_in(caller: &Caller) -> Result<Option<Vec<String>>> {
    let projects = caller.external_projects();
    if projects.as_ref().is_some_and(Vec::is_empty) {
        return Err(Error::Forbidden(format!(
            "user '{}' may work on no project's external tasks: it needs the worker role (or operator or higher) in a project",
            caller.name
        )));
    }
    Ok(projects)
}

/// `POST /external/poll`: takes ready external tasks of the caller's projects.
#[utoipa::path(
    post,
    path = "/external/poll",
    operation_id = "pollExternalTasks",
    tag = "external",
    request_body = Poll,
    responses(
        (status = 200, description = "The tasks taken (empty when none was ready within `wait`)", body = Vec<ExternalTask>),
        (status = 400, description = "A bad queue, worker name, max or wait", body = ErrorBody),
        (status = 403, description = "The caller works in no project (worker, operator or higher role)", body = ErrorBody),
    )
)]
pub async fn poll(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<Response> {
    let projects = works_in(&caller)?;
    let req: Poll = body.json()?;
    if req.queues.is_empty() || req.queues.len() > MAX_QUEUES {
        return Err(Error::BadRequest(format!(
            "name 1 to {MAX_QUEUES} queues to poll"
        )));
    }
    for q in &req.queues {
        check_identifier("queue", q)?;
    }
    check_identifier("worker", &req.worker)?;
    let max = req.max.unwrap_or(1);
    if !(1..=MAX_TAKE).contains(&max) {
        return Err(Error::BadRequest(format!(
            "max {max} is out of range: take 1 to {MAX_TAKE} tasks a poll"
        )));
    }
    let wait = req.wait.unwrap_or_default();
    if wait > MAX_WAIT {
        return Err(Error::BadRequest(format!(
            "wait is at most {}s: poll again after an empty answer",
            MAX_WAIT.as_secs()
        )));
    }
    let deadline = Instant::now() + wait;
    let mut offered = ctx.offers.receiver(&ctx.store, &ctx.shutdown).await;
    loop {
        // Marked seen before the look: an offer committed after it wakes the wait below.
        offered.borrow_and_update();
        let token = random_hex(32)?;
        let hash = token_hash(&token);
        let taken = (ctx.store)
            .take_external(&req.queues, projects.as_deref(), &req.worker, &hash, max)
            .await?;
        if !taken.is_empty() {
            tracing::debug!(worker = %req.worker, tasks = taken.len(), "external tasks taken");
            let tasks = taken
                .into_iter()
                .map(|t| given(&ctx, t, &token))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Json(tasks).into_response());
        }
        let now = Instant::now();
        if now >= deadline || ctx.shutdown.is_cancelled() {
            // Nothing was taken: nothing to audit.
            let mut answer = Json(Vec::<ExternalTask>::new()).into_response();
            answer.extensions_mut().insert(crate::access::Unchanged);
            return Ok(answer);
        }
        let nap = (deadline - now).min(RECHECK);
        tokio::select! {
            _ = offered.changed() => {}
            _ = tokio::time::sleep(nap) => {}
            _ = ctx.shutdown.cancelled() => {}
        }
    }
}

/// How far back `GET /external/queues` lists the workers seen.
const SEEN_WINDOW: Duration = Duration::from_secs(3600);

/// A queue of external tasks in one project.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExternalQueue {
    pub project: String,
    pub queue: String,
    /// Tasks offered that no worker took yet.
    pub waiting: i64,
    /// Tasks taken, under a lease.
    pub taken: i64,
    /// External workers that took a task or sent a heartbeat on it in the last hour, the
    /// latest first.
    pub workers: Vec<ExternalWorker>,
}

/// An external worker as last seen on a queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExternalWorker {
    /// The name it polls with.
    pub name: String,
    /// Its last take or heartbeat on the queue.
    #[schema(format = DateTime)]
    pub last_seen_at: String,
    /// The queue's tasks it holds now.
    pub holding: i64,
}

/// `GET /external/queues`: the queues of the caller's projects with tasks offered or
/// workers seen in the last hour.
#[utoipa::path(
    get,
    path = "/external/queues",
    operation_id = "listExternalQueues",
    tag = "external",
    responses(
        (status = 200, description = "By project, then queue", body = Vec<ExternalQueue>),
    )
)]
pub async fn queues(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<ExternalQueue>>> {
    let since = now_ms() - SEEN_WINDOW.as_millis() as i64;
    let projects = caller.visible_projects();
    let queues = ctx
        .store
        .external_queues(projects.as_deref(), since)
        .await?;
    let queues = queues.into_iter().map(|q| ExternalQueue {
        project: q.project,
        queue: q.queue,
        waiting: q.waiting,
        taken: q.taken,
        workers: (q.workers.into_iter())
            .map(|w| ExternalWorker {
                name: w.name,
                last_seen_at: ms_to_rfc3339(w.last_seen_at),
                holding: w.holding,
            })
            .collect(),
    });
    Ok(Json(queues.collect()))
}

/// What the worker of a taken task is given: its params opened when they were sealed.
fn given(ctx: &Ctx, t: Leased, token: &str) -> Result<ExternalTask> {
    let params = match t.sealed {
        false => t.params,
        true => {
            let key = ctx.secret_key.as_ref().ok_or_else(|| {
                Error::Unavailable(
                    "this api-server has no secret key to open an external task's params with: start it with SHOAL_SECRET_KEY, the masters' key".into(),
                )
            })?;
            let context = external_params_context(t.task_instance_id);
            key.open(&context, &t.params).map_err(Error::Unavailable)?
        }
    };
    let params = serde_json::from_str(&params)
        .map_err(|e| Error::Unavailable(format!("external task params are not JSON: {e}")))?;
    Ok(ExternalTask {
        task_instance_id: t.task_instance_id,
        lease_token: token.to_string(),
        queue: t.queue,
        project: t.project,
        workflow: t.workflow,
        workflow_instance_id: t.workflow_instance_id,
        task: t.task,
        attempt: t.attempt,
        params,
        lease_expires_at: ms_to_rfc3339(t.lease_expires_at),
    })
}

/// `POST /external/{id}/heartbeat`: renews the lease of a taken task.
#[utoipa::path(
    post,
    path = "/external/{id}/heartbeat",
    operation_id = "heartbeatExternalTask",
    tag = "external",
    params(path::Id),
    request_body = LeaseProof,
    responses(
        (status = 200, description = "The lease runs until the time given", body = Renewed),
        (status = 404, description = "No such task instance", body = ErrorBody),
        (status = 409, description = "The token is not the task's lease (it lapsed, or the task ended)", body = ErrorBody),
    )
)]
pub async fn heartbeat(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    body: Body,
) -> Result<Json<Renewed>> {
    let req: LeaseProof = body.json()?;
    let renewed = (ctx.store)
        .renew_lease(id, &token_hash(&req.lease_token))
        .await?;
    let at = held(&ctx, id, renewed).await?;
    Ok(Json(Renewed {
        lease_expires_at: ms_to_rfc3339(at),
    }))
}

/// `POST /external/{id}/log`: appends lines to a taken task's log.
#[utoipa::path(
    post,
    path = "/external/{id}/log",
    operation_id = "appendExternalTaskLog",
    tag = "external",
    params(path::Id),
    request_body = LogLines,
    responses(
        (status = 204, description = "Appended"),
        (status = 400, description = "Text over 1 MiB", body = ErrorBody),
        (status = 404, description = "No such task instance", body = ErrorBody),
        (status = 409, description = "The token is not the task's lease (it lapsed, or the task ended)", body = ErrorBody),
    )
)]
pub async fn log(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    body: Body,
) -> Result<StatusCode> {
    let req: LogLines = body.json()?;
    if req.text.len() > MAX_LOG_TEXT {
        return Err(Error::BadRequest(format!(
            "log text is {} bytes: send at most {MAX_LOG_TEXT} a call",
            req.text.len()
        )));
    }
    let hash = token_hash(&req.lease_token);
    let appended = ctx.store.append_external_log(id, &hash, &req.text).await?;
    held(&ctx, id, appended.then_some(())).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /external/{id}/release`: hands a taken task back to its queue, for another poll
/// (a worker that stops, or cannot run it); the attempt goes on, its lease ends.
#[utoipa::path(
    post,
    path = "/external/{id}/release",
    operation_id = "releaseExternalTask",
    tag = "external",
    params(path::Id),
    request_body = LeaseProof,
    responses(
        (status = 204, description = "Back on its queue"),
        (status = 404, description = "No such task instance", body = ErrorBody),
        (status = 409, description = "The token is not the task's lease (it lapsed, or the task ended)", body = ErrorBody),
    )
)]
pub async fn release(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    body: Body,
) -> Result<StatusCode> {
    let req: LeaseProof = body.json()?;
    let hash = token_hash(&req.lease_token);
    let queue = held(&ctx, id, ctx.store.release_lease(id, &hash).await?).await?;
    tracing::info!(task_instance_id = id, queue, "external task released");
    Ok(StatusCode::NO_CONTENT)
}

/// What a call under a lease token got, or, when the token did not hold task `id`, why.
async fn held<T>(ctx: &Ctx, id: i64, got: Option<T>) -> Result<T> {
    match got {
        Some(v) => Ok(v),
        None => Err(not_held(ctx, id).await),
    }
}

/// Why a lease token does not hold task `id`: 404 for no such task, else 409 naming why.
async fn not_held(ctx: &Ctx, id: i64) -> Error {
    crate::completions::not_ended(ctx, id, true).await
}
