//! API tokens: `GET /tokens`, `POST /tokens`, `DELETE /tokens/{id}`. A user manages their
//! own; a global admin also anyone's (`user`). A token is shown once, when created.

use super::Caller;
use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, Body, check_identifier, path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use shoal_common::access::{new_token, token_hash};
use shoal_common::types::{ms_to_rfc3339, now_ms};
use shoal_store::TokenRow;
use utoipa::{IntoParams, ToSchema};

/// A token as listed: never its value.
#[derive(Serialize, ToSchema)]
pub struct Token {
    pub id: i64,
    pub user: String,
    pub name: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When it stops working; null: never.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// When it was last used (to the minute); null: never.
    #[schema(format = DateTime)]
    pub last_used_at: Option<String>,
    /// When it was revoked; null: it was not.
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
}

fn token_json(t: TokenRow) -> Token {
    Token {
        id: t.id,
        user: t.user,
        name: t.name,
        created_at: ms_to_rfc3339(t.created_at),
        expires_at: t.expires_at.map(ms_to_rfc3339),
        last_used_at: t.last_used_at.map(ms_to_rfc3339),
        revoked_at: t.revoked_at.map(ms_to_rfc3339),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// What it is for, e.g. `ci` (unique per user).
    pub name: String,
    /// Days until it expires; none: it does not.
    #[schema(minimum = 1, maximum = 3650)]
    pub expires_in_days: Option<u32>,
    /// Whose token (global admins only); default: the caller's.
    pub user: Option<String>,
}

/// A new token, with its value: shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedToken {
    pub id: i64,
    pub user: String,
    pub name: String,
    /// Send as `Authorization: Bearer <token>`; not shown again.
    pub token: String,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Another user's tokens (global admins only).
    user: Option<String>,
}

/// Whose tokens a call is about: the caller's, or `user`'s when the caller is a global admin.
fn owner(caller: &Caller, user: Option<String>) -> Result<String> {
    match user {
        Some(user) if user != caller.name => {
            caller.check_admin()?;
            Ok(user)
        }
        _ if caller.user_id.is_none() => Err(Error::BadRequest(format!(
            "'{}' is not a user and has no tokens: name one with `user`",
            caller.name
        ))),
        _ => Ok(caller.name.clone()),
    }
}

/// The caller's tokens (revoked ones too), newest first.
#[utoipa::path(
    get,
    path = "/tokens",
    operation_id = "listTokens",
    tag = "access",
    params(ListQuery),
    responses((status = 200, body = [Token]), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody))
)]
pub async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<Token>>> {
    let user = owner(&caller, q.user)?;
    let tokens = ctx.store.list_tokens(Some(&user)).await?;
    Ok(Json(tokens.into_iter().map(token_json).collect()))
}

/// Creates a token; its value is in this answer only (the server keeps a hash).
#[utoipa::path(
    post,
    path = "/tokens",
    operation_id = "createToken",
    tag = "access",
    request_body = NewToken,
    responses(
        (status = 201, body = CreatedToken),
        (status = 400, body = ErrorBody),
        (status = 403, description = "Another user's token, and the caller is not a global admin", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "The user has a token of that name", body = ErrorBody),
    )
)]
pub async fn create(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<(StatusCode, Json<CreatedToken>)> {
    let new: NewToken = body.json()?;
    check_identifier("token", &new.name)?;
    let expires_at = match new.expires_in_days {
        None => None,
        Some(days @ 1..=3650) => Some(now_ms() + i64::from(days) * 86_400_000),
        Some(days) => {
            return Err(Error::BadRequest(format!(
                "expires_in_days must be 1 to 3650, not {days}"
            )));
        }
    };
    let user = owner(&caller, new.user)?;
    let token = new_token()?;
    let id = ctx
        .store
        .create_token(&user, &new.name, &token_hash(&token), expires_at)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            id,
            user,
            name: new.name,
            token,
            expires_at: expires_at.map(ms_to_rfc3339),
        }),
    ))
}

/// Revokes a token: it is refused from now on. Revoking a revoked token changes nothing.
#[utoipa::path(
    delete,
    path = "/tokens/{id}",
    operation_id = "revokeToken",
    tag = "access",
    params(path::Id),
    responses(
        (status = 200, body = Token),
        (status = 404, description = "No such token of the caller (or, for a global admin, of anyone)", body = ErrorBody),
    )
)]
pub async fn revoke(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Token>> {
    let only = (!caller.admin).then_some(caller.name.as_str());
    match ctx.store.revoke_token(id, only).await? {
        Some(token) => Ok(Json(token_json(token))),
        None => Err(Error::NotFound(format!("no token {id}"))),
    }
}
