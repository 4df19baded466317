//! Commands: the api-server's only way to make something run. A master claims each command
//! and turns it into a workflow instance.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_common::definition::normalize;
use shoal_common::start::{Params, Scope, StartOptions, check_param_name};
use shoal_common::types::ms_to_rfc3339;
use shoal_common::types::{CommandKind, FailureStrategy, Priority, now_ms};
use shoal_store::{CancelRefused, NewCommand, StoredDefinition};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// Startup parameters; values may be strings, numbers or booleans.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, StartParam>)]
    params: BTreeMap<String, Value>,
    /// Overrides the definition's priority for this run.
    #[serde(default)]
    priority: Option<Priority>,
    /// Tasks succeed without executing.
    #[serde(default)]
    dry_run: bool,
    /// Start from this task instead of the DAG's roots.
    #[serde(default)]
    from_task: Option<String>,
    /// Which tasks a start from `from_task` runs (the master's default: downstream).
    #[serde(default)]
    scope: Option<Scope>,
    /// Run this stored version instead of the latest.
    #[serde(default)]
    version: Option<i32>,
    /// A project environment its shell and python tasks run in, over the ones their
    /// task or workflow names.
    #[serde(default)]
    environment: Option<String>,
    /// Overrides the definition's failure strategy for this run.
    #[serde(default)]
    failure_strategy: Option<FailureStrategy>,
    /// Worker group of the tasks that name none (a live worker must serve it).
    #[serde(default)]
    worker_group: Option<String>,
    /// Alert channels that get this run's alerts instead of the workflow's.
    #[serde(default)]
    alert_channels: Vec<String>,
    /// The run's timeout over the definition's, e.g. `30m`.
    #[serde(default)]
    timeout: Option<String>,
    /// Start at this instant (RFC 3339, e.g. `2026-12-01T02:00:00+08:00`), not now: the
    /// command waits, cancellable, until it is due.
    #[serde(default)]
    at: Option<String>,
}

/// A startup parameter's value: tasks see it as a string.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum StartParam {
    String(String),
    Number(f64),
    Boolean(bool),
}

/// A start was accepted: the command a master will turn into an instance.
#[derive(Serialize, ToSchema)]
pub struct StartAccepted {
    pub command_id: i64,
    /// The definition version the run pins (the latest, unless the request chose one).
    pub version: i32,
}

