//! Bearer-token auth: when a token is configured, every request under `/api/v1` must carry
//! it, reads included (task logs print whatever tasks print), except the liveness probe,
//! the OpenAPI document and the session check a sign-in page asks first.

use crate::Ctx;
use crate::error::{Error, ErrorBody, Result};
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shoal_common::cluster_secret::constant_time_eq;
use std::sync::Arc;
use utoipa::ToSchema;

pub async fn require_token(
    State(token): State<Option<Arc<str>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return next.run(req).await;
    };
    // The path within `/api/v1` (the nest strips its prefix).
    if OPEN.contains(&req.uri().path()) || carries(req.headers(), &token) {
        next.run(req).await
    } else {
        Error::Unauthorized.into_response()
    }
}

/// What answers without a token: liveness, the API's description, and `GET /session`,
/// which checks a token itself.
pub(crate) const OPEN: [&str; 3] = ["/health", "/openapi.json", "/session"];

/// Whether `headers` carry `Authorization: Bearer <token>`.
pub fn carries(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .is_some_and(|p| constant_time_eq(p.as_bytes(), token.as_bytes()))
}

/// `GET /session`'s answer.
#[derive(Serialize, ToSchema)]
pub struct Session {
    /// Whether the server requires a token.
    auth: bool,
}

/// Checks a token: 200 when the server has none, or when the request carries the right
/// one; 401 otherwise. A sign-in page asks this before it keeps a token.
#[utoipa::path(
    get,
    path = "/session",
    operation_id = "getSession",
    tag = "meta",
    security((), ("bearer" = [])),
    responses(
        (status = 200, body = Session),
        (status = 401, description = "The server has a token and the request does not carry it", body = ErrorBody),
    )
)]
pub(crate) async fn session(State(ctx): State<Ctx>, headers: HeaderMap) -> Result<Json<Session>> {
    match ctx.token {
        None => Ok(Json(Session { auth: false })),
        Some(token) if carries(&headers, &token) => Ok(Json(Session { auth: true })),
        Some(_) => Err(Error::Unauthorized),
    }
}
