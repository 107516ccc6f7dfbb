//! Failure to read a source. What is wrong *with* a checkpoint is a finding in the verdict;
//! these are the cases where there is nothing to plan.

use std::path::PathBuf;

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
    Hub(#[from] crate::hub::HubError),
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
