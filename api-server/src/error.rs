//! The api-server's error type and the one place that turns it into an HTTP answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shoal_common::definition::DefinitionError;

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
    #[error("method {0} is not allowed on this path")]
    MethodNotAllowed(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The request clashes with the state of what it acts on (e.g. pausing a finished
    /// instance, or an action on it already pending).
    #[error("{0}")]
    Conflict(String),
    /// The component that has to act is out of reach for now (e.g. the master driving an
    /// instance); trying again later may succeed.
    #[error("{0}")]
    Unavailable(String),
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

const INTERNAL: &str = "internal error, see the api-server log";

impl Error {
    pub fn status(&self) -> StatusCode {
        use shoal_common::Error as S;
        match self {
            Error::Definition(_) | Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Conflict(_) | Error::Store(S::Conflict(_)) => StatusCode::CONFLICT,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Peer { .. } => StatusCode::BAD_GATEWAY,
            Error::Store(S::Definition(_) | S::Invalid(_)) => StatusCode::BAD_REQUEST,
            Error::Store(S::NotFound(_)) => StatusCode::NOT_FOUND,
            Error::Store(S::Registry(_)) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Store(S::Database(_) | S::Migrate(_) | S::Corrupt(_)) | Error::Io(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self, "request failed");
            INTERNAL.to_string()
        } else {
            if matches!(
                status,
                StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE
            ) {
                tracing::warn!(error = %self, "request to a peer failed");
            }
            self.to_string()
        };
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
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
    fn a_pending_action_is_a_conflict() {
        let err = Error::Store(shoal_common::Error::Conflict(
            "an action on workflow instance 7 is already pending".into(),
        ));
        assert_eq!(err.status(), StatusCode::CONFLICT);
        assert!(body(err.into_response()).contains("already pending"));
    }
}
