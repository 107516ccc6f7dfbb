//! The one place errors become HTTP: every failure is `{"error": {"code", "message"}}` with
//! an honest status. **Invariant:** no response carries a token.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use preflight_source::SourceError;
pub use preflight_source::error::ErrorCode;
use preflight_source::hub::HubError;
use serde_json::json;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable.
    pub code: ErrorCode,
    pub message: String,
    /// The request field at fault (an option's name), so a form can say it beside the field.
    pub field: Option<String>,
    /// For 429: when to come back.
    pub retry_after: Option<Duration>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    /// An option value the planner cannot take, named by its field.
    pub fn invalid_option(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::bad_request(ErrorCode::InvalidOptions, message)
        }
    }

    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn over_capacity(retry_after: Duration) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::OverCapacity,
                "every planning slot is busy; retry shortly",
            )
        }
    }
}

impl From<SourceError> for ApiError {
    fn from(e: SourceError) -> Self {
        let status = match &e {
            SourceError::Hub(hub) => return hub.clone().into(),
            SourceError::Spec(_) | SourceError::DidYouMean { .. } => StatusCode::BAD_REQUEST,
            SourceError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => StatusCode::NOT_FOUND,
            SourceError::Io { .. } | SourceError::OutsideRoot { .. } => StatusCode::FORBIDDEN,
            SourceError::FileNotInRepo { .. } => StatusCode::NOT_FOUND,
            SourceError::NotACheckpoint { .. }
            | SourceError::Safetensors { .. }
            | SourceError::Gguf { .. }
            | SourceError::Index { .. }
            | SourceError::Config { .. } => StatusCode::BAD_REQUEST,
            SourceError::HeaderTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        };
        ApiError::new(status, e.code(), e.to_string())
    }
}

/// The code is the source crate's ([`HubError::code`]), shared with the CLI's `--json` errors;
/// the status is this crate's.
impl From<HubError> for ApiError {
    fn from(e: HubError) -> Self {
        let message = e.to_string();
        let status = match &e {
            HubError::GatedNoToken { .. } | HubError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            HubError::GatedDenied { .. } => StatusCode::FORBIDDEN,
            HubError::RepoNotFound { .. } | HubError::RevisionNotFound { .. } | HubError::EntryNotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            HubError::RateLimited { retry_after, .. } => {
                return ApiError {
                    retry_after: Some(retry_after.unwrap_or(Duration::from_secs(60))),
                    ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.code(), message)
                };
            }
            HubError::BudgetExhausted { retry_after } => {
                return ApiError {
                    retry_after: Some(*retry_after),
                    ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.code(), message)
                };
            }
            HubError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            HubError::TooLarge { .. } | HubError::TooManyRequests { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            HubError::Upstream { .. }
            | HubError::Connect { .. }
            | HubError::Truncated { .. }
            | HubError::Protocol { .. }
            | HubError::Offline { .. } => StatusCode::BAD_GATEWAY,
            HubError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.code(), message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match &self.field {
            Some(field) => json!({ "error": { "code": self.code.as_str(), "message": self.message, "field": field } }),
            None => json!({ "error": { "code": self.code.as_str(), "message": self.message } }),
        };
        let body = Json(body);
        let mut response = (self.status, body).into_response();
        if let Some(after) = self.retry_after {
            let secs = after.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&secs) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}
