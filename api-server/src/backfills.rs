//! Backfills: `POST /projects/{project}/workflows/{name}/backfill` stores one run per
//! schedule time; the leader master starts them (serially or N at once) and records how
//! each ended. `GET /backfills/{id}` shows the progress; `POST /backfills/{id}/cancel` skips
//! the runs not started yet.

use crate::Ctx;
use crate::access::Caller;
use crate::commands::{RunOptions, latest_definition, refuse_undefined, startup_params};
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, Body, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::access::Role;
use shoal_common::definition::dependent_stages;
use shoal_common::schedule::{backfill_times, parse_timezone};
use shoal_common::start::Params;
use shoal_common::start::StartOptions;
use shoal_common::types::{
    BackfillRunState, BackfillState, FailureStrategy, Priority, ms_to_rfc3339,
};
use shoal_store::{BackfillRow, Cancel, Chained, NewBackfill};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// Runs one backfill may start.
const MAX_RUNS: usize = 10_000;

/// Which dates run first.
#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "snake_case")]
enum Order {
    #[default]
    Asc,
    Desc,
}

/// Runs to start for past dates: `from` and `to`, or `dates`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// First and last day (YYYY-MM-DD, inclusive).
    from: Option<String>,
    to: Option<String>,
    /// Single days instead of a range.
    #[serde(default)]
    dates: Vec<String>,
    /// Runs at once (default 1: serial).
    #[serde(default = "one")]
    parallel: u32,
    #[serde(default)]
    order: Order,
    /// A failed run stops the runs not yet started.
    #[serde(default)]
    stop_on_failure: bool,
    /// Zone of the days when the workflow has no schedule (its schedule's zone otherwise).
    timezone: Option<String>,
    /// Startup parameters of this workflow's runs (not of its dependents').
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, crate::commands::StartParam>)]
    params: BTreeMap<String, Value>,
    priority: Option<Priority>,
    /// Also backfill the same days of every workflow whose dependent tasks wait for this
    /// one, and of theirs in turn: each stage starts when the one before it has ended.
    #[serde(default)]
    with_dependents: bool,
    /// This workflow's runs' failure strategy, over its schedule's and definition's.
    #[serde(default)]
    failure_strategy: Option<FailureStrategy>,
    /// Worker group of its runs' tasks that name none, over its schedule's.
    #[serde(default)]
    worker_group: Option<String>,
    /// Alert channels that get its runs' alerts instead of the workflow's.
    #[serde(default)]
    alert_channels: Vec<String>,
    /// Each run's timeout over the definition's, e.g. `30m`.
    #[serde(default)]
    timeout: Option<String>,
    /// A project environment its runs' shell and python tasks run in.
    #[serde(default)]
    environment: Option<String>,
}

fn one() -> u32 {
    1
}

fn parse_day(field: &str, text: &str) -> Result<NaiveDate> {
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        Error::BadRequest(format!(
            "{field} '{text}' is not a date: use YYYY-MM-DD, e.g. 2026-01-31"
        ))
    })
}

impl BackfillRequest {
    /// The days asked for: a range or a list, not both.
    fn days(&self) -> Result<Vec<NaiveDate>> {
        match (&self.from, &self.to, self.dates.is_empty()) {
            (Some(from), Some(to), true) => {
                let (from, to) = (parse_day("from", from)?, parse_day("to", to)?);
                if to < from {
                    return Err(Error::BadRequest(format!(
                        "to ({to}) is before from ({from})"
                    )));
                }
                Ok(from.iter_days().take_while(|d| *d <= to).collect())
            }
            (None, None, false) => self.dates.iter().map(|d| parse_day("date", d)).collect(),
            _ => Err(Error::BadRequest(
                "give either \"from\" and \"to\" (a range of days) or \"dates\" (a list)".into(),
            )),
        }
    }
}

