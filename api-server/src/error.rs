//! The api-server's error type and the one place that turns it into an HTTP answer.

use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shoal_common::definition::DefinitionError;
use utoipa::ToSchema;

/// Everything a request can fail with. Each variant's message is what the client reads,
/// except for [`Error::Internal`], whose detail goes to the log only.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A workflow definition was refused; the message names the offending part.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// The caller is known but lacks the role; the message names it.
    #[error("{0}")]
    Forbidden(String),
    #[error("method {0} is not allowed on this path")]
    MethodNotAllowed(String),
    #[error(
        "request body is larger than the limit of {limit} bytes (the server's --max-body-bytes)"
    )]
    PayloadTooLarge { limit: usize },
    /// The body's content type is not one this request may have; the message says which.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The request clashes with the state of what it acts on (e.g. pausing a finished
    /// instance, or an action on it already pending).
    #[error("{0}")]
    Conflict(String),
    /// The component that has to act is out of reach for now (e.g. the master driving an
    /// instance); trying again later may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// A limit on how often something may be asked is used up; `retry_after`: seconds
    /// until it is taken again (the `Retry-After` header).
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    /// A worker or master was asked and failed (unreachable, timed out or answered an
    /// error); `action` says what was asked of whom.
    #[error("cannot {action}: {reason}")]
    Peer { action: String, reason: String },
    /// A store failure. Input errors the store reports are passed through; the others
    /// (database, corrupt rows) are logged and answered with a generic message.
    #[error(transparent)]
    Store(#[from] shoal_common::Error),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// For a definition that is not valid YAML or JSON: the line of the error (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub line: Option<usize>,
    /// For a definition that is not valid YAML or JSON: the column of the error (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub column: Option<usize>,
    /// For a refused definition: the task the error is about, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub task: Option<String>,
    /// For a webhook trigger's call that timed out (504): the run, which goes on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub workflow_instance_id: Option<i64>,
}

const INTERNAL: &str = "internal error, see the api-server log";

impl Error {
    pub fn status(&self) -> StatusCode {
        use shoal_common::Error as S;
        match self {
            Error::Definition(_) | Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Conflict(_) | Error::Store(S::Conflict(_)) => StatusCode::CONFLICT,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Peer { .. } => StatusCode::BAD_GATEWAY,
            Error::Store(S::Definition(_) | S::Invalid(_)) => StatusCode::BAD_REQUEST,
            Error::Store(S::NotFound(_)) => StatusCode::NOT_FOUND,
            // The connection broke during COMMIT: the caller checks and tries again.
            Error::Store(S::Registry(_) | S::CommitUnknown(_)) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Store(S::Database(_) | S::Migrate(_) | S::Corrupt(_)) | Error::Io(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// What the client is told (logging what it is not: an internal error's detail).
    pub fn client_message(&self) -> String {
        let status = self.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self, "request failed");
            return INTERNAL.to_string();
        }
        if matches!(
            status,
            StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE
        ) {
            tracing::warn!(error = %self, "request to a peer failed");
        }
        self.to_string()
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = self.client_message();
        let retry_after = match &self {
            Error::TooManyRequests { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let (location, task) = match &self {
            Error::Definition(d) => (d.location(), d.task().map(str::to_string)),
            _ => (None, None),
        };
        let body = ErrorBody {
            error: message,
            line: location.map(|(line, _)| line),
            column: location.map(|(_, column)| column),
            task,
            workflow_instance_id: None,
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(RETRY_AFTER, seconds.into());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(resp: Response) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = rt
            .block_on(axum::body::to_bytes(resp.into_body(), usize::MAX))
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn store_internals_are_not_shown_to_clients() {
        let err = Error::Store(shoal_common::Error::Corrupt("row 7 of secret_table".into()));
        assert_eq!(err.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body(err.into_response()),
            format!("{{\"error\":\"{INTERNAL}\"}}")
        );
    }

    #[test]
    fn input_errors_keep_their_message() {
        let err = Error::Store(shoal_common::Error::Invalid(
            "limit must be positive".into(),
        ));
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert!(body(err.into_response()).contains("limit must be positive"));
    }

    #[test]
    fn definition_errors_locate_themselves() {
        let err = Error::from(
            shoal_common::definition::WorkflowDef::parse("name: w\ntasks: [\n  {name: a\n")
                .unwrap_err(),
        );
        let text = body(err.into_response());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["line"].as_u64().unwrap() >= 3, "{v}");
        assert!(v["column"].is_u64() && v["task"].is_null(), "{v}");

        let err = Error::from(
            shoal_common::definition::WorkflowDef::parse(
                "name: w\ntasks:\n- {name: a, type: noop, depends_on: [zz]}\n",
            )
            .unwrap_err(),
        );
        let v: serde_json::Value = serde_json::from_str(&body(err.into_response())).unwrap();
        assert_eq!(v["task"], "a", "{v}");
        assert!(v.get("line").is_none(), "{v}");
    }

    #[test]
    fn a_used_up_limit_says_when_to_try_again() {
        let err = Error::TooManyRequests {
            message: "trigger 'p/w/t' takes 1/s calls".into(),
            retry_after: 1,
        };
        let resp = err.into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[RETRY_AFTER], "1");
        assert!(body(resp).contains("takes 1/s calls"));
    }

    #[test]
    fn a_pending_action_is_a_conflict() {
        let err = Error::Store(shoal_common::Error::Conflict(
            "an action on workflow instance 7 is already pending".into(),
        ));
        assert_eq!(err.status(), StatusCode::CONFLICT);
        assert!(body(err.into_response()).contains("already pending"));
    }
}