/// `POST /projects/{project}/workflows/{name}/start` with an optional JSON body
/// `{"params": {...}, "priority": "high", "dry_run": true, "from_task": "b",
/// "scope": "only|upstream|downstream", "version": 3, "environment": "java17",
/// "failure_strategy": "continue", "worker_group": "gpu", "alert_channels": ["ops"],
/// "timeout": "30m", "at": "2026-12-01T02:00:00+08:00"}`. Pins the latest version (or the
/// one asked for) and answers 202 with the command id; `GET /commands/{id}` tells when it
/// became an instance. Unknown environments, worker groups and alert channels, and an
/// `at` in the past, are refused and write nothing.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/start",
    operation_id = "startWorkflow",
    tag = "workflows",
    params(path::Workflow),
    request_body(content = Option<StartRequest>, description = "Optional; an empty body starts with the defaults"),
    responses(
        (status = 202, description = "A command was written; `GET /commands/{command_id}` tells when it became an instance", body = StartAccepted),
        (status = 400, description = "A bad body, parameter or task", body = ErrorBody),
        (status = 403, description = "The caller lacks the role this needs, in the workflow's project or in another project the version started starts or reads runs of", body = ErrorBody),
        (status = 404, description = "No such workflow, or no such version of it", body = ErrorBody),
    )
)]
pub async fn start(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<StartAccepted>)> {
    let req: StartRequest = body.json_or_default()?;
    let params = startup_params(req.params)?;
    if req.scope.is_some() && req.from_task.is_none() {
        return Err(Error::BadRequest(
            "\"scope\" needs \"from_task\": name the task to start from".into(),
        ));
    }
    ctx.store.check_online(&project, &name).await?;
    let def = match req.version {
        None => latest_definition(&ctx, &project, &name).await?,
        Some(v) => match ctx.store.get_definition(&project, &name, Some(v)).await? {
            Some(def) => def,
            None => return Err(crate::workflows::missing(&ctx, &project, &name, Some(v)).await),
        },
    };
    crate::workflows::check_other_projects(&caller, &def.definition)?;
    if let Some(task) = &req.from_task
        && !def.definition.tasks.iter().any(|t| &t.name == task)
    {
        return Err(Error::BadRequest(format!(
            "from_task '{task}' is not a task of workflow '{project}/{name}' (version {})",
            def.version
        )));
    }
    refuse_undefined(&def, &params)?;
    let environment =
        crate::environments::chosen(&ctx, &project, req.environment.as_deref(), "the start")
            .await?;
    let run = RunOptions::check(
        &ctx,
        req.worker_group,
        req.alert_channels,
        req.timeout.as_deref(),
    )
    .await?;
    let due_at = req.at.as_deref().map(due_at).transpose()?;
    let cmd = NewCommand {
        kind: CommandKind::Start,
        project,
        workflow: name,
        version: def.version,
        params,
        priority: req.priority,
        workflow_instance_id: None,
        options: StartOptions {
            dry_run: req.dry_run,
            from_task: req.from_task,
            scope: req.scope,
            environment,
            failure_strategy: req.failure_strategy,
            worker_group: run.worker_group,
            alert_channels: run.alert_channels,
            timeout: run.timeout,
            started_by: caller.user_id,
            ..Default::default()
        },
        parent_task_id: None,
        schedule_time: None,
        due_at,
    };
    let command_id = ctx.store.insert_command(&cmd).await?;
    tracing::info!(
        command_id,
        kind = %cmd.kind,
        project = %cmd.project,
        workflow = %cmd.workflow,
        version = cmd.version,
        params = cmd.params.len(),
        dry_run = cmd.options.dry_run,
        from_task = cmd.options.from_task.as_deref(),
        due_at = cmd.due_at,
        "command written"
    );
    let answer = StartAccepted {
        command_id,
        version: cmd.version,
    };
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// The run options a start, schedule or backfill may set beyond the definition's, checked:
/// a worker group some live worker serves, alert channels that exist, a timeout.
#[derive(Debug, Default)]
pub(crate) struct RunOptions {
    pub worker_group: Option<String>,
    pub alert_channels: Vec<String>,
    pub timeout: Option<std::time::Duration>,
}

impl RunOptions {
    pub(crate) async fn check(
        ctx: &Ctx,
        worker_group: Option<String>,
        alert_channels: Vec<String>,
        timeout: Option<&str>,
    ) -> Result<RunOptions> {
        if let Some(group) = &worker_group {
            check_worker_group(ctx, group).await?;
        }
        let mut alert_channels: Vec<String> = alert_channels.iter().map(|c| normalize(c)).collect();
        alert_channels.sort();
        alert_channels.dedup();
        let names: Vec<&str> = alert_channels.iter().map(String::as_str).collect();
        let missing = match names.is_empty() {
            true => Vec::new(),
            false => ctx.store.missing_alert_channels(&names).await?,
        };
        if let Some(channel) = missing.first() {
            return Err(Error::BadRequest(format!(
                "alert channel '{channel}' does not exist; create it first with `shoal alert-channel create {channel} ...` or name one of `shoal alert-channel list`"
            )));
        }
        let timeout = match timeout {
            None => None,
            Some(text) => match shoal_common::duration::parse(text) {
                Ok(d) if !d.is_zero() => Some(d),
                Ok(_) => {
                    return Err(Error::BadRequest(
                        "timeout must be longer than 0s, e.g. \"30m\"".into(),
                    ));
                }
                Err(e) => return Err(Error::BadRequest(format!("timeout: {e}"))),
            },
        };
        Ok(RunOptions {
            worker_group,
            alert_channels,
            timeout,
        })
    }
}

/// Refuses a worker group no live worker serves (when this api-server sees the cluster).
async fn check_worker_group(ctx: &Ctx, group: &str) -> Result<()> {
    if group.trim().is_empty() {
        return Err(Error::BadRequest("worker_group must not be empty".into()));
    }
    let Some(registry) = &ctx.registry else {
        return Ok(()); // Without a registry no one can tell; the run waits for a worker.
    };
    let mut served: Vec<String> = registry
        .nodes()
        .await?
        .into_iter()
        .filter(|n| n.role == shoal_common::registry::Role::Worker)
        .flat_map(|n| n.groups)
        .collect();
    served.sort();
    served.dedup();
    if served.iter().any(|g| g == group) {
        return Ok(());
    }
    Err(Error::BadRequest(format!(
        "worker group '{group}' has no live worker; start a worker with `--groups {group}` or choose one served now: {}",
        if served.is_empty() {
            "none".to_string()
        } else {
            served.join(", ")
        }
    )))
}

/// The instant (ms) of a start's `at`: RFC 3339, not in the past.
fn due_at(at: &str) -> Result<i64> {
    let when = chrono::DateTime::parse_from_rfc3339(at).map_err(|e| {
        Error::BadRequest(format!(
            "at '{at}' is not an RFC 3339 time ({e}); write e.g. 2026-12-01T02:00:00+08:00"
        ))
    })?;
    let ms = when.timestamp_millis();
    if ms < now_ms() {
        return Err(Error::BadRequest(format!(
            "at '{at}' is in the past; give a later time, or leave it out to start now"
        )));
    }
    Ok(ms)
}

/// The latest version of a workflow; 404 when it was never applied.
pub(crate) async fn latest_definition(
    ctx: &Ctx,
    project: &str,
    name: &str,
) -> Result<StoredDefinition> {
    ctx.store.get_definition(project, name, None).await?.ok_or_else(|| {
        Error::NotFound(format!(
            "workflow '{project}/{name}' does not exist; apply it first with `shoal apply -f FILE`"
        ))
    })
}

/// Refuses startup parameters that leave a `${name}` of a task undefined.
pub(crate) fn refuse_undefined(def: &StoredDefinition, params: &Params) -> Result<()> {
    match def
        .definition
        .unresolvable_references(params)
        .into_iter()
        .next()
    {
        Some((task, param)) => Err(Error::BadRequest(format!(
            "task '{task}' refers to ${{{param}}}, which is not defined: add it to the workflow's or the task's params, or pass it at start (--param {param}=VALUE)"
        ))),
        None => Ok(()),
    }
}

/// Checks startup parameter names and turns scalar values into the strings tasks see.
pub(crate) fn startup_params(raw: BTreeMap<String, Value>) -> Result<Params> {
    raw.into_iter()
        .map(|(k, v)| {
            check_param_name(&k).map_err(Error::BadRequest)?;
            let v = match v {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(Error::BadRequest(format!(
                        "parameter '{k}' must be a string, number or boolean, not {other}"
                    )));
                }
            };
            Ok((k, v))
        })
        .collect()
}