/// `POST .../backfill`: 201 `{id, runs, schedule_times}`. One run per fire time of the
/// workflow's schedule on each day (in its zone, with its start options), or one run per
/// day at 00:00 in `timezone` (default UTC) when the workflow has no schedule.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/backfill",
    operation_id = "createBackfill",
    tag = "backfills",
    params(path::Workflow),
    request_body = BackfillRequest,
    responses(
        (status = 201, body = BackfillCreated),
        (status = 400, description = "Bad dates, zone or parameters", body = ErrorBody),
        (status = 404, description = "No such workflow", body = ErrorBody),
    )
)]
pub async fn create(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<BackfillCreated>)> {
    let req: BackfillRequest = serde_json::from_slice(&body.0)
        .map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))?;
    if req.parallel == 0 {
        return Err(Error::BadRequest("parallel must be at least 1".into()));
    }
    let days = req.days()?;
    let params = startup_params(req.params.clone())?;
    let asked = Asked {
        req: &req,
        days: &days,
        caller: &caller,
    };
    let mut root = plan(&ctx, &asked, &project, &name, params, None).await?;
    // The start options asked for, for this workflow's runs (not its dependents').
    let run = RunOptions::check(
        &ctx,
        req.worker_group.clone(),
        req.alert_channels.clone(),
        req.timeout.as_deref(),
    )
    .await?;
    let environment =
        crate::environments::chosen(&ctx, &project, req.environment.as_deref(), "the backfill")
            .await?;
    let options = &mut root.options;
    options.failure_strategy = req.failure_strategy.or(options.failure_strategy);
    options.worker_group = run.worker_group.or(options.worker_group.take());
    options.alert_channels = run.alert_channels;
    options.timeout = run.timeout;
    options.environment = environment;
    // Planned first and stored in one transaction: all of them or none.
    let mut followers = Vec::new();
    let mut left_out = Vec::new();
    let mut hidden = 0;
    if req.with_dependents {
        let defs = ctx.store.latest_definitions().await?;
        let all = defs.iter().map(|d| (d.project.as_str(), &d.definition));
        for ((project, workflow), stage) in dependent_stages(all, &project, &name) {
            if caller.check(&project, Role::Operator).is_err() {
                // Not named: the caller may not even see that project.
                hidden += 1;
                continue;
            }
            let chained = Some(Chained { follows: 0, stage });
            let planned = plan(&ctx, &asked, &project, &workflow, Params::new(), chained);
            match planned.await {
                Ok(b) => followers.push(b),
                // Offline, its schedule does not fire on these days, or it reaches into a
                // project the caller may not operate: the rest goes on.
                Err(
                    Error::BadRequest(reason) | Error::Conflict(reason) | Error::Forbidden(reason),
                ) => {
                    left_out.push(format!("{project}/{workflow}: {reason}"));
                }
                Err(e) => return Err(e),
            }
        }
    }
    if hidden > 0 {
        left_out.push(format!(
            "{hidden} depending workflows in projects you may not operate"
        ));
    }
    let (id, ids) = ctx.store.create_backfills(&root, &followers).await?;
    tracing::info!(backfill_id = id, %project, workflow = %name, runs = root.times.len(), parallel = root.parallel, dependents = ids.len(), "backfill created");
    let answer = BackfillCreated {
        id,
        runs: root.times.len(),
        schedule_times: root.times.iter().map(|t| ms_to_rfc3339(*t)).collect(),
        dependents: followers
            .into_iter()
            .zip(ids)
            .map(|(b, id)| DependentBackfill {
                id,
                stage: b.chained.map_or(0, |c| c.stage),
                runs: b.times.len(),
                project: b.project,
                workflow: b.workflow,
            })
            .collect(),
        left_out,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// What a backfill request asks for, and who asks.
#[derive(Clone, Copy)]
struct Asked<'a> {
    req: &'a BackfillRequest,
    days: &'a [NaiveDate],
    caller: &'a Caller,
}

