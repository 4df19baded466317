//! Workflow definitions: apply (create a new version), validate, list, read, versions.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, Body, path};
use crate::times::next_fire;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::access::Role;
use shoal_common::definition::{DefinitionError, WorkflowDef};
use shoal_common::types::{WorkflowState, ms_to_rfc3339};
use shoal_store::StoredDefinition;
use std::collections::HashMap;
use utoipa::{IntoParams, ToSchema};

/// What applying a definition did.
#[derive(Serialize, ToSchema)]
pub struct Applied {
    pub project: String,
    pub name: String,
    /// The version the definition is stored as.
    pub version: i32,
    /// False when the definition equals the latest version (nothing was stored).
    pub created: bool,
}

/// `POST /projects/{project}/workflows`: the body is the definition, YAML or JSON.
/// Answers 201 when a new version was stored, 200 when the body equals the latest version.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows",
    operation_id = "applyWorkflow",
    tag = "workflows",
    params(path::Project),
    request_body(
        description = "The workflow definition, YAML or JSON (either content type takes either; \
            without auth one of them is required). Without a `project` key it belongs to the \
            URL's project.",
        content(
            (String = "application/yaml"),
            (WorkflowDef = "application/json"),
        )
    ),
    responses(
        (status = 201, description = "Stored as a new version", body = Applied),
        (status = 200, description = "Equal to the latest version; nothing stored", body = Applied),
        (status = 400, description = "Refused: the message (and `line`, `column`, `task` when known) names the offending part", body = ErrorBody),
        (status = 403, description = "The caller lacks the role this needs: editor of the project, and operator of each other project the workflow starts runs of, viewer of each it waits on runs of", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit", body = ErrorBody),
    )
)]
pub async fn apply(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(project): ApiPath<String>,
    body: Body,
) -> Result<(StatusCode, Json<Applied>)> {
    let mut def = checked(&ctx, &caller, &project, &body).await?;
    // Triggers' literal tokens and passwords are stored as their hashes only; `***` and a
    // literal that is the stored one keep the stored hash.
    let stored = ctx
        .store
        .get_definition(&def.project, &def.name, None)
        .await?;
    let stored = stored.map(|d| d.definition.triggers).unwrap_or_default();
    let def = tokio::task::spawn_blocking(move || {
        shoal_common::trigger::seal(&mut def.triggers, &stored).map(|()| def)
    })
    .await
    .map_err(|e| Error::Unavailable(format!("sealing trigger credentials: {e}")))??;
    let (version, created) = ctx.store.put_definition(&def).await?;
    tracing::info!(
        project = %def.project,
        workflow = %def.name,
        version,
        created,
        tasks = def.tasks.len(),
        "workflow applied"
    );
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = Applied {
        project: def.project,
        name: def.name,
        version,
        created,
    };
    Ok((status, Json(answer)))
}

/// A definition as apply and validate check it: parsed, valid, in the URL's project,
/// naming task groups and alert channels that exist.
async fn checked(ctx: &Ctx, caller: &Caller, project: &str, body: &Body) -> Result<WorkflowDef> {
    let def = parse_for_project(body.text()?, project, ctx.limits.body_bytes)?;
    check_other_projects(caller, &def)?;
    let limit = ctx.limits.tasks;
    if def.tasks.len() > limit {
        return Err(Error::BadRequest(format!(
            "workflow '{}' has {} tasks; this server takes at most {limit} (its --max-tasks)",
            def.name,
            def.tasks.len()
        )));
    }
    check_references(ctx, &def).await?;
    Ok(def)
}

/// A definition that passed validation, as the editor shows it.
#[derive(Serialize, ToSchema)]
pub struct Validated {
    pub name: String,
    /// In definition order.
    pub tasks: Vec<ValidatedTask>,
    /// The global parameters, by name.
    pub params: Vec<Param>,
}

