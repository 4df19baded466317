//! Cron schedules of a workflow (one per workflow):
//! `/projects/{project}/workflows/{name}/schedules[/{id}[/enable|/disable|/preview]]`.
//! Times are RFC 3339; fire times in previews carry the schedule zone's offset.

use crate::Ctx;
use crate::commands::{RunOptions, latest_definition, refuse_undefined, startup_params};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, Body, path};
use crate::times::{next_fire, parse_optional_time, parse_time, time};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::definition::normalize;
use shoal_common::schedule::{CronSchedule, Misfire, Window};
use shoal_common::types::{FailureStrategy, Priority, ms_to_rfc3339, now_ms};
use shoal_store::{ScheduleRow, ScheduleSpec, audit_object};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// Fire times a preview shows unless asked, and the most it shows.
const DEFAULT_PREVIEW: usize = 5;
const MAX_PREVIEW: usize = 100;

/// A schedule to create, or to replace one with.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// 5 fields (`minute hour day-of-month month day-of-week`) or 6 with a leading second.
    #[schema(example = "30 2 * * *")]
    cron: String,
    /// IANA zone the cron is read in (default UTC).
    #[serde(default = "utc")]
    timezone: String,
    /// No fire before this time (RFC 3339).
    start_time: Option<String>,
    /// No fire after this time (RFC 3339).
    end_time: Option<String>,
    /// Default true.
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    misfire: Misfire,
    /// Startup parameters of every run it fires.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, crate::commands::StartParam>)]
    params: BTreeMap<String, Value>,
    priority: Option<Priority>,
    worker_group: Option<String>,
    failure_strategy: Option<FailureStrategy>,
    /// Alert channels that get its runs' alerts instead of the workflow's.
    #[serde(default)]
    alert_channels: Vec<String>,
    /// Each run's timeout over the definition's, e.g. `30m`.
    timeout: Option<String>,
    /// A project environment its runs' shell and python tasks run in.
    environment: Option<String>,
}

fn utc() -> String {
    "UTC".into()
}

fn yes() -> bool {
    true
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
            alert_channels: Vec::new(),
            timeout: None,
            environment: self.environment.as_deref().map(normalize),
        })
    }
}

/// The spec of a request for `project/name`, checked against the workflow's latest
/// version (404 when it has none, 400 for a bad cron, zone or parameter).
async fn checked_spec(ctx: &Ctx, project: &str, name: &str, body: &Body) -> Result<ScheduleSpec> {
    let req: ScheduleRequest = serde_json::from_slice(&body.0)
        .map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))?;
    let def = latest_definition(ctx, project, name).await?;
    // A schedule outlives today's workers: its worker group is not checked against them.
    let (channels, timeout) = (req.alert_channels.clone(), req.timeout.clone());
    let run = RunOptions::check(ctx, None, channels, timeout.as_deref()).await?;
    let mut spec = req.into_spec()?;
    (spec.alert_channels, spec.timeout) = (run.alert_channels, run.timeout);
    let asked = spec.environment.take();
    spec.environment =
        crate::environments::chosen(ctx, project, asked.as_deref(), "the schedule").await?;
    spec.check()?;
    refuse_undefined(&def, &spec.params)?;
    Ok(spec)
}

/// `POST .../schedules`: 201 with the schedule; 409 when the workflow has one.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/schedules",
    operation_id = "createSchedule",
    tag = "schedules",
    params(path::Workflow),
    request_body = ScheduleRequest,
    responses(
        (status = 201, body = Schedule),
        (status = 400, description = "A bad cron, zone, time or parameter", body = ErrorBody),
        (status = 404, description = "No such workflow", body = ErrorBody),
        (status = 409, description = "The workflow has a schedule already", body = ErrorBody),
    )
)]
pub async fn create(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<Schedule>)> {
    let spec = checked_spec(&ctx, &project, &name, &body).await?;
    let row = ctx.store.create_schedule(&project, &name, &spec).await?;
    tracing::info!(schedule_id = row.id, %project, workflow = %name, cron = %row.spec.cron, timezone = %row.spec.timezone, "schedule created");
    Ok((StatusCode::CREATED, Json(schedule_json(&row))))
}

/// `GET .../schedules`: the workflow's schedule, if it has one (a list of at most one).
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}/schedules",
    operation_id = "listSchedules",
    tag = "schedules",
    params(path::Workflow),
    responses((status = 200, body = [Schedule]))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Vec<Schedule>>> {
    let rows = ctx.store.list_schedules(&project, Some(&name)).await?;
    Ok(Json(rows.iter().map(schedule_json).collect()))
}