/// The backfill of one workflow over `days`: its schedule's fire times on each day (in
/// its zone, with its start options), or 00:00 of each day in the request's zone (default
/// UTC) when it has none. `params` go over its schedule's.
async fn plan(
    ctx: &Ctx,
    asked: &Asked<'_>,
    project: &str,
    name: &str,
    params: Params,
    chained: Option<Chained>,
) -> Result<NewBackfill> {
    let Asked { req, days, caller } = *asked;
    let def = latest_definition(ctx, project, name).await?;
    // Its runs start and read runs of other projects as a start would.
    crate::workflows::check_other_projects(caller, &def.definition)?;
    ctx.store.check_online(project, name).await?;
    let schedule = ctx
        .store
        .list_schedules(project, Some(name))
        .await?
        .into_iter()
        .next();
    let mut all = schedule
        .as_ref()
        .map(|s| s.spec.params.clone())
        .unwrap_or_default();
    all.extend(params);
    refuse_undefined(&def, &all)?;
    let (cron, tz, options) = match &schedule {
        Some(s) => {
            // A dependent's own schedule sets its zone; only the first one is told off.
            if chained.is_none() && req.timezone.as_ref().is_some_and(|t| *t != s.spec.timezone) {
                return Err(Error::BadRequest(format!(
                    "the workflow's schedule {} sets the timezone ({}); leave \"timezone\" out",
                    s.id, s.spec.timezone
                )));
            }
            let cron = s.spec.check()?;
            (Some(cron.clone()), cron.timezone(), s.spec.start_options())
        }
        None => {
            let timezone = req.timezone.clone().unwrap_or_else(|| "UTC".into());
            let tz = parse_timezone(&timezone)?;
            let options = StartOptions {
                timezone: Some(timezone),
                ..Default::default()
            };
            (None, tz, options)
        }
    };
    // Its runs are started in the caller's name.
    let options = StartOptions {
        started_by: caller.user_id,
        ..options
    };
    let mut times = backfill_times(cron.as_ref(), tz, days, MAX_RUNS)?;
    if times.is_empty() {
        return Err(Error::BadRequest(
            "the workflow's schedule does not fire on any of these days".into(),
        ));
    }
    if req.order == Order::Desc {
        times.reverse();
    }
    Ok(NewBackfill {
        project: project.to_string(),
        workflow: name.to_string(),
        version: def.version,
        params: all,
        priority: req.priority.or(schedule.and_then(|s| s.spec.priority)),
        options,
        parallel: req.parallel,
        stop_on_failure: req.stop_on_failure,
        times,
        chained,
    })
}

/// A backfill was stored; the leader master starts its runs.
#[derive(Serialize, ToSchema)]
pub struct BackfillCreated {
    pub id: i64,
    /// How many runs it has.
    pub runs: usize,
    /// The schedule time of each run, in start order.
    pub schedule_times: Vec<String>,
    /// With `with_dependents`: the backfills made for the workflows depending on it.
    pub dependents: Vec<DependentBackfill>,
    /// With `with_dependents`: depending workflows not backfilled, each with why.
    pub left_out: Vec<String>,
}

/// A backfill made for a workflow that depends on the backfilled one.
#[derive(Serialize, ToSchema)]
pub struct DependentBackfill {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    /// It starts when every backfill of a lower stage of the chain has ended (the first
    /// backfill is stage 0).
    pub stage: i32,
    pub runs: usize,
}

/// `GET /backfills/{id}`: state, dates done/total, failed dates named, every run.
#[utoipa::path(
    get,
    path = "/backfills/{id}",
    operation_id = "getBackfill",
    tag = "backfills",
    params(path::Id),
    responses(
        (status = 200, body = Backfill),
        (status = 404, description = "No such backfill", body = ErrorBody),
    )
)]
pub async fn get(State(ctx): State<Ctx>, ApiPath(id): ApiPath<i64>) -> Result<Json<Backfill>> {
    Ok(Json(backfill_json(&existing(&ctx, id).await?)))
}

async fn existing(ctx: &Ctx, id: i64) -> Result<BackfillRow> {
    ctx.store
        .get_backfill(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("backfill {id} does not exist")))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The project of `workflow` (default `default`).
    #[serde(default = "default_project")]
    #[param(default = "default")]
    project: String,
    /// Only backfills of this workflow.
    workflow: Option<String>,
    /// How many, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
}

fn default_project() -> String {
    "default".into()
}

