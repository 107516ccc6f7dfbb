//! Serving a file's bytes on either origin: 200, 206 or 416, and the range faults.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use bytes::Bytes;

use crate::body::ContentBody;
use crate::error::HubError;
use crate::faults::FaultKind;
use crate::log::Call;
use crate::range::{self, RangeReply};

pub(crate) enum Source {
    /// A fixture file: `stored` bytes on disk, zeros after that.
    Disk {
        path: PathBuf,
        stored: u64,
    },
    Memory(Bytes),
}

/// Set header `name`, or leave it unset when `value` cannot be a header value (the values
/// both origins set — commit ids, hashes, sizes, percent-encoded names — always can). Here
/// because both build the headers [`respond`] sends with it.
pub(crate) fn set_header(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// Answer with `source` (of `total` bytes) honouring `Range`; `headers` carry the
/// origin-specific ones (ETag, commit, type).
pub(crate) async fn respond(
    call: &Call,
    source: Source,
    total: u64,
    mut headers: HeaderMap,
) -> Result<Response<Body>, HubError> {
    let mut reply = range::resolve(call.range.as_deref(), total);
    if reply != RangeReply::Full && call.fault(|k| matches!(k, FaultKind::IgnoreRange)).is_some() {
        reply = RangeReply::Full;
    }
    let (status, start, len) = match reply {
        RangeReply::Full => (StatusCode::OK, 0, total),
        RangeReply::Partial { start, end } => {
            let shown = if call.fault(|k| matches!(k, FaultKind::LieContentRange)).is_some() {
                start + 1
            } else {
                start
            };
            let value = format!("bytes {shown}-{}/{total}", end + shown - start);
            headers.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&value).map_err(|e| HubError::Internal(e.to_string()))?,
            );
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
        RangeReply::Unsatisfiable => return Err(HubError::RangeNotSatisfiable { total }),
    };
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));

    let body = if call.method == Method::HEAD {
        Body::empty()
    } else {
        match source {
            Source::Disk { path, stored } => Body::new(ContentBody::open(&path, stored, start, len).await?),
            Source::Memory(bytes) => {
                // In range by construction: start + len <= total == bytes.len().
                Body::from(bytes.slice(start as usize..(start + len) as usize))
            }
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    Ok(resp)
}
