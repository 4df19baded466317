//! Users: `GET /users`, `POST /users`, `POST /users/{name}/disable|enable` (global admins).

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_identifier, path};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{UserRow, audit_object};
use utoipa::ToSchema;

#[derive(Serialize, ToSchema)]
pub struct User {
    pub name: String,
    /// A global admin may do anything, in every project.
    pub admin: bool,
    /// A disabled user's tokens are refused.
    pub disabled: bool,
    #[schema(format = DateTime)]
    pub created_at: String,
}

pub(crate) fn user_json(u: UserRow) -> User {
    User {
        name: u.name,
        admin: u.admin,
        disabled: u.disabled,
        created_at: ms_to_rfc3339(u.created_at),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    /// ASCII letters, digits, `_`, `-`, `.`; not starting with `.` or `-`.
    pub name: String,
    #[serde(default)]
    pub admin: bool,
}

/// Every user, by name.
#[utoipa::path(
    get,
    path = "/users",
    operation_id = "listUsers",
    tag = "access",
    responses((status = 200, body = [User]), (status = 403, body = ErrorBody))
)]
pub async fn list(State(ctx): State<Ctx>) -> Result<Json<Vec<User>>> {
    let users = ctx.store.list_users().await?;
    Ok(Json(users.into_iter().map(user_json).collect()))
}

/// Creates a user (without tokens: `POST /tokens` with `user` makes one).
#[utoipa::path(
    post,
    path = "/users",
    operation_id = "createUser",
    tag = "access",
    request_body = NewUser,
    responses(
        (status = 201, body = User),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
    )
)]
pub async fn create(State(ctx): State<Ctx>, body: Body) -> Result<(StatusCode, Json<User>)> {
    let new: NewUser = body.json()?;
    audit_object(&user_object(&new.name));
    check_identifier("user", &new.name)?;
    let user = ctx.store.create_user(&new.name, new.admin).await?;
    Ok((StatusCode::CREATED, Json(user_json(user))))
}

fn user_object(name: &str) -> String {
    format!("user '{name}'")
}

async fn set_disabled(ctx: &Ctx, name: &str, disabled: bool) -> Result<Json<User>> {
    audit_object(&user_object(name));
    match ctx.store.set_user_disabled(name, disabled).await? {
        Some(user) => Ok(Json(user_json(user))),
        None => Err(Error::NotFound(format!("no user named '{name}'"))),
    }
}

/// Disables a user: their tokens are refused until they are enabled again.
#[utoipa::path(
    post,
    path = "/users/{name}/disable",
    operation_id = "disableUser",
    tag = "access",
    params(path::Name),
    responses((status = 200, body = User), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn disable(State(ctx): State<Ctx>, ApiPath(name): ApiPath<String>) -> Result<Json<User>> {
    set_disabled(&ctx, &name, true).await
}

/// Enables a disabled user again.
#[utoipa::path(
    post,
    path = "/users/{name}/enable",
    operation_id = "enableUser",
    tag = "access",
    params(path::Name),
    responses((status = 200, body = User), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn enable(State(ctx): State<Ctx>, ApiPath(name): ApiPath<String>) -> Result<Json<User>> {
    set_disabled(&ctx, &name, false).await
}
