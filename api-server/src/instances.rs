//! Reading workflow instances and task instances. Times are RFC 3339 or null, states are
//! lowercase snake case.

use crate::Ctx;
use crate::access::Caller;
use crate::actions::{ActionOffer, offers};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, path};
use crate::times::{parse_optional_time, time};
use axum::extract::State;
use axum::http::HeaderName;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::start::StartOptions;
use shoal_common::types::{Priority, TaskState, TaskType, WorkflowState, ms_to_rfc3339};
use shoal_store::{InstanceFilter, InstanceRow, Offered, TaskInstanceRow};
use std::collections::{BTreeMap, HashMap};
use utoipa::{IntoParams, ToSchema};

/// Instances listed when the query gives no `limit`, and the most it may ask for.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = shoal_store::MAX_INSTANCE_LIST;
/// How many instances match the filter of `GET /instances`, whatever its limit and offset.
pub const TOTAL_COUNT_HEADER: HeaderName = HeaderName::from_static("x-total-count");

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only instances of this project.
    project: Option<String>,
    /// Only instances of workflows with this name.
    workflow: Option<String>,
    /// Only instances in this state.
    #[param(value_type = Option<WorkflowState>)]
    state: Option<String>,
    /// How many to list, 1 to 10000 (default 100; the store reads at most 1000).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    limit: Option<String>,
    /// How many of the (newest first) matches to skip: 0-based.
    #[param(value_type = Option<i64>, minimum = 0)]
    offset: Option<String>,
    /// Only instances created at or after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// Only instances created before this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
}

impl ListQuery {
    fn into_filter(self) -> Result<InstanceFilter> {
        let state = match self.state.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(s.parse::<WorkflowState>().map_err(|_| {
                let valid: Vec<_> = WorkflowState::ALL.iter().map(|s| s.as_str()).collect();
                Error::BadRequest(format!(
                    "unknown state '{s}'; valid states: {}",
                    valid.join(", ")
                ))
            })?),
        };
        let limit = match self.limit.filter(|s| !s.is_empty()) {
            None => DEFAULT_LIMIT,
            Some(s) => s
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    Error::BadRequest(format!(
                        "limit '{s}' must be a number from 1 to {MAX_LIMIT}"
                    ))
                })?,
        };
        let offset = match self.offset.filter(|s| !s.is_empty()) {
            None => 0,
            Some(s) => s.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                Error::BadRequest(format!("offset '{s}' must be a number from 0"))
            })?,
        };
        Ok(InstanceFilter {
            project: self.project.filter(|s| !s.is_empty()),
            projects: None,
            workflow: self.workflow.filter(|s| !s.is_empty()),
            state,
            from: parse_optional_time("from", self.from)?,
            to: parse_optional_time("to", self.to)?,
            limit: Some(limit),
            offset: Some(offset),
        })
    }
}

