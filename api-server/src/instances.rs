//! Reading workflow instances and task instances. Times are RFC 3339 or null, states are
//! lowercase snake case.

use crate::Ctx;
use crate::error::{Error, Result};
use crate::extract::{ApiPath, ApiQuery};
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::store::{InstanceFilter, InstanceRow, TaskInstanceRow};
use shoal_common::types::{WorkflowState, ms_to_rfc3339};

/// Instances listed when the query gives no `limit`, and the most it may ask for.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    project: Option<String>,
    workflow: Option<String>,
    state: Option<String>,
    limit: Option<String>,
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
        Ok(InstanceFilter {
            project: self.project.filter(|s| !s.is_empty()),
            workflow: self.workflow.filter(|s| !s.is_empty()),
            state,
            limit: Some(limit),
        })
    }
}

/// `GET /instances?project=&workflow=&state=&limit=`: instance summaries.
pub async fn list(
    State(ctx): State<Ctx>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<Value>>> {
    let rows = ctx.store.list_instances(&q.into_filter()?).await?;
    Ok(Json(rows.iter().map(instance_summary).collect()))
}

/// `GET /instances/{id}`: the instance with every attempt of every task.
pub async fn get(State(ctx): State<Ctx>, ApiPath(id): ApiPath<i64>) -> Result<Json<Value>> {
    let row = ctx
        .store
        .get_instance(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("workflow instance {id} does not exist")))?;
    let tasks = ctx.store.list_task_instances(id).await?;
    let mut out = instance_summary(&row);
    out["params"] = json!(row.params);
    out["master"] = json!(row.owner);
    out["tasks"] = tasks.iter().map(task_json).collect();
    Ok(Json(out))
}

/// `GET /task-instances/{id}`: one task attempt.
pub async fn task(State(ctx): State<Ctx>, ApiPath(id): ApiPath<i64>) -> Result<Json<Value>> {
    let row = find_task(&ctx, id).await?;
    Ok(Json(task_json(&row)))
}

pub(crate) async fn find_task(ctx: &Ctx, id: i64) -> Result<TaskInstanceRow> {
    ctx.store
        .get_task_instance(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("task instance {id} does not exist")))
}

pub(crate) fn time(ms: Option<i64>) -> Value {
    ms.map_or(Value::Null, |ms| Value::String(ms_to_rfc3339(ms)))
}

fn instance_summary(r: &InstanceRow) -> Value {
    json!({
        "id": r.id,
        "project": r.project,
        "workflow": r.workflow,
        "version": r.version,
        "state": r.state,
        "priority": r.priority,
        "run": r.run,
        "options": r.options,
        "command_id": r.command_id,
        "schedule_time": time(r.schedule_time),
        "created_at": ms_to_rfc3339(r.created_at),
        "started_at": time(r.started_at),
        "ended_at": time(r.ended_at),
        "message": r.message,
    })
}

fn task_json(t: &TaskInstanceRow) -> Value {
    json!({
        "id": t.id,
        "workflow_instance_id": t.workflow_instance_id,
        "run": t.run,
        "name": t.name,
        "type": t.task_type,
        "state": t.state,
        "attempt": t.attempt,
        "priority": t.priority,
        "worker": t.worker,
        "worker_group": t.worker_group,
        "submitted_at": ms_to_rfc3339(t.submitted_at),
        "started_at": time(t.started_at),
        "ended_at": time(t.ended_at),
        "exit_code": t.exit_code,
        "output": t.output,
        "message": t.message,
        "task_group": t.task_group,
    })
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
        for bad in ["0", "-1", "x", "10001"] {
            let e = query(None, Some(bad))
                .into_filter()
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("limit '{bad}'")), "{e}");
        }
    }
}
