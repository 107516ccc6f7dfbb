//! Every refusal either origin makes, and the one place that renders it the way the Hub
//! does: status, `X-Error-Code`, `X-Error-Message`, and a `{"error": …}` body.
//!
//! The statuses follow what `huggingface_hub.utils.hf_raise_for_status` expects from the
//! real Hub: a missing or hidden repo is 401 to an anonymous caller and 404 to an
//! authenticated one; a gated repo is 401 anonymous and 403 for a token without access.

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use axum::response::IntoResponse;

pub(crate) enum HubError {
    /// Missing, or private and the caller has no access: the Hub does not tell them apart.
    RepoNotFound {
        authenticated: bool,
    },
    GatedAnonymous {
        repo: String,
    },
    GatedNotGranted {
        repo: String,
        endpoint: String,
    },
    RevisionNotFound {
        rev: String,
    },
    /// Carries the commit, as the Hub does, so clients can cache the absence.
    EntryNotFound {
        commit: String,
    },
    /// An `Authorization` header that is not `Bearer <token>`.
    InvalidCredentials,
    BadRequest(String),
    NoRoute,
    MethodNotAllowed,
    RangeNotSatisfiable {
        total: u64,
    },
    RateLimited,
    Injected(StatusCode),
    /// The CDN's answer to a URL whose signature it did not issue.
    BadSignature,
    Internal(String),
}

impl HubError {
    pub fn into_response(self) -> Response<Body> {
        let (status, code, message) = match self {
            HubError::RepoNotFound { authenticated } => (
                if authenticated {
                    StatusCode::NOT_FOUND
                } else {
                    StatusCode::UNAUTHORIZED
                },
                Some("RepoNotFound"),
                "Repository not found".to_owned(),
            ),
            HubError::GatedAnonymous { repo } => (
                StatusCode::UNAUTHORIZED,
                Some("GatedRepo"),
                format!(
                    "Access to model {repo} is restricted. You must have access to it and be \
                     authenticated to access it. Please log in."
                ),
            ),
            HubError::GatedNotGranted { repo, endpoint } => (
                StatusCode::FORBIDDEN,
                Some("GatedRepo"),
                format!(
                    "Access to model {repo} is restricted and you are not in the authorized \
                     list. Visit {endpoint}/{repo} to ask for access."
                ),
            ),
            HubError::RevisionNotFound { rev } => (
                StatusCode::NOT_FOUND,
                Some("RevisionNotFound"),
                format!("Invalid rev id: {rev}"),
            ),
            HubError::EntryNotFound { ref commit } => {
                let mut resp = respond(StatusCode::NOT_FOUND, Some("EntryNotFound"), "Entry not found");
                if let Ok(v) = HeaderValue::from_str(commit) {
                    resp.headers_mut().insert("x-repo-commit", v);
                }
                return resp;
            }
            HubError::InvalidCredentials => (
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header".to_owned(),
            ),
            HubError::BadRequest(message) => (StatusCode::BAD_REQUEST, None, message),
            HubError::NoRoute => (StatusCode::NOT_FOUND, None, "Not Found".to_owned()),
            HubError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, None, "Method Not Allowed".to_owned()),
            HubError::RangeNotSatisfiable { total } => {
                let mut resp = respond(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    None,
                    "Requested Range Not Satisfiable",
                );
                resp.headers_mut().insert(
                    header::CONTENT_RANGE,
                    HeaderValue::from_str(&format!("bytes */{total}")).unwrap_or(HeaderValue::from_static("bytes */0")),
                );
                return resp;
            }
            HubError::RateLimited => (
                StatusCode::TOO_MANY_REQUESTS,
                None,
                "Too Many Requests (fault switch)".to_owned(),
            ),
            HubError::Injected(status) => (
                status,
                None,
                format!("{} (fault switch)", status.canonical_reason().unwrap_or("Error")),
            ),
            HubError::BadSignature => (
                StatusCode::FORBIDDEN,
                None,
                "Access Denied: bad or missing signature".to_owned(),
            ),
            HubError::Internal(message) => (StatusCode::INTERNAL_SERVER_ERROR, None, message),
        };
        respond(status, code, &message)
    }
}

fn respond(status: StatusCode, code: Option<&'static str>, message: &str) -> Response<Body> {
    let mut resp = (status, Json(serde_json::json!({ "error": message }))).into_response();
    let headers = resp.headers_mut();
    if let Some(code) = code {
        headers.insert("x-error-code", HeaderValue::from_static(code));
    }
    // Request data can end up in the message; an unsendable one is left out, not sent raw.
    if let Ok(v) = HeaderValue::from_str(message) {
        headers.insert("x-error-message", v);
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"Authentication required\", charset=\"UTF-8\""),
        );
    }
    resp
}

impl From<std::io::Error> for HubError {
    fn from(e: std::io::Error) -> HubError {
        HubError::Internal(format!("reading the fixture failed: {e}"))
    }
}
