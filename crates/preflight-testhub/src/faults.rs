//! Fault switches: misbehaviour a test turns on to see how a client copes.
//!
//! A fault is armed for the next `times` matching requests (or until cleared), optionally
//! only on one origin or on paths containing a substring, so a test can fail one shard.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which listener a request reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// The Hub itself: `/resolve`, `/raw`, `/api` (the `HF_ENDPOINT`).
    Hub,
    /// The second origin large files are redirected to, standing in for the Hub's CDN.
    Cdn,
}

/// One fault switch. As JSON (the admin endpoint's form) the kind's fields sit beside the
/// scope: `{"kind": "status", "status": 503, "times": 2, "path_contains": "model-00002"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    #[serde(flatten)]
    pub kind: FaultKind,
    /// How many matching requests it applies to; `None` keeps it armed until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// Only requests whose path (as received, percent-encoded, without the query) contains
    /// this: the query is left out so a CDN signature can't match by chance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_contains: Option<String>,
    /// Only requests to this origin; both when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// Wait this long before answering.
    Latency { ms: u64 },
    /// 429 with `Retry-After: retry_after` (and the Hub's `RateLimit` headers on the Hub origin).
    RateLimit { retry_after: u64 },
    /// Answer with this error status (500, 502, 503, …) instead of the resource.
    Status { status: u16 },
    /// Send half the body promised by `Content-Length`, then drop the connection. Counts only
    /// successful responses that have a body (a 302 or an error passes it by).
    Truncate,
    /// Answer a ranged request with 200 and the whole body. Counts only requests with `Range`.
    IgnoreRange,
    /// Answer 206 with a `Content-Range` whose start is one past the one requested (the body
    /// is the requested bytes). Counts only 206 responses.
    LieContentRange,
}

impl FaultKind {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            FaultKind::Latency { .. } => "latency",
            FaultKind::RateLimit { .. } => "rate_limit",
            FaultKind::Status { .. } => "status",
            FaultKind::Truncate => "truncate",
            FaultKind::IgnoreRange => "ignore_range",
            FaultKind::LieContentRange => "lie_content_range",
        }
    }
}

impl Fault {
    fn new(kind: FaultKind) -> Fault {
        Fault {
            kind,
            times: None,
            path_contains: None,
            origin: None,
        }
    }

    pub fn latency(delay: Duration) -> Fault {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        Fault::new(FaultKind::Latency { ms })
    }

    pub fn rate_limit(retry_after_secs: u64) -> Fault {
        Fault::new(FaultKind::RateLimit {
            retry_after: retry_after_secs,
        })
    }

    /// # Panics
    /// If `status` is not a 4xx or 5xx code: a fault that "fails" with 200 is a test bug.
    pub fn status(status: u16) -> Fault {
        assert!(
            (400..600).contains(&status),
            "a status fault needs a 4xx/5xx code, got {status}"
        );
        Fault::new(FaultKind::Status { status })
    }

    pub fn truncate() -> Fault {
        Fault::new(FaultKind::Truncate)
    }

    pub fn ignore_range() -> Fault {
        Fault::new(FaultKind::IgnoreRange)
    }

    pub fn lie_content_range() -> Fault {
        Fault::new(FaultKind::LieContentRange)
    }

    /// Apply to the next `n` matching requests only.
    pub fn times(mut self, n: u32) -> Fault {
        self.times = Some(n);
        self
    }

    pub fn path_contains(mut self, needle: impl Into<String>) -> Fault {
        self.path_contains = Some(needle.into());
        self
    }

    pub fn origin(mut self, origin: Origin) -> Fault {
        self.origin = Some(origin);
        self
    }

    /// Why a fault (from JSON) can't be armed.
    pub(crate) fn problem(&self) -> Option<String> {
        match self.kind {
            FaultKind::Status { status } if !(400..600).contains(&status) => {
                Some(format!("status must be 4xx or 5xx, got {status}"))
            }
            _ if self.times == Some(0) => Some("times must be at least 1".to_owned()),
            _ => None,
        }
    }

    fn matches(&self, origin: Origin, target: &str) -> bool {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        self.origin.is_none_or(|o| o == origin)
            && self.path_contains.as_deref().is_none_or(|needle| path.contains(needle))
    }
}

/// The armed faults, shared by both origins.
#[derive(Default)]
pub(crate) struct Faults(Mutex<Vec<Fault>>);

impl Faults {
    pub fn snapshot(&self) -> Vec<Fault> {
        self.lock().clone()
    }

    pub fn replace(&self, faults: Vec<Fault>) {
        *self.lock() = faults;
    }

    pub fn extend(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().extend(faults);
    }

    /// Consume one use of the first armed fault that matches the request and `wanted`.
    pub fn take(&self, origin: Origin, target: &str, wanted: impl Fn(&FaultKind) -> bool) -> Option<FaultKind> {
        let mut faults = self.lock();
        let i = faults
            .iter()
            .position(|f| wanted(&f.kind) && f.matches(origin, target))?;
        let kind = faults[i].kind.clone();
        match &mut faults[i].times {
            Some(1) => {
                faults.remove(i);
            }
            Some(n) => *n -= 1,
            None => {}
        }
        Some(kind)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Fault>> {
        // A panic elsewhere while holding the lock leaves a plain Vec: still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