#[derive(Serialize, ToSchema)]
pub struct ValidatedTask {
    pub name: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub depends_on: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Param {
    pub name: String,
    pub value: String,
}

/// `POST /projects/{project}/validate`: checks a definition exactly as apply
/// does and stores nothing.
#[utoipa::path(
    post,
    path = "/projects/{project}/validate",
    operation_id = "validateWorkflow",
    tag = "workflows",
    params(path::Project),
    request_body(
        description = "The workflow definition, YAML or JSON, as for apply.",
        content(
            (String = "application/yaml"),
            (WorkflowDef = "application/json"),
        )
    ),
    responses(
        (status = 200, description = "Valid; the DAG it describes", body = Validated),
        (status = 400, description = "Refused, as apply would: the message (and `line`, `column`, `task` when known) names the offending part", body = ErrorBody),
        (status = 403, description = "The caller lacks the role this needs, as for apply (roles in the other projects the workflow names included)", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit", body = ErrorBody),
    )
)]
pub async fn validate(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(project): ApiPath<String>,
    body: Body,
) -> Result<Json<Validated>> {
    let def = checked(&ctx, &caller, &project, &body).await?;
    Ok(Json(Validated {
        tasks: def
            .tasks
            .into_iter()
            .map(|t| ValidatedTask {
                name: t.name,
                task_type: t.task_type,
                depends_on: t.depends_on,
            })
            .collect(),
        params: def
            .params
            .into_iter()
            .map(|(name, value)| Param { name, value })
            .collect(),
        name: def.name,
    }))
}

/// Task groups, environments and alert channels a definition names must exist when it is
/// applied (a group deleted later fails the task that needs it, with the reason).
async fn check_references(ctx: &Ctx, def: &WorkflowDef) -> Result<()> {
    if let Some(group) = ctx
        .store
        .missing_task_groups(&def.task_groups())
        .await?
        .first()
    {
        let task = def
            .tasks
            .iter()
            .find(|t| t.task_group.as_deref() == Some(group.as_str()))
            .map_or("", |t| t.name.as_str());
        return Err(Error::BadRequest(format!(
            "task '{task}' uses task group '{group}', which does not exist; create it first with `shoal task-group create {group} --slots N`"
        )));
    }
    let what = format!("workflow '{}'", def.name);
    crate::environments::check_exist(ctx, &def.project, &def.environments(), &what).await?;
    let channels = def.alert_channels();
    if channels.is_empty() {
        return Ok(());
    }
    if let Some(channel) = ctx.store.missing_alert_channels(&channels).await?.first() {
        return Err(Error::BadRequest(format!(
            "alert channel '{channel}' does not exist; create it first with `shoal alert-channel create {channel} ...`"
        )));
    }
    Ok(())
}

/// 403 unless the caller may do in other projects what the workflow will do there: start
/// runs (operator, as starting them by hand needs) and read them (viewer). Otherwise an
/// editor of one project could run, or read the outputs of, another's workflows. Checked
/// when it is applied and again at every start and rollback, with the roles of that
/// moment.
pub(crate) fn check_other_projects(caller: &Caller, def: &WorkflowDef) -> Result<()> {
    let other = def.other_projects();
    let starts = other
        .starts
        .iter()
        .map(|p| (*p, Role::Operator, "starts runs"));
    let reads = other
        .reads
        .iter()
        .map(|p| (*p, Role::Viewer, "waits on runs"));
    for (project, role, what) in starts.chain(reads) {
        caller.check(project, role).map_err(|e| match e {
            Error::Forbidden(why) => Error::Forbidden(format!(
                "workflow '{}' {what} of project '{project}' (sub_workflow, foreach, on_failure \
                 or dependent): {why}",
                def.name
            )),
            other => other,
        })?;
    }
    Ok(())
}

/// Parses and validates a definition applied under `url_project`. A definition without a
/// `project` key belongs to the URL's project; one that names another project is refused.
/// Its YAML aliases may expand it to at most `max_bytes`.
fn parse_for_project(
    text: &str,
    url_project: &str,
    max_bytes: usize,
) -> Result<WorkflowDef, DefinitionError> {
    let mut def = WorkflowDef::parse_within(text, max_bytes)?;
    // The parse succeeded, so the text is a YAML mapping; only whether it has the key
    // matters (an explicit `project: default` must not be overridden by the URL). Its
    // other keys are skipped, not built.
    #[derive(Deserialize)]
    struct ProjectKey {
        project: Option<serde::de::IgnoredAny>,
    }
    let names_project = serde_norway::from_str::<ProjectKey>(text)
        .map(|k| k.project.is_some())
        .unwrap_or(true);
    if !names_project {
        def.project = url_project.to_string();
        def.validate()?;
    } else if def.project != url_project {
        return Err(DefinitionError::ProjectMismatch {
            given: def.project,
            expected: url_project.to_string(),
        });
    }
    Ok(def)
}

