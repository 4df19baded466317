//! A project's environments: `GET /projects/{project}/environments`, `GET|PUT|DELETE
//! /projects/{project}/environments/{name}`. An environment is shell lines a worker runs in
//! the same bash before a shell or python task that uses it (`export JAVA_HOME=...`,
//! `source /opt/venv/bin/activate`). It is code, as a task's command is: editors of the
//! project change it, its viewers read it, and audit rows name it, never its text.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_name, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{EnvironmentDelete, EnvironmentRow, audit_object};
use utoipa::{IntoParams, ToSchema};

/// Longest config an environment may have.
const MAX_CONFIG_BYTES: usize = 64 * 1024;

/// An environment, with its shell lines.
#[derive(Serialize, ToSchema)]
pub struct Environment {
    /// Named as `environment:` by a task, a workflow, or a run's start.
    pub name: String,
    /// The shell lines, as set.
    pub config: String,
    pub description: String,
    /// Who set it last.
    pub updated_by: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

fn environment_json(e: EnvironmentRow) -> Environment {
    Environment {
        name: e.name,
        config: e.config,
        description: e.description,
        updated_by: e.updated_by,
        created_at: ms_to_rfc3339(e.created_at),
        updated_at: ms_to_rfc3339(e.updated_at),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentConfig {
    /// Shell lines (at most 64 KiB) run by bash before the task's own script, in the same
    /// shell; parameters are not expanded in them (bash sees `${x}` as written).
    pub config: String,
    #[serde(default)]
    pub description: String,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct EnvironmentPath {
    /// Project name.
    project: String,
    /// Environment name.
    name: String,
}

/// The environments of a project, by name.
#[utoipa::path(
    get,
    path = "/projects/{project}/environments",
    operation_id = "listEnvironments",
    tag = "projects",
    params(path::Project),
    responses((status = 200, body = [Environment]), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<Environment>>> {
    let envs = ctx.store.list_environments(&project).await?;
    Ok(Json(envs.into_iter().map(environment_json).collect()))
}

/// One environment.
#[utoipa::path(
    get,
    path = "/projects/{project}/environments/{name}",
    operation_id = "getEnvironment",
    tag = "projects",
    params(EnvironmentPath),
    responses((status = 200, body = Environment), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn get(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Environment>> {
    match ctx.store.get_environment(&project, &name).await? {
        Some(env) => Ok(Json(environment_json(env))),
        None => Err(missing(&project, &name)),
    }
}

/// Sets an environment (creating it, or replacing its config). Runs whose tasks start
/// after it is set use the new config.
#[utoipa::path(
    put,
    path = "/projects/{project}/environments/{name}",
    operation_id = "setEnvironment",
    tag = "projects",
    params(EnvironmentPath),
    request_body = EnvironmentConfig,
    responses(
        (status = 201, description = "Created", body = Environment),
        (status = 200, description = "Its config replaced", body = Environment),
        (status = 400, description = "A bad name or config", body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such project", body = ErrorBody),
    )
)]
pub async fn set(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<Environment>)> {
    audit_object(&environment_object(&name));
    check_name("environment", &name)?;
    let new: EnvironmentConfig = body.json()?;
    let config = new.config.trim_end();
    if config.trim().is_empty() || config.len() > MAX_CONFIG_BYTES {
        return Err(Error::BadRequest(format!(
            "an environment's config must be 1 to {MAX_CONFIG_BYTES} bytes of shell lines, not {}",
            config.len()
        )));
    }
    if config.contains('\0') {
        return Err(Error::BadRequest(
            "an environment's config may not hold a NUL byte: it is shell lines".into(),
        ));
    }
    let created = ctx
        .store
        .put_environment(&project, &name, config, &new.description, &caller.name)
        .await?;
    let row = ctx
        .store
        .get_environment(&project, &name)
        .await?
        .ok_or_else(|| missing(&project, &name))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(environment_json(row))))
}

/// Deletes an environment; refused while the latest version of a workflow of the project
/// names it.
#[utoipa::path(
    delete,
    path = "/projects/{project}/environments/{name}",
    operation_id = "deleteEnvironment",
    tag = "projects",
    params(EnvironmentPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A workflow's latest version names it", body = ErrorBody),
    )
)]
pub async fn delete(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    audit_object(&environment_object(&name));
    match ctx.store.delete_environment(&project, &name).await? {
        EnvironmentDelete::Deleted => Ok(StatusCode::NO_CONTENT),
        EnvironmentDelete::Missing => Err(missing(&project, &name)),
        EnvironmentDelete::InUse(workflows) => Err(Error::Conflict(format!(
            "environment '{name}' is used by workflow{} {} of project '{project}': apply {} without it first",
            if workflows.len() == 1 { "" } else { "s" },
            workflows
                .iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(", "),
            if workflows.len() == 1 { "it" } else { "them" },
        ))),
    }
}

/// The environment a start, backfill or schedule asks for, normalised, once `project`
/// is known to have it (see [`check_exist`]).
pub(crate) async fn chosen(
    ctx: &Ctx,
    project: &str,
    asked: Option<&str>,
    what: &str,
) -> Result<Option<String>> {
    let Some(name) = asked.map(shoal_common::definition::normalize) else {
        return Ok(None);
    };
    check_exist(ctx, project, &[name.as_str()], what).await?;
    Ok(Some(name))
}

/// 400 naming the first of `names` that `project` has no environment of, and how to
/// create it; `what` names what asks for it (a workflow, the start).
pub(crate) async fn check_exist(
    ctx: &Ctx,
    project: &str,
    names: &[&str],
    what: &str,
) -> Result<()> {
    match ctx
        .store
        .missing_environments(project, names)
        .await?
        .first()
    {
        None => Ok(()),
        Some(name) => Err(Error::BadRequest(format!(
            "{what} names environment '{name}', which project '{project}' does not have; create it first with `shoal env set {name} -f env.sh --project {project}`"
        ))),
    }
}

fn missing(project: &str, name: &str) -> Error {
    Error::NotFound(format!("project '{project}' has no environment '{name}'"))
}

/// An environment as an audit row names it: by its name, never its config.
fn environment_object(name: &str) -> String {
    format!("environment '{name}'")
}
