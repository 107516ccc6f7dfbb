//! Failure to read a source. What is wrong *with* a checkpoint is a finding in the verdict;
//! these are the cases where there is nothing to plan: [`SourceError`], the Hub client's
//! [`HubError`] it wraps, and the [`ErrorCode`] each maps to.

use std::path::PathBuf;
use std::time::Duration;

use preflight_formats::{config::ConfigError, gguf::GgufError, index::IndexError, safetensors::HeaderError};

use crate::spec::SpecError;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a checkpoint: {reason}")]
    NotACheckpoint { path: PathBuf, reason: String },
    #[error("{file}: {source}")]
    Safetensors { file: String, source: HeaderError },
    #[error("{file}: {source}")]
    Gguf { file: String, source: GgufError },
    #[error("{file}: {source}")]
    Index { file: String, source: IndexError },
    #[error("{file}: {source}")]
    Config { file: String, source: ConfigError },
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error("{file}: header is larger than the {max}-byte cap for one plan")]
    HeaderTooLarge { file: String, max: u64 },
    /// A file of the checkpoint resolves (through a symlink) outside the allowed roots. The
    /// file is never opened, so nothing of it can leak into an error.
    #[error("{path}: resolves outside the allowed local roots; refused")]
    OutsideRoot { path: PathBuf },
    /// A local path that does not exist but reads as a Hub repo id.
    #[error("{path}: no such file or directory; did you mean {suggestion}?")]
    DidYouMean { path: PathBuf, suggestion: String },
    /// A named file the repo does not have, with the files it does have of that kind.
    #[error("{spec}: the repo has no file {file:?} at {revision}{}", list_files(available))]
    FileNotInRepo {
        spec: String,
        file: String,
        revision: String,
        available: Vec<String>,
    },
}

fn list_files(available: &[String]) -> String {
    if available.is_empty() {
        return "; it has no .gguf files".into();
    }
    format!("; its GGUF files: {}", available.join(", "))
}

/// How the CLI and the service classify a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input itself is malformed (bad spec, corrupt header): exit 2, HTTP 400.
    BadInput,
    /// The source could not be read (missing, permissions, network): exit 3.
    Unreadable,
}

