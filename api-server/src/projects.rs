//! Projects and their members: `GET|POST /projects`, `GET|DELETE /projects/{project}`,
//! `GET /projects/{project}/members`, `PUT|DELETE /projects/{project}/members/{user}`.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_name, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::access::Role;
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{MemberRow, ProjectRow, audit_object, audit_project};
use utoipa::{IntoParams, ToSchema};

#[derive(Serialize, ToSchema)]
pub struct Project {
    pub name: String,
    pub description: String,
    /// Who created it (empty when a workflow applied to it did).
    pub created_by: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// How many workflows it has.
    pub workflows: i64,
    /// The caller's role in it (`admin` for a global admin and without auth).
    pub role: Option<Role>,
}

#[derive(Serialize, ToSchema)]
pub struct Member {
    pub user: String,
    pub role: Role,
}

/// A project with its members.
#[derive(Serialize, ToSchema)]
pub struct ProjectDetail {
    #[serde(flatten)]
    pub project: Project,
    pub members: Vec<Member>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    /// Letters and digits of any script, `_`, `-`, `.`; not starting with `.` or `-`; at most 128 characters, stored in Unicode NFC.
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRole {
    pub role: Role,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct MemberPath {
    /// Project name.
    project: String,
    /// User name.
    user: String,
}

fn project_json(p: ProjectRow, caller: &Caller) -> Project {
    Project {
        role: caller.role_in(&p.name),
        name: p.name,
        description: p.description,
        created_by: p.created_by,
        created_at: ms_to_rfc3339(p.created_at),
        workflows: p.workflows,
    }
}

fn member_json(m: MemberRow) -> Member {
    Member {
        user: m.user,
        role: m.role,
    }
}

/// The projects the caller may see, by name.
#[utoipa::path(
    get,
    path = "/projects",
    operation_id = "listProjects",
    tag = "projects",
    responses((status = 200, description = "By name", body = [Project]))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<Project>>> {
    let mut projects: Vec<Project> = ctx
        .store
        .list_projects()
        .await?
        .into_iter()
        .filter(|p| caller.role_in(&p.name).is_some())
        .map(|p| project_json(p, &caller))
        .collect();
    // By name in Rust's order, whatever the database's collation.
    projects.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(projects))
}

/// Creates a project; the caller becomes its admin.
#[utoipa::path(
    post,
    path = "/projects",
    operation_id = "createProject",
    tag = "projects",
    request_body = NewProject,
    responses(
        (status = 201, body = Project),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
pub async fn create(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<(StatusCode, Json<Project>)> {
    let mut new: NewProject = body.json()?;
    new.name = shoal_common::definition::normalize(&new.name);
    check_name("project", &new.name)?;
    audit_project(&new.name);
    let admin = caller.user_id.map(|_| caller.name.as_str());
    let project = ctx
        .store
        .create_project(&new.name, &new.description, &caller.name, admin)
        .await?;
    let mut caller = caller;
    caller.grant(&project.name, Role::Admin);
    Ok((StatusCode::CREATED, Json(project_json(project, &caller))))
}

/// A project with its members.
#[utoipa::path(
    get,
    path = "/projects/{project}",
    operation_id = "getProject",
    tag = "projects",
    params(path::Project),
    responses((status = 200, body = ProjectDetail), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn get(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ProjectDetail>> {
    let project = existing(&ctx, &name).await?;
    let members = ctx.store.list_members(&name).await?;
    Ok(Json(ProjectDetail {
        project: project_json(project, &caller),
        members: members.into_iter().map(member_json).collect(),
    }))
}

/// The 404 of a project that does not exist.
pub(crate) fn no_such_project(name: &str) -> Error {
    Error::NotFound(format!("no project named '{name}'"))
}

pub(crate) async fn existing(ctx: &Ctx, name: &str) -> Result<ProjectRow> {
    ctx.store
        .get_project(name)
        .await?
        .ok_or_else(|| no_such_project(name))
}

/// Deletes a project that has no workflows, with the runs it had and their logs, its
/// secrets and members: a project made later under the same name starts empty.
#[utoipa::path(
    delete,
    path = "/projects/{project}",
    operation_id = "deleteProject",
    tag = "projects",
    params(path::Project),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "It still has workflows, a run that has not ended or is about to start, or a running backfill", body = ErrorBody),
    )
)]
pub async fn delete(State(ctx): State<Ctx>, ApiPath(name): ApiPath<String>) -> Result<StatusCode> {
    if ctx.store.delete_project(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_such_project(&name))
    }
}

/// The members of a project and their roles, by user name.
#[utoipa::path(
    get,
    path = "/projects/{project}/members",
    operation_id = "listMembers",
    tag = "projects",
    params(path::Project),
    responses((status = 200, body = [Member]), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn members(
    State(ctx): State<Ctx>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Vec<Member>>> {
    let members = ctx.store.list_members(&name).await?;
    Ok(Json(members.into_iter().map(member_json).collect()))
}

/// Gives a user a role in the project (replacing the one they had).
#[utoipa::path(
    put,
    path = "/projects/{project}/members/{user}",
    operation_id = "setMember",
    tag = "projects",
    params(MemberPath),
    request_body = NewRole,
    responses(
        (status = 200, body = Member),
        (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such project or user", body = ErrorBody),
    )
)]
pub async fn set_member(
    State(ctx): State<Ctx>,
    ApiPath((project, user)): ApiPath<(String, String)>,
    body: Body,
) -> Result<Json<Member>> {
    let NewRole { role } = body.json()?;
    audit_object(&format!("member '{user}' as {role}"));
    ctx.store.set_member(&project, &user, role).await?;
    Ok(Json(Member { user, role }))
}

/// Takes a user out of the project.
#[utoipa::path(
    delete,
    path = "/projects/{project}/members/{user}",
    operation_id = "removeMember",
    tag = "projects",
    params(MemberPath),
    responses(
        (status = 204, description = "Removed"),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such member", body = ErrorBody),
    )
)]
pub async fn remove_member(
    State(ctx): State<Ctx>,
    ApiPath((project, user)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    audit_object(&format!("member '{user}'"));
    if ctx.store.remove_member(&project, &user).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!(
            "user '{user}' is not a member of project '{project}'"
        )))
    }
}