/// One line of a project's workflow list.
#[derive(Serialize, ToSchema)]
pub struct WorkflowSummary {
    pub project: String,
    pub name: String,
    pub latest_version: i32,
    /// When the latest version was stored.
    pub updated_at: String,
    /// The workflow's schedule, if it has one.
    #[schema(required = true)]
    pub schedule: Option<ScheduleBrief>,
    /// The workflow's latest run, if it ran.
    #[schema(required = true)]
    pub last_run: Option<LastRun>,
    /// False once taken offline: it cannot be started and its schedule does not fire.
    pub online: bool,
}

#[derive(Serialize, ToSchema)]
pub struct ScheduleBrief {
    pub id: i64,
    pub cron: String,
    pub timezone: String,
    pub enabled: bool,
    /// The next fire time, in the schedule's zone; null when disabled or past its end.
    #[schema(required = true)]
    pub next_fire: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct LastRun {
    /// The workflow instance id.
    pub id: i64,
    pub state: WorkflowState,
    pub created_at: String,
    #[schema(required = true)]
    pub ended_at: Option<String>,
}

/// `GET /projects/{project}/workflows`: one line per workflow with its latest version,
/// schedule and latest run (three queries in all).
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows",
    operation_id = "listWorkflows",
    tag = "workflows",
    params(path::Project),
    responses((status = 200, description = "By name", body = [WorkflowSummary]))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<WorkflowSummary>>> {
    let rows = ctx.store.list_definitions(&project).await?;
    let mut schedules: HashMap<String, ScheduleBrief> = ctx
        .store
        .list_schedules(&project, None)
        .await?
        .into_iter()
        .map(|s| {
            let brief = ScheduleBrief {
                id: s.id,
                next_fire: next_fire(&s),
                cron: s.spec.cron,
                timezone: s.spec.timezone,
                enabled: s.spec.enabled,
            };
            (s.workflow, brief)
        })
        .collect();
    let mut last_runs: HashMap<String, LastRun> = ctx
        .store
        .latest_instances(&project)
        .await?
        .into_iter()
        .map(|r| {
            let run = LastRun {
                id: r.id,
                state: r.state,
                created_at: ms_to_rfc3339(r.created_at),
                ended_at: r.ended_at.map(ms_to_rfc3339),
            };
            (r.workflow, run)
        })
        .collect();
    let out = rows
        .into_iter()
        .map(|d| WorkflowSummary {
            schedule: schedules.remove(&d.name),
            last_run: last_runs.remove(&d.name),
            updated_at: ms_to_rfc3339(d.updated_at),
            project: d.project,
            name: d.name,
            latest_version: d.latest_version,
            online: d.online,
        })
        .collect();
    Ok(Json(out))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VersionQuery {
    /// The version to read (default: the latest).
    version: Option<i32>,
}

/// One stored version of a workflow.
#[derive(Serialize, ToSchema)]
pub struct Workflow {
    pub project: String,
    pub name: String,
    pub version: i32,
    /// When this version was stored.
    pub created_at: String,
    pub definition: WorkflowDef,
    /// The definition as YAML, fields at their default left out (`shoal apply` takes it).
    pub yaml: String,
    /// False once the workflow was taken offline: it cannot be started and its schedule
    /// does not fire.
    pub online: bool,
}

/// `GET /projects/{project}/workflows/{name}[?version=N]`: the latest or a given version.
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}",
    operation_id = "getWorkflow",
    tag = "workflows",
    params(path::Workflow, VersionQuery),
    responses(
        (status = 200, body = Workflow),
        (status = 404, description = "No such workflow, or no such version of it", body = ErrorBody),
    )
)]
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<VersionQuery>,
) -> Result<Json<Workflow>> {
    match ctx.store.get_definition(&project, &name, q.version).await? {
        Some(def) => {
            let online = ctx.store.offline_since(&project, &name).await?.is_none();
            Ok(Json(workflow(def, online)))
        }
        None => Err(missing(&ctx, &project, &name, q.version).await),
    }
}