/// `GET /backfills[?workflow=NAME&project=P&limit=N]`: newest first (100 by default).
#[utoipa::path(
    get,
    path = "/backfills",
    operation_id = "listBackfills",
    tag = "backfills",
    params(ListQuery),
    responses(
        (status = 200, description = "Newest first", body = [Backfill]),
        (status = 400, description = "A bad query", body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<Backfill>>> {
    let workflow = q.workflow.as_deref().map(|w| (q.project.as_str(), w));
    if workflow.is_some() {
        caller.check_visible(&q.project)?;
    }
    let limit = q.limit.unwrap_or(100).clamp(1, 1_000);
    let visible = caller.visible_projects();
    let rows = ctx
        .store
        .list_backfills(workflow, visible.as_deref(), limit)
        .await?;
    Ok(Json(rows.iter().map(backfill_json).collect()))
}

/// `POST /backfills/{id}/cancel`: the runs not started yet are skipped, started ones go
/// on; the backfill ends `cancelled` when they have ended. 409 unless it is running.
#[utoipa::path(
    post,
    path = "/backfills/{id}/cancel",
    operation_id = "cancelBackfill",
    tag = "backfills",
    params(path::Id),
    responses(
        (status = 200, body = BackfillCancelled),
        (status = 403, description = "A later stage of its chain (`with_dependents`) is in a project where the caller may not cancel it; nothing was cancelled", body = ErrorBody),
        (status = 404, description = "No such backfill", body = ErrorBody),
        (status = 409, description = "It is not running", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<BackfillCancelled>> {
    let row = existing(&ctx, id).await?;
    let may_cancel = |project: &str| caller.check(project, Role::Operator).is_ok();
    match ctx.store.cancel_backfill(id, may_cancel).await? {
        Cancel::Skipped(skipped) => Ok(Json(BackfillCancelled { id, skipped })),
        Cancel::NotRunning => Err(Error::Conflict(format!(
            "backfill {id} is {}; only a running backfill can be cancelled",
            row.state
        ))),
        Cancel::Refused { backfill, project } => {
            // Named only to whom may see it.
            let project = match caller.check_visible(&project) {
                Ok(()) => format!("project '{project}'"),
                Err(_) => "a project they may not view".to_string(),
            };
            Err(Error::Forbidden(format!(
                "backfill {id} is followed by backfill {backfill} in {project}, where user '{}' \
                 may not cancel it (the operator role is needed): nothing was cancelled; ask \
                 an operator there, or cancel the backfills of your projects one by one",
                caller.name
            )))
        }
    }
}

/// A cancel was recorded.
#[derive(Serialize, ToSchema)]
pub struct BackfillCancelled {
    pub id: i64,
    /// How many runs not started yet were skipped.
    pub skipped: usize,
}

/// A backfill with its progress and every run.
#[derive(Serialize, ToSchema)]
pub struct Backfill {
    pub id: i64,
    pub project: String,
    pub workflow: String,
    /// The definition version its runs pin.
    pub version: i32,
    pub state: BackfillState,
    /// Runs at once.
    pub parallel: u32,
    pub stop_on_failure: bool,
    /// Runs in all.
    pub total: usize,
    /// Runs that ended or were skipped.
    pub done: usize,
    pub succeeded: usize,
    pub running: usize,
    pub skipped: usize,
    /// Schedule times of the failed runs.
    pub failed: Vec<String>,
    /// Made by `with_dependents` for a workflow depending on backfill `follows`'s: it
    /// starts when every backfill of a lower `stage` of that chain has ended.
    pub follows: Option<i64>,
    pub stage: i32,
    /// In start order.
    pub runs: Vec<BackfillRun>,
    pub created_at: String,
    pub updated_at: String,
}

/// One schedule time of a backfill.
#[derive(Serialize, ToSchema)]
pub struct BackfillRun {
    pub schedule_time: String,
    pub state: BackfillRunState,
    /// The instance it started, once started.
    #[schema(required = true)]
    pub workflow_instance_id: Option<i64>,
    /// Why it could not start.
    #[schema(required = true)]
    pub error: Option<String>,
}

fn backfill_json(b: &BackfillRow) -> Backfill {
    let count = |state| b.runs.iter().filter(|r| r.state == state).count();
    let done = b
        .runs
        .iter()
        .filter(|r| {
            !matches!(
                r.state,
                BackfillRunState::Pending | BackfillRunState::Running
            )
        })
        .count();
    let failed: Vec<String> = b
        .runs
        .iter()
        .filter(|r| r.state == BackfillRunState::Failure)
        .map(|r| ms_to_rfc3339(r.schedule_time))
        .collect();
    Backfill {
        id: b.id,
        project: b.project.clone(),
        workflow: b.workflow.clone(),
        version: b.version,
        state: b.state,
        parallel: b.parallel,
        stop_on_failure: b.stop_on_failure,
        total: b.runs.len(),
        done,
        succeeded: count(BackfillRunState::Success),
        running: count(BackfillRunState::Running),
        skipped: count(BackfillRunState::Skipped),
        failed,
        follows: b.chained.map(|c| c.follows),
        stage: b.chained.map_or(0, |c| c.stage),
        runs: b
            .runs
            .iter()
            .map(|r| BackfillRun {
                schedule_time: ms_to_rfc3339(r.schedule_time),
                state: r.state,
                workflow_instance_id: r.workflow_instance_id,
                error: r.error.clone(),
            })
            .collect(),
        created_at: ms_to_rfc3339(b.created_at),
        updated_at: ms_to_rfc3339(b.updated_at),
    }
}