/// `GET /instances?project=&workflow=&state=&from=&to=&limit=&offset=`: instance
/// summaries, newest first, with the count of all matches in `X-Total-Count`.
#[utoipa::path(
    get,
    path = "/instances",
    operation_id = "listInstances",
    tag = "instances",
    params(ListQuery),
    responses(
        (status = 200, description = "Newest first (created_at, then id)", body = [InstanceSummary],
            headers(("X-Total-Count" = i64, description = "How many instances match the filter, whatever the limit and offset"))),
        (status = 400, description = "A bad filter", body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<([(HeaderName, String); 1], Json<Vec<InstanceSummary>>)> {
    let mut filter = q.into_filter()?;
    if let Some(project) = &filter.project {
        caller.check_visible(project)?;
    }
    filter.projects = caller.visible_projects();
    let rows = ctx.store.list_instances(&filter).await?;
    let total = ctx.store.count_instances(&filter).await?;
    Ok((
        [(TOTAL_COUNT_HEADER, total.to_string())],
        Json(rows.iter().map(instance_summary).collect()),
    ))
}

/// A workflow instance (one run of a workflow, with its reruns).
#[derive(Serialize, ToSchema)]
pub struct InstanceSummary {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    /// The definition version it runs.
    pub version: i32,
    pub state: WorkflowState,
    pub priority: Priority,
    /// 1, then 2, 3... after reruns.
    pub run: i32,
    pub options: StartOptions,
    /// The command it was started by.
    pub command_id: i64,
    /// The instant a cron or backfill run stands for.
    #[schema(required = true)]
    pub schedule_time: Option<String>,
    pub created_at: String,
    #[schema(required = true)]
    pub started_at: Option<String>,
    #[schema(required = true)]
    pub ended_at: Option<String>,
    /// Why it waits or was discarded (execution types).
    #[schema(required = true)]
    pub message: Option<String>,
}

/// An instance with its parameters, its master and every attempt of every task.
#[derive(Serialize, ToSchema)]
pub struct InstanceDetail {
    #[serde(flatten)]
    pub summary: InstanceSummary,
    pub params: BTreeMap<String, String>,
    /// Address of the master driving it.
    #[schema(required = true)]
    pub master: Option<String>,
    /// For a sub_workflow task's child run: the parent instance and its task instance.
    #[schema(required = true)]
    pub parent_instance_id: Option<i64>,
    #[schema(required = true)]
    pub parent_task_id: Option<i64>,
    /// Every operator action, with whether the instance's state allows it.
    pub actions: Vec<ActionOffer>,
    /// By id.
    pub tasks: Vec<TaskInstance>,
}

/// `GET /instances/{id}`: the instance with every attempt of every task.
#[utoipa::path(
    get,
    path = "/instances/{id}",
    operation_id = "getInstance",
    tag = "instances",
    params(path::Id),
    responses(
        (status = 200, body = InstanceDetail),
        (status = 404, description = "No such instance", body = ErrorBody),
    )
)]
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<InstanceDetail>> {
    let row = ctx
        .store
        .get_instance(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("workflow instance {id} does not exist")))?;
    let tasks = ctx.store.list_task_instances(id).await?;
    let sub_workflows: Vec<i64> = tasks
        .iter()
        .filter(|t| t.task_type == TaskType::SubWorkflow.as_str())
        .map(|t| t.id)
        .collect();
    let children = ctx.store.child_instances(&sub_workflows).await?;
    let mut external = external_offers(&ctx, &tasks).await?;
    let parent_instance_id = match row.parent_task_id {
        Some(task) => ctx
            .store
            .get_task_instance(task)
            .await?
            .map(|t| t.workflow_instance_id),
        None => None,
    };
    Ok(Json(InstanceDetail {
        summary: instance_summary(&row),
        actions: offers(row.state),
        params: row.params,
        master: row.owner,
        parent_instance_id,
        parent_task_id: row.parent_task_id,
        tasks: tasks
            .iter()
            .map(|t| TaskInstance {
                child_instance_id: children.get(&t.id).copied(),
                external: external.remove(&t.id).map(offer),
                ..task_instance(t)
            })
            .collect(),
    }))
}

/// `GET /task-instances/{id}`: one task attempt.
#[utoipa::path(
    get,
    path = "/task-instances/{id}",
    operation_id = "getTaskInstance",
    tag = "instances",
    params(path::Id),
    responses(
        (status = 200, body = TaskInstance),
        (status = 404, description = "No such task instance", body = ErrorBody),
    )
)]
pub async fn task(State(ctx): State<Ctx>, ApiPath(id): ApiPath<i64>) -> Result<Json<TaskInstance>> {
    let row = find_task(&ctx, id).await?;
    let mut offers = external_offers(&ctx, std::slice::from_ref(&row)).await?;
    Ok(Json(TaskInstance {
        external: offers.remove(&row.id).map(offer),
        ..task_instance(&row)
    }))
}

/// The offers of those of `tasks` that are external and wait (offered, or taken), by id.
async fn external_offers(ctx: &Ctx, tasks: &[TaskInstanceRow]) -> Result<HashMap<i64, Offered>> {
    let waiting: Vec<i64> = tasks
        .iter()
        .filter(|t| t.task_type == TaskType::External.as_str() && t.state == TaskState::Waiting)
        .map(|t| t.id)
        .collect();
    let offers = ctx.store.external_offers(&waiting).await?;
    Ok(offers
        .into_iter()
        .map(|o| (o.task_instance_id, o))
        .collect())
}

fn offer(o: Offered) -> ExternalOffer {
    ExternalOffer {
        queue: o.queue,
        worker: o.worker,
        lease_expires_at: time(o.lease_expires_at),
    }
}

/// Where an external task is offered, and who holds it.
#[derive(Serialize, ToSchema)]
pub struct ExternalOffer {
    /// The queue it is offered on.
    pub queue: String,
    /// The external worker that took it; null while it waits for a poll.
    #[schema(required = true)]
    pub worker: Option<String>,
    /// When its lease lapses unless the worker heartbeats; null while not taken.
    #[schema(required = true)]
    pub lease_expires_at: Option<String>,
}

pub(crate) async fn find_task(ctx: &Ctx, id: i64) -> Result<TaskInstanceRow> {
    ctx.store
        .get_task_instance(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("task instance {id} does not exist")))
}