/// Where a command is.
#[derive(Serialize, ToSchema)]
pub struct CommandStatus {
    pub id: i64,
    pub status: CommandProgress,
    /// The instance it became (status `done`).
    #[schema(required = true)]
    pub workflow_instance_id: Option<i64>,
    /// Why it could not become an instance (status `error`).
    #[schema(required = true)]
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommandProgress {
    /// Written, not yet claimed by a master.
    Pending,
    /// Claimed and turned into a workflow instance.
    Done,
    /// Could not be turned into an instance.
    Error,
}

/// `GET /commands/{id}`: pending until a master claims it, then done with the instance id
/// (or error with the reason it could not become an instance).
#[utoipa::path(
    get,
    path = "/commands/{id}",
    operation_id = "getCommand",
    tag = "instances",
    params(path::Id),
    responses(
        (status = 200, body = CommandStatus),
        (status = 404, description = "No such command", body = ErrorBody),
    )
)]
pub async fn status(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<CommandStatus>> {
    let status = ctx
        .store
        .command_status(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("command {id} does not exist")))?;
    let (status, workflow_instance_id, error) = match status {
        shoal_store::CommandStatus::Pending => (CommandProgress::Pending, None, None),
        shoal_store::CommandStatus::Done {
            workflow_instance_id,
        } => (CommandProgress::Done, Some(workflow_instance_id), None),
        shoal_store::CommandStatus::Error { error } => (CommandProgress::Error, None, Some(error)),
    };
    Ok(Json(CommandStatus {
        id,
        status,
        workflow_instance_id,
        error,
    }))
}

