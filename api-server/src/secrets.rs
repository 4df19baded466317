//! A project's secrets: `GET /projects/{project}/secrets`, `PUT|DELETE
//! /projects/{project}/secrets/{name}`. Values go in, never out: the api-server seals them
//! with its key, and only a master opens them, to expand `${secret.NAME}` in a task.

use crate::Ctx;
use crate::access::Caller;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body, check_identifier, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::types::ms_to_rfc3339;
use shoal_store::{SecretRow, audit_object};
use utoipa::{IntoParams, ToSchema};

/// Longest value a secret may have.
const MAX_VALUE_BYTES: usize = 64 * 1024;

/// A secret as listed: its name, never its value.
#[derive(Serialize, ToSchema)]
pub struct Secret {
    /// Referenced as `${secret.NAME}` in a task's text, or as a sql task's `datasource`.
    pub name: String,
    pub description: String,
    /// Who set its value last.
    pub updated_by: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

fn secret_json(s: SecretRow) -> Secret {
    Secret {
        name: s.name,
        description: s.description,
        updated_by: s.updated_by,
        created_at: ms_to_rfc3339(s.created_at),
        updated_at: ms_to_rfc3339(s.updated_at),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    /// The value (at most 64 KiB); stored encrypted, never shown again. Line breaks at
    /// its end are dropped (a value read from a file ends in one it does not mean).
    pub value: String,
    #[serde(default)]
    pub description: String,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct SecretPath {
    /// Project name.
    project: String,
    /// Secret name.
    name: String,
}

/// The secrets of a project, by name, without their values.
#[utoipa::path(
    get,
    path = "/projects/{project}/secrets",
    operation_id = "listSecrets",
    tag = "projects",
    params(path::Project),
    responses((status = 200, body = [Secret]), (status = 403, body = ErrorBody))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    ApiPath(project): ApiPath<String>,
) -> Result<Json<Vec<Secret>>> {
    let secrets = ctx.store.list_secrets(&project).await?;
    Ok(Json(secrets.into_iter().map(secret_json).collect()))
}

/// Sets a secret's value (creating the secret, or replacing its value).
#[utoipa::path(
    put,
    path = "/projects/{project}/secrets/{name}",
    operation_id = "setSecret",
    tag = "projects",
    params(SecretPath),
    request_body = SecretValue,
    responses(
        (status = 201, description = "Created", body = Secret),
        (status = 200, description = "Its value replaced", body = Secret),
        (status = 400, description = "A bad name or value", body = ErrorBody),
        (status = 404, description = "No such project", body = ErrorBody),
        (status = 503, description = "The api-server has no secret key", body = ErrorBody),
    )
)]
pub async fn set(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath((project, name)): ApiPath<(String, String)>,
    body: Body,
) -> Result<(StatusCode, Json<Secret>)> {
    audit_object(&secret_object(&name));
    check_identifier("secret", &name)?;
    let new: SecretValue = body.json()?;
    // Workers mask the exact value in what tasks print: one kept with its line break would
    // show whenever it is printed without it, as it mostly is.
    let value = new.value.trim_end_matches(['\n', '\r']);
    if value.is_empty() || value.len() > MAX_VALUE_BYTES {
        return Err(Error::BadRequest(format!(
            "a secret's value must be 1 to {MAX_VALUE_BYTES} bytes (line breaks at its end \
             dropped), not {}",
            value.len()
        )));
    }
    let Some(key) = &ctx.secret_key else {
        return Err(Error::Unavailable(
            "this api-server has no secret key to encrypt secrets with: start it with SHOAL_SECRET_KEY (64 hex digits, e.g. `openssl rand -hex 32`, the same on every master)".into(),
        ));
    };
    let sealed = key
        .seal(&format!("{project}/{name}"), value)
        .map_err(|e| Error::Unavailable(format!("cannot encrypt the secret: {e}")))?;
    let created = ctx
        .store
        .put_secret(&project, &name, &sealed, &new.description, &caller.name)
        .await?;
    let row = ctx
        .store
        .list_secrets(&project)
        .await?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::NotFound(format!("secret '{name}'")))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(secret_json(row))))
}

/// Deletes a secret; tasks that name it fail from then on.
#[utoipa::path(
    delete,
    path = "/projects/{project}/secrets/{name}",
    operation_id = "deleteSecret",
    tag = "projects",
    params(SecretPath),
    responses((status = 204, description = "Deleted"), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
pub async fn delete(
    State(ctx): State<Ctx>,
    ApiPath((project, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    audit_object(&secret_object(&name));
    if ctx.store.delete_secret(&project, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!(
            "project '{project}' has no secret '{name}'"
        )))
    }
}

/// A secret as an audit row names it: by its name, never its value.
fn secret_object(name: &str) -> String {
    format!("secret '{name}'")
}
