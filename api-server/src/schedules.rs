//! Cron schedules of a workflow (one per workflow):
//! `/projects/{project}/workflows/{name}/schedules[/{id}[/enable|/disable|/preview]]`.
//! Times are RFC 3339; fire times in previews carry the schedule zone's offset.

use crate::Ctx;
use crate::commands::{latest_definition, refuse_undefined, startup_params};
use crate::error::{Error, Result};
use crate::extract::{ApiPath, ApiQuery, Body};
use crate::instances::time;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_common::schedule::Misfire;
use shoal_common::store::{ScheduleRow, ScheduleSpec};
use shoal_common::types::{FailureStrategy, Priority, ms_to_rfc3339, now_ms};
use std::collections::BTreeMap;

/// Fire times a preview shows unless asked, and the most it shows.
const DEFAULT_PREVIEW: usize = 5;
const MAX_PREVIEW: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    cron: String,
    #[serde(default = "utc")]
    timezone: String,
    start_time: Option<String>,
    end_time: Option<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    misfire: Misfire,
    #[serde(default)]
    params: BTreeMap<String, Value>,
    priority: Option<Priority>,
    worker_group: Option<String>,
    failure_strategy: Option<FailureStrategy>,
}

fn utc() -> String {
    "UTC".into()
}

fn yes() -> bool {
    true
}

/// Parses an RFC 3339 time of the request; `field` names it in the error.
pub(crate) fn parse_time(field: &str, text: &str) -> Result<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Error::BadRequest(format!(
                "{field} '{text}' is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z): {e}"
            ))
        })
}

impl ScheduleRequest {
    fn into_spec(self) -> Result<ScheduleSpec> {
        if self.worker_group.as_deref().is_some_and(str::is_empty) {
            return Err(Error::BadRequest("worker_group must not be empty".into()));
        }
        Ok(ScheduleSpec {
            start_time: self
                .start_time
                .as_deref()
                .map(|t| parse_time("start_time", t))
                .transpose()?,
            end_time: self
                .end_time
                .as_deref()
                .map(|t| parse_time("end_time", t))
                .transpose()?,
            params: startup_params(self.params)?,
            cron: self.cron,
            timezone: self.timezone,
            enabled: self.enabled,
            misfire: self.misfire,
            priority: self.priority,
            worker_group: self.worker_group,
            failure_strategy: self.failure_strategy,
        })
    }
}

/// The spec of a request for `project/name`, checked against the workflow's latest
/// version (404 when it has none, 400 for a bad cron, zone or parameter).
async fn checked_spec(ctx: &Ctx, project: &str, name: &str, body: &Body) -> Result<ScheduleSpec> {
    let req: ScheduleRequest = serde_json::from_slice(&body.0)
        .map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))?;
    let def = latest_definition(ctx, project, name).await?;
    let spec = req.into_spec()?;
    spec.check()?;
    refuse_undefined(&def, &spec.params)?;
    Ok(spec)
}

/// `POST .../schedules`: 201 with the schedule; 409 when the workflow has one.
pub async fn create(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<Value>)> {
    let spec = checked_spec(&ctx, &project, &name, &body).await?;
    let row = ctx.store.create_schedule(&project, &name, &spec).await?;
    tracing::info!(schedule_id = row.id, %project, workflow = %name, cron = %row.spec.cron, timezone = %row.spec.timezone, "schedule created");
    Ok((StatusCode::CREATED, Json(schedule_json(&row))))
}

/// `GET .../schedules`
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Vec<Value>>> {
    let rows = ctx.store.list_schedules(&project, Some(&name)).await?;
    Ok(Json(rows.iter().map(schedule_json).collect()))
}

/// `GET .../schedules/{id}`
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>> {
    let row = find(&ctx, &project, &name, id).await?;
    Ok(Json(schedule_json(&row)))
}