fn instance_summary(r: &InstanceRow) -> InstanceSummary {
    InstanceSummary {
        id: r.id,
        project: r.project.clone(),
        workflow: r.workflow.clone(),
        version: r.version,
        state: r.state,
        priority: r.priority,
        run: r.run,
        options: r.options.clone(),
        command_id: r.command_id,
        schedule_time: time(r.schedule_time),
        created_at: ms_to_rfc3339(r.created_at),
        started_at: time(r.started_at),
        ended_at: time(r.ended_at),
        message: r.message.clone(),
    }
}

/// One attempt of one task.
#[derive(Serialize, ToSchema)]
pub struct TaskInstance {
    pub id: i64,
    pub workflow_instance_id: i64,
    /// The run of the instance it belongs to.
    pub run: i32,
    pub name: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub state: TaskState,
    /// 1, then 2, 3... for retries.
    pub attempt: i32,
    pub priority: Priority,
    /// gRPC address of the worker it went to.
    #[schema(required = true)]
    pub worker: Option<String>,
    pub worker_group: String,
    pub submitted_at: String,
    #[schema(required = true)]
    pub started_at: Option<String>,
    #[schema(required = true)]
    pub ended_at: Option<String>,
    #[schema(required = true)]
    pub exit_code: Option<i32>,
    /// Output parameters it set.
    pub output: BTreeMap<String, String>,
    #[schema(required = true)]
    pub message: Option<String>,
    #[schema(required = true)]
    pub task_group: Option<String>,
    /// For a sub_workflow task: the child instance it started, once there is one (only
    /// in `GET /instances/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub child_instance_id: Option<i64>,
    /// For an external task while it waits: its queue, and its worker and lease once
    /// taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub external: Option<ExternalOffer>,
}

fn task_instance(t: &TaskInstanceRow) -> TaskInstance {
    TaskInstance {
        id: t.id,
        workflow_instance_id: t.workflow_instance_id,
        run: t.run,
        name: t.name.clone(),
        task_type: t.task_type.clone(),
        state: t.state,
        attempt: t.attempt,
        priority: t.priority,
        worker: t.worker.clone(),
        worker_group: t.worker_group.clone(),
        submitted_at: ms_to_rfc3339(t.submitted_at),
        started_at: time(t.started_at),
        ended_at: time(t.ended_at),
        exit_code: t.exit_code,
        output: t.output.clone(),
        message: t.message.clone(),
        task_group: t.task_group.clone(),
        child_instance_id: None,
        external: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(state: Option<&str>, limit: Option<&str>) -> ListQuery {
        ListQuery {
            project: None,
            workflow: Some("w".into()),
            state: state.map(Into::into),
            limit: limit.map(Into::into),
            offset: None,
            from: None,
            to: None,
        }
    }

    #[test]
    fn filters_are_checked() {
        let f = query(Some("ready_stop"), Some("5")).into_filter().unwrap();
        assert_eq!(f.state, Some(WorkflowState::ReadyStop));
        assert_eq!(f.limit, Some(5));
        assert_eq!(f.workflow.as_deref(), Some("w"));
        assert_eq!(
            query(None, None).into_filter().unwrap().limit,
            Some(DEFAULT_LIMIT)
        );

        let e = query(Some("done"), None)
            .into_filter()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'done'") && e.contains("running") && e.contains("serial_wait"),
            "{e}"
        );
        let paged = ListQuery {
            offset: Some("200".into()),
            from: Some("2026-01-01T00:00:00Z".into()),
            to: Some("2026-01-02T00:00:00+01:00".into()),
            ..query(None, None)
        }
        .into_filter()
        .unwrap();
        assert_eq!(paged.offset, Some(200));
        assert_eq!(paged.from, Some(1_767_225_600_000));
        assert_eq!(paged.to, Some(1_767_225_600_000 + 23 * 3_600_000));
        let bad_offset = ListQuery {
            offset: Some("-1".into()),
            ..query(None, None)
        };
        let e = bad_offset.into_filter().unwrap_err().to_string();
        assert!(e.contains("offset '-1'"), "{e}");
        let bad_time = ListQuery {
            from: Some("yesterday".into()),
            ..query(None, None)
        };
        let e = bad_time.into_filter().unwrap_err().to_string();
        assert!(e.contains("from 'yesterday'"), "{e}");
        for bad in ["0", "-1", "x", "10001"] {
            let e = query(None, Some(bad))
                .into_filter()
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("limit '{bad}'")), "{e}");
        }
    }
}
