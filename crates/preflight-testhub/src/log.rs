//! The request log, and the per-request bracket that fills it and applies the faults.
//!
//! Every request on either origin is recorded before its body is sent; the byte count keeps
//! rising while the body streams, so a test that has read a body sees its bytes counted.
//! Admin requests (`/_testhub/…`) are not recorded: they would disturb the counts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde::{Deserialize, Serialize};

use crate::Shared;
use crate::body::Metered;
use crate::error::HubError;
use crate::faults::{FaultKind, Origin};

/// One request as either origin saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub origin: Origin,
    pub method: String,
    /// Path and query exactly as received (still percent-encoded).
    pub path: String,
    /// The `Range` header, verbatim.
    pub range: Option<String>,
    /// Whether an `Authorization` header arrived (its value is never kept).
    pub authorization: bool,
    pub status: u16,
    /// Body bytes handed to the connection so far (0 for HEAD).
    pub body_bytes: u64,
    /// Names of the faults applied to this request (`"status"`, `"truncate"`, …).
    pub faults: Vec<String>,
}

struct Entry {
    record: RequestRecord,
    sent: Arc<AtomicU64>,
}

#[derive(Default)]
pub(crate) struct Log(Mutex<Vec<Entry>>);

impl Log {
    pub fn snapshot(&self) -> Vec<RequestRecord> {
        self.lock()
            .iter()
            .map(|e| RequestRecord {
                body_bytes: e.sent.load(Ordering::Relaxed),
                ..e.record.clone()
            })
            .collect()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn push(&self, record: RequestRecord, sent: Arc<AtomicU64>) {
        self.lock().push(Entry { record, sent });
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One request in flight: what it asked, which faults it met.
pub(crate) struct Call {
    pub shared: Arc<Shared>,
    pub origin: Origin,
    pub method: Method,
    pub target: String,
    pub range: Option<String>,
    pub headers: HeaderMap,
    applied: Mutex<Vec<String>>,
}

impl Call {
    pub fn new(shared: Arc<Shared>, origin: Origin, req: &Parts) -> Call {
        let target = req
            .uri
            .path_and_query()
            .map(|pq| pq.as_str().to_owned())
            .unwrap_or_else(|| req.uri.path().to_owned());
        // A Range header that isn't visible ASCII is treated as absent, as the RFC allows.
        let range = req
            .headers
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Call {
            shared,
            origin,
            method: req.method.clone(),
            target,
            range,
            headers: req.headers.clone(),
            applied: Mutex::new(Vec::new()),
        }
    }

    /// Consume one use of a matching fault of the kind `wanted` picks, noting it in the log.
    pub fn fault(&self, wanted: impl Fn(&FaultKind) -> bool) -> Option<FaultKind> {
        let kind = self.shared.faults.take(self.origin, &self.target, wanted)?;
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(kind.name().to_owned());
        Some(kind)
    }

    /// Latency, then the faults that replace the answer altogether.
    pub async fn before(&self) -> Option<Response<Body>> {
        if let Some(FaultKind::Latency { ms }) = self.fault(|k| matches!(k, FaultKind::Latency { .. })) {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        match self.fault(|k| matches!(k, FaultKind::RateLimit { .. } | FaultKind::Status { .. }))? {
            FaultKind::RateLimit { retry_after } => {
                let mut resp = HubError::RateLimited.into_response();
                let headers = resp.headers_mut();
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                if self.origin == Origin::Hub {
                    // What the Hub sends, and what huggingface_hub's backoff reads first.
                    let bucket = if self.target.starts_with("/api/") {
                        "api"
                    } else {
                        "resolvers"
                    };
                    let quota = if bucket == "api" { 500 } else { 3000 };
                    for (name, value) in [
                        ("ratelimit", format!("\"{bucket}\";r=0;t={retry_after}")),
                        (
                            "ratelimit-policy",
                            format!("\"fixed window\";\"{bucket}\";q={quota};w=300"),
                        ),
                    ] {
                        if let Ok(value) = HeaderValue::from_str(&value) {
                            headers.insert(name, value);
                        }
                    }
                }
                Some(resp)
            }
            FaultKind::Status { status } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                Some(HubError::Injected(status).into_response())
            }
            _ => None,
        }
    }

    /// Record the response and meter its body (truncating it if a fault says so).
    pub fn finish(self, resp: Response<Body>) -> Response<Body> {
        let (mut parts, body) = resp.into_parts();
        let length = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .or_else(|| http_body::Body::size_hint(&body).exact())
            .unwrap_or(0);
        let cut_at = (self.method == Method::GET && parts.status.is_success() && length > 0)
            .then(|| self.fault(|k| matches!(k, FaultKind::Truncate)))
            .flatten()
            .map(|_| length / 2);
        if cut_at.is_some() {
            // The promise the truncated body breaks must be on the wire.
            parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        let sent = Arc::new(AtomicU64::new(0));
        let record = RequestRecord {
            origin: self.origin,
            method: self.method.to_string(),
            path: self.target,
            range: self.range,
            authorization: self.headers.contains_key(header::AUTHORIZATION),
            status: parts.status.as_u16(),
            body_bytes: 0,
            faults: self.applied.into_inner().unwrap_or_else(|e| e.into_inner()),
        };
        self.shared.log.push(record, Arc::clone(&sent));
        Response::from_parts(parts, Body::new(Metered::new(body, sent, cut_at)))
    }
}