/// `GET .../schedules/{id}`
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}/schedules/{id}",
    operation_id = "getSchedule",
    tag = "schedules",
    params(path::Schedule),
    responses(
        (status = 200, body = Schedule),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Schedule>> {
    let row = find(&ctx, &project, &name, id).await?;
    Ok(Json(schedule_json(&row)))
}

/// `PUT .../schedules/{id}`: replaces the schedule (same body as create); it fires from
/// now on under the new spec.
#[utoipa::path(
    put,
    path = "/projects/{project}/workflows/{name}/schedules/{id}",
    operation_id = "updateSchedule",
    tag = "schedules",
    params(path::Schedule),
    request_body = ScheduleRequest,
    responses(
        (status = 200, body = Schedule),
        (status = 400, description = "A bad cron, zone, time or parameter", body = ErrorBody),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
pub async fn update(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
    body: Body,
) -> Result<Json<Schedule>> {
    find(&ctx, &project, &name, id).await?;
    let spec = checked_spec(&ctx, &project, &name, &body).await?;
    let row = ctx.store.update_schedule(id, &spec).await?;
    tracing::info!(schedule_id = id, cron = %row.spec.cron, "schedule updated");
    Ok(Json(schedule_json(&row)))
}

/// `DELETE .../schedules/{id}`: 204.
#[utoipa::path(
    delete,
    path = "/projects/{project}/workflows/{name}/schedules/{id}",
    operation_id = "deleteSchedule",
    tag = "schedules",
    params(path::Schedule),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
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
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/schedules/{id}/enable",
    operation_id = "enableSchedule",
    tag = "schedules",
    params(path::Schedule),
    responses(
        (status = 200, body = Schedule),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
pub async fn enable(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Schedule>> {
    set_enabled(ctx, project, name, id, true).await
}

/// `POST .../schedules/{id}/disable`
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/schedules/{id}/disable",
    operation_id = "disableSchedule",
    tag = "schedules",
    params(path::Schedule),
    responses(
        (status = 200, body = Schedule),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
pub async fn disable(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Schedule>> {
    set_enabled(ctx, project, name, id, false).await
}

async fn set_enabled(
    ctx: Ctx,
    project: String,
    name: String,
    id: i64,
    enabled: bool,
) -> Result<Json<Schedule>> {
    find(&ctx, &project, &name, id).await?;
    let row = ctx.store.set_schedule_enabled(id, enabled).await?;
    tracing::info!(schedule_id = id, enabled, "schedule switched");
    Ok(Json(schedule_json(&row)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    /// How many fire times, 1 to 100 (default 5).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    count: Option<String>,
}

/// The next fire times of a schedule.
#[derive(Serialize, ToSchema)]
pub struct SchedulePreview {
    pub id: i64,
    pub cron: String,
    pub timezone: String,
    /// RFC 3339 with the zone's offset.
    pub fire_times: Vec<String>,
}

/// `GET .../schedules/{id}/preview?count=N`: the next N fire times from now (within the
/// schedule's start and end time), whether or not it is enabled.
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}/schedules/{id}/preview",
    operation_id = "previewSchedule",
    tag = "schedules",
    params(path::Schedule, PreviewQuery),
    responses(
        (status = 200, body = SchedulePreview),
        (status = 400, description = "A bad count", body = ErrorBody),
        (status = 404, description = "No such schedule of this workflow", body = ErrorBody),
    )
)]
pub async fn preview(
    State(ctx): State<Ctx>,
    ApiPath((project, name, id)): ApiPath<(String, String, i64)>,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> Result<Json<SchedulePreview>> {
    let count = preview_count(q.count)?;
    let row = find(&ctx, &project, &name, id).await?;
    let cron = row.spec.check()?;
    Ok(Json(SchedulePreview {
        id: row.id,
        fire_times: upcoming(&cron, row.spec.window(), count),
        cron: row.spec.cron,
        timezone: row.spec.timezone,
    }))
}

/// The `count` of a preview query: 1 to 100, default 5.
fn preview_count(count: Option<String>) -> Result<usize> {
    match count.filter(|c| !c.is_empty()) {
        None => Ok(DEFAULT_PREVIEW),
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PREVIEW).contains(n))
            .ok_or_else(|| {
                Error::BadRequest(format!(
                    "count '{c}' must be a number from 1 to {MAX_PREVIEW}"
                ))
            }),
    }
}

/// The next `count` fire times from now within `window`, in the cron's zone.
fn upcoming(cron: &CronSchedule, window: Window, count: usize) -> Vec<String> {
    let mut fires = Vec::with_capacity(count);
    let mut cursor = now_ms();
    while fires.len() < count {
        let Some(t) = cron.next_due(window, cursor) else {
            break;
        };
        fires.push(cron.show(t));
        cursor = t;
    }
    fires
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CronPreviewQuery {
    /// 5 fields (`minute hour day-of-month month day-of-week`) or 6 with a leading second.
    #[param(example = "30 2 * * *")]
    cron: String,
    /// IANA zone the cron is read in (default UTC).
    timezone: Option<String>,
    /// No fire before this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    start_time: Option<String>,
    /// No fire after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    end_time: Option<String>,
    /// How many fire times, 1 to 100 (default 5).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    count: Option<String>,
}

/// The next fire times of a cron that is not stored (yet).
#[derive(Serialize, ToSchema)]
pub struct CronPreview {
    pub cron: String,
    pub timezone: String,
    /// RFC 3339 with the zone's offset; fewer than asked when the end time comes first.
    pub fire_times: Vec<String>,
}

/// `GET /cron/preview?cron=&timezone=&start_time=&end_time=&count=`: the next fire times
/// of a cron in a zone, by the schedulers' own cron math; what a schedule form shows
/// while it is being filled in.
#[utoipa::path(
    get,
    path = "/cron/preview",
    operation_id = "previewCron",
    tag = "schedules",
    params(CronPreviewQuery),
    responses(
        (status = 200, body = CronPreview),
        (status = 400, description = "A bad cron, zone, time or count", body = ErrorBody),
    )
)]
pub async fn preview_cron(ApiQuery(q): ApiQuery<CronPreviewQuery>) -> Result<Json<CronPreview>> {
    let count = preview_count(q.count)?;
    let timezone = q.timezone.filter(|z| !z.is_empty()).unwrap_or_else(utc);
    let window = Window {
        start_ms: parse_optional_time("start_time", q.start_time)?,
        end_ms: parse_optional_time("end_time", q.end_time)?,
    }
    .check()?;
    let cron = CronSchedule::parse(&q.cron, &timezone)?;
    Ok(Json(CronPreview {
        fire_times: upcoming(&cron, window, count),
        cron: q.cron,
        timezone,
    }))
}

/// The schedule `id` of `project/name`; 404 otherwise.
/// Schedule `id` of `project/name`, named in the audit row of the mutation that looks it up.
async fn find(ctx: &Ctx, project: &str, name: &str, id: i64) -> Result<ScheduleRow> {
    audit_object(&format!("schedule {id}"));
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

/// A workflow's cron schedule.
#[derive(Serialize, ToSchema)]
pub struct Schedule {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    pub cron: String,
    pub timezone: String,
    #[schema(required = true)]
    pub start_time: Option<String>,
    #[schema(required = true)]
    pub end_time: Option<String>,
    pub enabled: bool,
    pub misfire: Misfire,
    /// Startup parameters of every run it fires.
    pub params: BTreeMap<String, String>,
    #[schema(required = true)]
    pub priority: Option<Priority>,
    #[schema(required = true)]
    pub worker_group: Option<String>,
    #[schema(required = true)]
    pub failure_strategy: Option<FailureStrategy>,
    pub alert_channels: Vec<String>,
    /// e.g. `90s`.
    #[schema(required = true)]
    pub timeout: Option<String>,
    #[schema(required = true)]
    pub environment: Option<String>,
    /// The next fire time, in the schedule's zone; null when disabled or past its end.
    #[schema(required = true)]
    pub next_fire: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

fn schedule_json(s: &ScheduleRow) -> Schedule {
    Schedule {
        id: s.id,
        project: s.project.clone(),
        workflow: s.workflow.clone(),
        cron: s.spec.cron.clone(),
        timezone: s.spec.timezone.clone(),
        start_time: time(s.spec.start_time),
        end_time: time(s.spec.end_time),
        enabled: s.spec.enabled,
        misfire: s.spec.misfire,
        params: s.spec.params.clone(),
        priority: s.spec.priority,
        worker_group: s.spec.worker_group.clone(),
        failure_strategy: s.spec.failure_strategy,
        alert_channels: s.spec.alert_channels.clone(),
        timeout: s.spec.timeout.map(shoal_common::duration::format),
        environment: s.spec.environment.clone(),
        next_fire: next_fire(s),
        created_at: ms_to_rfc3339(s.created_at),
        updated_at: ms_to_rfc3339(s.updated_at),
    }
}
