//! Extractors that report their rejections as the crate's JSON errors instead of axum's
//! plain-text ones.

use crate::Ctx;
use crate::error::Error;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// 400 unless `name` is a valid name of a `what` (a project): 1-128 letters or digits of
/// any script, `_`, `-` or `.`, not starting with `.` or `-`, in NFC.
pub fn check_name(what: &str, name: &str) -> Result<(), Error> {
    match shoal_common::definition::name_problem(name) {
        None => Ok(()),
        Some(problem) => Err(Error::BadRequest(format!(
            "invalid {what} name '{name}': {problem}"
        ))),
    }
}

/// 400 unless `name` is a valid identifier of a `what` (a user, token, secret, event,
/// queue or worker): a name of ASCII letters, digits, `_`, `-` or `.` only.
pub fn check_identifier(what: &str, name: &str) -> Result<(), Error> {
    check_name(what, name)?;
    if name.is_ascii() {
        return Ok(());
    }
    Err(Error::BadRequest(format!(
        "invalid {what} name '{name}': use ASCII letters, digits, '_', '-' or '.'"
    )))
}

pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(ApiPath(v)),
            Err(e) => Err(Error::BadRequest(e.body_text())),
        }
    }
}

pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(ApiQuery(v)),
            Err(e) => Err(Error::BadRequest(e.body_text())),
        }
    }
}

/// The raw request body, any content type, at most [`crate::Limits::body_bytes`].
pub struct Body(pub Bytes);

impl FromRequest<Ctx> for Body {
    type Rejection = Error;

    async fn from_request(req: Request, ctx: &Ctx) -> Result<Self, Error> {
        match Bytes::from_request(req, ctx).await {
            Ok(b) => Ok(Body(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(Error::PayloadTooLarge {
                limit: ctx.limits.body_bytes,
            }),
            Err(e) => Err(Error::BadRequest(e.body_text())),
        }
    }
}

impl Body {
    pub fn text(&self) -> Result<&str, Error> {
        std::str::from_utf8(&self.0)
            .map_err(|e| Error::BadRequest(format!("request body is not valid UTF-8: {e}")))
    }

    /// Parses a JSON body; an empty body is `T::default()`.
    pub fn json_or_default<T: DeserializeOwned + Default>(&self) -> Result<T, Error> {
        if self.0.iter().all(u8::is_ascii_whitespace) {
            return Ok(T::default());
        }
        self.json()
    }

    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.0)
            .map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))
    }
}

/// Path parameters, described once for the OpenAPI document (`params(...)` of the
/// handlers). The handlers read them with [`ApiPath`].
pub mod path {
    #![allow(dead_code)]
    use utoipa::IntoParams;

    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct Project {
        /// Project name (`default` unless a definition names another).
        project: String,
    }

    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct Workflow {
        /// Project name.
        project: String,
        /// Workflow name.
        name: String,
    }

    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct Schedule {
        /// Project name.
        project: String,
        /// Workflow name.
        name: String,
        /// Schedule id.
        id: i64,
    }

    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct Id {
        /// Id of the object the path names.
        id: i64,
    }

    #[derive(IntoParams)]
    #[into_params(parameter_in = Path)]
    pub struct Name {
        /// Name of the object the path names.
        name: String,
    }
}
