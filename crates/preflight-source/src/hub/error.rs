//! What can go wrong talking to the Hub, each case specific enough to act on.
//! **Invariant:** no message carries the token.

use std::time::Duration;

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
    pub fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
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

    /// Worth another try: the server or the path to it may recover.
    pub fn is_transient(&self) -> bool {
        match self {
            HubError::RateLimited { retry_after, .. } => retry_after.is_none_or(|d| d <= super::client::MAX_RETRY_WAIT),
            HubError::Upstream { .. }
            | HubError::Timeout { .. }
            | HubError::Connect { .. }
            | HubError::Truncated { .. } => true,
            _ => false,
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