/// A command no master has claimed yet: a run at a later time, or one about to start.
#[derive(Serialize, ToSchema)]
pub struct PendingCommandView {
    pub id: i64,
    pub kind: CommandKind,
    pub project: String,
    pub workflow: String,
    pub version: i32,
    pub params: Params,
    pub options: StartOptions,
    /// The instance a resume, rerun or resubmit acts on.
    #[schema(required = true)]
    pub workflow_instance_id: Option<i64>,
    pub created_at: String,
    /// When it becomes due (RFC 3339); null: at once.
    #[schema(required = true)]
    pub due_at: Option<String>,
}

/// `GET /projects/{project}/commands`: the project's commands no master has claimed yet,
/// those due soonest first; runs at a later time (`"at"` at start) wait here until due.
#[utoipa::path(
    get,
    path = "/projects/{project}/commands",
    operation_id = "listCommands",
    tag = "instances",
    params(path::Project),
    responses(
        (status = 200, body = [PendingCommandView]),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<PendingCommandView>>> {
    crate::projects::existing(&ctx, &project).await?;
    let pending = ctx.store.pending_commands(&project).await?;
    let views = pending
        .into_iter()
        .map(|c| PendingCommandView {
            id: c.id,
            kind: c.kind,
            project: c.project,
            workflow: c.workflow,
            version: c.version,
            params: c.params,
            options: c.options,
            workflow_instance_id: c.workflow_instance_id,
            created_at: ms_to_rfc3339(c.created_at),
            due_at: c.due_at.map(ms_to_rfc3339),
        })
        .collect();
    Ok(Json(views))
}

/// `DELETE /commands/{id}`: cancels a command no master has claimed yet (a run at a later
/// time, usually); it never runs, and `GET /commands/{id}` says it was cancelled.
#[utoipa::path(
    delete,
    path = "/commands/{id}",
    operation_id = "cancelCommand",
    tag = "instances",
    params(path::Id),
    responses(
        (status = 204, description = "Cancelled"),
        (status = 403, description = "The caller is not an operator of the command's project", body = ErrorBody),
        (status = 404, description = "No such command", body = ErrorBody),
        (status = 409, description = "A master already claimed it (its instance named), or it already ended", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode> {
    match ctx.store.cancel_command(id, &caller.name).await? {
        Ok(()) => {
            tracing::info!(command_id = id, by = %caller.name, "command cancelled");
            Ok(StatusCode::NO_CONTENT)
        }
        Err(CancelRefused::Started {
            workflow_instance_id,
        }) => Err(Error::Conflict(format!(
            "command {id} already started as workflow instance {workflow_instance_id}; stop that instead (`shoal stop {workflow_instance_id}`)"
        ))),
        Err(CancelRefused::Ended { error }) => Err(Error::Conflict(format!(
            "command {id} will not run already: {error}"
        ))),
        Err(CancelRefused::Missing) => Err(Error::NotFound(format!("command {id} does not exist"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_params_become_strings() {
        let raw = serde_json::from_str(r#"{"dt":"2026-01-01","n":3,"x.y-z":true,"f":1.5}"#);
        let p = startup_params(raw.unwrap()).unwrap();
        assert_eq!(p["dt"], "2026-01-01");
        assert_eq!(p["n"], "3");
        assert_eq!(p["x.y-z"], "true");
        assert_eq!(p["f"], "1.5");
    }

    #[test]
    fn bad_params_are_named() {
        let bad = |j: &str| startup_params(serde_json::from_str(j).unwrap()).unwrap_err();
        assert!(
            bad(r#"{"":"v"}"#)
                .to_string()
                .contains("invalid parameter name ''")
        );
        assert!(bad(r#"{"a b":"v"}"#).to_string().contains("'a b'"));
        assert!(
            bad(r#"{"k":[1]}"#)
                .to_string()
                .contains("parameter 'k' must be")
        );
        assert!(
            bad(r#"{"k":null}"#)
                .to_string()
                .contains("parameter 'k' must be")
        );
    }
}