#[derive(Serialize, ToSchema)]
pub struct WorkflowVersion {
    pub version: i32,
    /// When this version was stored.
    pub created_at: String,
}

/// `GET /projects/{project}/workflows/{name}/versions`: every stored version, newest
/// first (`GET .../{name}?version=N` reads one).
#[utoipa::path(
    get,
    path = "/projects/{project}/workflows/{name}/versions",
    operation_id = "listWorkflowVersions",
    tag = "workflows",
    params(path::Workflow),
    responses(
        (status = 200, description = "Newest first", body = [WorkflowVersion]),
        (status = 404, description = "No such workflow", body = ErrorBody),
    )
)]
pub async fn versions(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Vec<WorkflowVersion>>> {
    let versions = ctx.store.list_versions(&project, &name).await?;
    if versions.is_empty() {
        return Err(missing(&ctx, &project, &name, None).await);
    }
    Ok(Json(
        versions
            .into_iter()
            .map(|v| WorkflowVersion {
                version: v.version,
                created_at: ms_to_rfc3339(v.created_at),
            })
            .collect(),
    ))
}

/// The 404 for a definition lookup, telling a missing workflow from a missing version.
/// The 404 for a workflow, or a version of it, that does not exist.
pub(crate) async fn missing(ctx: &Ctx, project: &str, name: &str, version: Option<i32>) -> Error {
    if let Some(v) = version {
        match ctx.store.get_definition(project, name, None).await {
            Ok(Some(latest)) => {
                return Error::NotFound(format!(
                    "workflow '{project}/{name}' has no version {v} (latest is {})",
                    latest.version
                ));
            }
            Ok(None) => {}
            Err(e) => return e.into(),
        }
    }
    Error::NotFound(format!("workflow '{project}/{name}' does not exist"))
}

/// A stored version as the API shows it: trigger credentials hidden.
fn workflow(mut d: StoredDefinition, online: bool) -> Workflow {
    shoal_common::trigger::mask(&mut d.definition.triggers);
    Workflow {
        online,
        project: d.project,
        name: d.name,
        version: d.version,
        created_at: ms_to_rfc3339(d.created_at),
        yaml: d.definition.to_yaml(&[]),
        definition: d.definition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::definition::MAX_EXPANDED_BYTES;

    const NO_PROJECT: &str = "name: w\ntasks:\n- {name: a, type: noop}\n";

    #[test]
    fn a_definition_without_project_takes_the_urls() {
        assert_eq!(
            parse_for_project(NO_PROJECT, "etl", MAX_EXPANDED_BYTES)
                .unwrap()
                .project,
            "etl"
        );
        assert_eq!(
            parse_for_project(NO_PROJECT, "default", MAX_EXPANDED_BYTES)
                .unwrap()
                .project,
            "default"
        );
        let json = r#"{"name":"w","tasks":[{"name":"a","type":"noop"}]}"#;
        assert_eq!(
            parse_for_project(json, "etl", MAX_EXPANDED_BYTES)
                .unwrap()
                .project,
            "etl"
        );
    }

    #[test]
    fn a_definition_naming_another_project_is_refused() {
        let text = format!("project: default\n{NO_PROJECT}");
        let err = parse_for_project(&text, "etl", MAX_EXPANDED_BYTES)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'default'") && err.contains("'etl'"), "{err}");
        assert_eq!(
            parse_for_project(&text, "default", MAX_EXPANDED_BYTES)
                .unwrap()
                .project,
            "default"
        );
    }

    #[test]
    fn a_bad_url_project_is_named() {
        let err = parse_for_project(NO_PROJECT, "bad name", MAX_EXPANDED_BYTES)
            .unwrap_err()
            .to_string();
        assert!(err.contains("project name 'bad name'"), "{err}");
    }
}