/// `PUT .../schedules/{id}`: replaces the schedule (same body as create); it fires from
/// now on under the new spec.
pub async fn update(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
    body: Body,
) -> Result<Json<Value>> {
    find(&ctx, &project, &name, id).await?;
    let spec = checked_spec(&ctx, &project, &name, &body).await?;
    let row = ctx.store.update_schedule(id, &spec).await?;
    tracing::info!(schedule_id = id, cron = %row.spec.cron, "schedule updated");
    Ok(Json(schedule_json(&row)))
}

/// `DELETE .../schedules/{id}`: 204.
pub async fn delete(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<StatusCode> {
    find(&ctx, &project, &name, id).await?;
    ctx.store.delete_schedule(id).await?;
    tracing::info!(schedule_id = id, "schedule deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// `POST .../schedules/{id}/enable`: it fires from now on (time it was off is not made up).
pub async fn enable(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>> {
    set_enabled(ctx, project, name, id, true).await
}

/// `POST .../schedules/{id}/disable`
pub async fn disable(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>> {
    set_enabled(ctx, project, name, id, false).await
}

async fn set_enabled(
    ctx: Ctx,
    project: String,
    name: String,
    id: i64,
    enabled: bool,
) -> Result<Json<Value>> {
    find(&ctx, &project, &name, id).await?;
    let row = ctx.store.set_schedule_enabled(id, enabled).await?;
    tracing::info!(schedule_id = id, enabled, "schedule switched");
    Ok(Json(schedule_json(&row)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    count: Option<String>,
}

/// `GET .../schedules/{id}/preview?count=N`: the next N fire times from now (within the
/// schedule's start and end time), whether or not it is enabled.
pub async fn preview(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> Result<Json<Value>> {
    let count = match q.count.filter(|c| !c.is_empty()) {
        None => DEFAULT_PREVIEW,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PREVIEW).contains(n))
            .ok_or_else(|| {
                Error::BadRequest(format!(
                    "count '{c}' must be a number from 1 to {MAX_PREVIEW}"
                ))
            })?,
    };
    let row = find(&ctx, &project, &name, id).await?;
    let cron = row.spec.check()?;
    let window = row.spec.window();
    let mut fires = Vec::with_capacity(count);
    let mut cursor = now_ms();
    while fires.len() < count {
        let Some(t) = cron.next_due(window, cursor) else {
            break;
        };
        fires.push(cron.show(t));
        cursor = t;
    }
    Ok(Json(json!({
        "id": row.id,
        "cron": row.spec.cron,
        "timezone": row.spec.timezone,
        "fire_times": fires,
    })))
}

/// The schedule `id` of `project/name`; 404 otherwise.
async fn find(ctx: &Ctx, project: &str, name: &str, id: i64) -> Result<ScheduleRow> {
    ctx.store
        .get_schedule(id)
        .await?
        .filter(|s| s.project == project && s.workflow == name)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "schedule {id} of workflow '{project}/{name}' does not exist"
            ))
        })
}

fn schedule_json(s: &ScheduleRow) -> Value {
    let next = s
        .spec
        .check()
        .ok()
        .filter(|_| s.spec.enabled)
        .and_then(|cron| {
            let t = cron.next_due(s.spec.window(), s.fired_until.max(now_ms()))?;
            Some(cron.show(t))
        });
    json!({
        "id": s.id,
        "project": s.project,
        "workflow": s.workflow,
        "cron": s.spec.cron,
        "timezone": s.spec.timezone,
        "start_time": time(s.spec.start_time),
        "end_time": time(s.spec.end_time),
        "enabled": s.spec.enabled,
        "misfire": s.spec.misfire,
        "params": s.spec.params,
        "priority": s.spec.priority,
        "worker_group": s.spec.worker_group,
        "failure_strategy": s.spec.failure_strategy,
        "next_fire": next,
        "created_at": ms_to_rfc3339(s.created_at),
        "updated_at": ms_to_rfc3339(s.updated_at),
    })
}