/// Every stable error code the CLI's `--json` error document and the service's error body
/// carry — one enum, and [`ErrorCode::as_str`] the one place each becomes its string.
/// Clients match on these strings; a code is never renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidSource,
    NotFound,
    Unreadable,
    NotACheckpoint,
    MalformedCheckpoint,
    HeadersTooLarge,
    LocalSourceRefused,
    FileNotFound,
    Gated,
    Unauthorized,
    RepoNotFound,
    RevisionNotFound,
    UpstreamRateLimited,
    HubBudgetExhausted,
    UpstreamTimeout,
    UpstreamTooLarge,
    TooManyUpstreamRequests,
    UpstreamFailed,
    Offline,
    Misconfigured,
    BadAuthorization,
    BadBody,
    BadRequest,
    BodyTimeout,
    BodyTooLarge,
    Internal,
    InvalidOptions,
    NoRoute,
    MethodNotAllowed,
    NoSources,
    PlanAbandoned,
    PlanTimedOut,
    TooManySources,
    OverCapacity,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidSource => "invalid_source",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Unreadable => "unreadable",
            ErrorCode::NotACheckpoint => "not_a_checkpoint",
            ErrorCode::MalformedCheckpoint => "malformed_checkpoint",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::LocalSourceRefused => "local_source_refused",
            ErrorCode::FileNotFound => "file_not_found",
            ErrorCode::Gated => "gated",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::RepoNotFound => "repo_not_found",
            ErrorCode::RevisionNotFound => "revision_not_found",
            ErrorCode::UpstreamRateLimited => "upstream_rate_limited",
            ErrorCode::HubBudgetExhausted => "hub_budget_exhausted",
            ErrorCode::UpstreamTimeout => "upstream_timeout",
            ErrorCode::UpstreamTooLarge => "upstream_too_large",
            ErrorCode::TooManyUpstreamRequests => "too_many_upstream_requests",
            ErrorCode::UpstreamFailed => "upstream_failed",
            ErrorCode::Offline => "offline",
            ErrorCode::Misconfigured => "misconfigured",
            ErrorCode::BadAuthorization => "bad_authorization",
            ErrorCode::BadBody => "bad_body",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::BodyTimeout => "body_timeout",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::Internal => "internal",
            ErrorCode::InvalidOptions => "invalid_options",
            ErrorCode::NoRoute => "no_route",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::NoSources => "no_sources",
            ErrorCode::PlanAbandoned => "plan_abandoned",
            ErrorCode::PlanTimedOut => "plan_timed_out",
            ErrorCode::TooManySources => "too_many_sources",
            ErrorCode::OverCapacity => "over_capacity",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl SourceError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            SourceError::Io { .. } | SourceError::Hub(_) | SourceError::FileNotInRepo { .. } => ErrorKind::Unreadable,
            _ => ErrorKind::BadInput,
        }
    }

    /// The stable, machine-readable code, the same in the service's error body and in the
    /// CLI's `--json` error document.
    pub fn code(&self) -> ErrorCode {
        match self {
            SourceError::Spec(_) | SourceError::DidYouMean { .. } => ErrorCode::InvalidSource,
            SourceError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => ErrorCode::NotFound,
            SourceError::Io { .. } => ErrorCode::Unreadable,
            SourceError::NotACheckpoint { .. } => ErrorCode::NotACheckpoint,
            SourceError::Safetensors { .. }
            | SourceError::Gguf { .. }
            | SourceError::Index { .. }
            | SourceError::Config { .. } => ErrorCode::MalformedCheckpoint,
            SourceError::HeaderTooLarge { .. } => ErrorCode::HeadersTooLarge,
            SourceError::OutsideRoot { .. } => ErrorCode::LocalSourceRefused,
            SourceError::FileNotInRepo { .. } => ErrorCode::FileNotFound,
            SourceError::Hub(hub) => hub.code(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SourceError {
        let path = path.into();
        move |source| SourceError::Io { path, source }
    }
}

/// What can go wrong talking to the Hub, each case specific enough to act on; raised by
/// `hub`, wrapped by [`SourceError::Hub`]. Kept here, beside the error that wraps it, so the
/// error types depend on no module that returns them. **Invariant:** no message carries the
/// token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HubError {
    #[error(
        "{repo} is a gated repo: it needs a token from an account granted access (the CLI reads HF_TOKEN; the service, `Authorization: Bearer`)"
    )]
    GatedNoToken { repo: String },
    #[error("{repo} is a gated repo and access has not been granted to this token")]
    GatedDenied { repo: String },
    #[error("{repo}: the Hub refused the token (401)")]
    Unauthorized { repo: String },
    #[error("{repo}: repository not found (or private and not visible to this token)")]
    RepoNotFound { repo: String },
    #[error("{repo}: revision {revision:?} not found")]
    RevisionNotFound { repo: String, revision: String },
    #[error("{repo}@{revision}: file {path:?} not found")]
    EntryNotFound {
        repo: String,
        revision: String,
        path: String,
    },
    #[error("{url}: the Hub is rate limiting us (429){}", retry_after.map(|d| format!("; retry after {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { url: String, retry_after: Option<Duration> },
    #[error("{url}: upstream error {status}")]
    Upstream { url: String, status: u16 },
    #[error("{url}: timed out after {}s", timeout.as_secs_f64())]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: connection failed: {detail}")]
    Connect { url: String, detail: String },
    #[error("{url}: body ended after {got} of {expected} bytes")]
    Truncated { url: String, expected: u64, got: u64 },
    #[error("{url}: response larger than the {max}-byte cap")]
    TooLarge { url: String, max: u64 },
    #[error("{url}: {detail}")]
    Protocol { url: String, detail: String },
    #[error("offline (HF_HUB_OFFLINE=1) and {what} is not in the local HF cache")]
    Offline { what: String },
    #[error("the shared Hub budget is spent for now; retry after {}s", retry_after.as_secs().max(1))]
    BudgetExhausted { retry_after: Duration },
    #[error(
        "the plan needs more than {max} requests to the Hub; refused (a repo this large or this split is not planned)"
    )]
    TooManyRequests { max: u64 },
    #[error("{0}")]
    Config(String),
}

impl HubError {
    /// The stable, machine-readable code: the service's `error.code` and the CLI's `--json`
    /// error document say the same thing for the same failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            HubError::GatedNoToken { .. } | HubError::GatedDenied { .. } => ErrorCode::Gated,
            HubError::Unauthorized { .. } => ErrorCode::Unauthorized,
            HubError::RepoNotFound { .. } => ErrorCode::RepoNotFound,
            HubError::RevisionNotFound { .. } => ErrorCode::RevisionNotFound,
            HubError::EntryNotFound { .. } => ErrorCode::FileNotFound,
            HubError::RateLimited { .. } => ErrorCode::UpstreamRateLimited,
            HubError::BudgetExhausted { .. } => ErrorCode::HubBudgetExhausted,
            HubError::Timeout { .. } => ErrorCode::UpstreamTimeout,
            HubError::TooLarge { .. } => ErrorCode::UpstreamTooLarge,
            HubError::TooManyRequests { .. } => ErrorCode::TooManyUpstreamRequests,
            HubError::Upstream { .. }
            | HubError::Connect { .. }
            | HubError::Truncated { .. }
            | HubError::Protocol { .. } => ErrorCode::UpstreamFailed,
            HubError::Offline { .. } => ErrorCode::Offline,
            HubError::Config(_) => ErrorCode::Misconfigured,
        }
    }

    /// The server's own advice on when to retry.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HubError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn transport(url: &reqwest::Url, e: reqwest::Error, timeout: Duration) -> HubError {
        if e.is_timeout() {
            HubError::Timeout {
                url: url.to_string(),
                timeout,
            }
        } else {
            // reqwest's own message names the URL and cause, never a header.
            HubError::Connect {
                url: url.to_string(),
                detail: std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string()),
            }
        }
    }
}
