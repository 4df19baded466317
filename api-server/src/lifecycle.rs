//! A workflow's lifecycle beyond its versions (DolphinScheduler's release state and
//! definition management): online and offline, rollback to an old version, deleting a
//! workflow, deleting an ended instance.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{ErrorBody, Result};
use crate::extract::{ApiPath, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

/// Whether a workflow is online.
#[derive(Serialize, ToSchema)]
pub struct Release {
    pub project: String,
    pub name: String,
    /// False: it cannot be started and its schedule does not fire.
    pub online: bool,
}

/// `POST /projects/{project}/workflows/{name}/online`: it can be started again. Its
/// schedule stays disabled until enabled again.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/online",
    operation_id = "onlineWorkflow",
    tag = "workflows",
    params(path::Workflow),
    responses((status = 200, body = Release), (status = 404, description = "No such workflow", body = ErrorBody))
)]
pub async fn online(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Release>> {
    release(&ctx, project, name, true).await
}

/// `POST /projects/{project}/workflows/{name}/offline`: starts (API, CLI, UI, triggers,
/// backfills) are refused with 409 and its schedule is disabled; runs under way go on.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/offline",
    operation_id = "offlineWorkflow",
    tag = "workflows",
    params(path::Workflow),
    responses((status = 200, body = Release), (status = 404, description = "No such workflow", body = ErrorBody))
)]
pub async fn offline(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<Json<Release>> {
    release(&ctx, project, name, false).await
}

async fn release(ctx: &Ctx, project: String, name: String, online: bool) -> Result<Json<Release>> {
    ctx.store.set_online(&project, &name, online).await?;
    tracing::info!(%project, workflow = %name, online, "workflow release state set");
    Ok(Json(Release {
        project,
        name,
        online,
    }))
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct VersionPath {
    /// Project name.
    project: String,
    /// Workflow name.
    name: String,
    /// The version to make the newest again.
    version: i32,
}

/// The version a rollback stored.
#[derive(Serialize, ToSchema)]
pub struct RolledBack {
    /// The new latest version, holding the old version's definition (the latest one
    /// unchanged when it held it already).
    pub version: i32,
}

/// `POST /projects/{project}/workflows/{name}/versions/{version}/rollback`: stores that
/// version's definition again as the newest version; runs started from now on use it.
#[utoipa::path(
    post,
    path = "/projects/{project}/workflows/{name}/versions/{version}/rollback",
    operation_id = "rollbackWorkflow",
    tag = "workflows",
    params(VersionPath),
    responses(
        (status = 200, body = RolledBack),
        (status = 403, description = "The caller lacks the role this needs, in the project or in another project that version starts or reads runs of", body = ErrorBody),
        (status = 404, description = "No such workflow or version", body = ErrorBody),
    )
)]
pub async fn rollback(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((project, name, version)): ApiPath<(String, String, i32)>,
) -> Result<Json<RolledBack>> {
    // The version becomes what runs start from: checked as if it were applied now.
    if let Some(old) = ctx
        .store
        .get_definition(&project, &name, Some(version))
        .await?
    {
        crate::workflows::check_other_projects(&caller, &old.definition)?;
    }
    let new = ctx.store.roll_back(&project, &name, version).await?;
    tracing::info!(%project, workflow = %name, from = version, to = new, "workflow rolled back");
    Ok(Json(RolledBack { version: new }))
}

/// `DELETE /projects/{project}/workflows/{name}`: every version, its disabled schedule and
/// its triggers go; its ended instances stay readable. 409 while a run is active or
/// pending, or its schedule is enabled.
#[utoipa::path(
    delete,
    path = "/projects/{project}/workflows/{name}",
    operation_id = "deleteWorkflow",
    tag = "workflows",
    params(path::Workflow),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such workflow", body = ErrorBody),
        (status = 409, description = "A run is active or pending, or the schedule is enabled", body = ErrorBody),
    )
)]
pub async fn delete_workflow(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    ctx.store.delete_workflow(&project, &name).await?;
    tracing::info!(%project, workflow = %name, "workflow deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /instances/{id}`: an ended instance goes with its task rows and kept logs (the
/// log files on workers go with `--log-retention`). 409 while it runs or an action on it
/// is pending.
#[utoipa::path(
    delete,
    path = "/instances/{id}",
    operation_id = "deleteInstance",
    tag = "instances",
    params(path::Id),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such instance", body = ErrorBody),
        (status = 409, description = "It runs, or an action on it is pending", body = ErrorBody),
    )
)]
pub async fn delete_instance(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
) -> Result<StatusCode> {
    ctx.store.delete_instance(id).await?;
    tracing::info!(instance = id, "instance deleted");
    Ok(StatusCode::NO_CONTENT)
}
