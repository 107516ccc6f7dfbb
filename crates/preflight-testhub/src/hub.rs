//! The Hub origin: `/{org}/{name}/resolve|raw/{rev}/{path}` and `/api/models/…`.
//!
//! Paths are parsed by hand, segment by segment, because a revision may arrive either
//! percent-encoded in one segment (`refs%2Fpr%2F1`, what `huggingface_hub` sends) or as
//! the three segments `refs/pr/1`; a router pattern can't express both.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use percent_encoding::percent_decode_str;

use crate::Shared;
use crate::access::{Need, open_repo, resolve_revision, split_revision};
use crate::content::{self, Source, set_header};
use crate::error::HubError;
use crate::faults::Origin;
use crate::log::Call;
use crate::store;

/// A `paths-info` request lists paths; a megabyte of them is far past any real use.
const MAX_REQUEST_BODY: usize = 1024 * 1024;

pub(crate) async fn handle(State(shared): State<Arc<Shared>>, req: Request<Body>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let call = Call::new(shared, Origin::Hub, &parts);
    let resp = match call.before().await {
        Some(resp) => resp,
        None => route(&call, &parts.uri, body)
            .await
            .unwrap_or_else(HubError::into_response),
    };
    call.finish(resp)
}

async fn route(call: &Call, uri: &Uri, body: Body) -> Result<Response<Body>, HubError> {
    let segments = decode_segments(uri.path())?;
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let query = uri.query().unwrap_or("");
    match segments.as_slice() {
        ["api", "models", org, name, rest @ ..] => {
            // Only `paths-info` reads a body; it is small (a list of paths).
            let body = if call.method == Method::POST {
                axum::body::to_bytes(body, MAX_REQUEST_BODY)
                    .await
                    .map_err(|_| HubError::BadRequest("request body too large or cut".into()))?
            } else {
                bytes::Bytes::new()
            };
            crate::api::models(call, &format!("{org}/{name}"), rest, query, &body).await
        }
        [org, name, kind @ ("resolve" | "raw"), rest @ ..] => {
            file(call, &format!("{org}/{name}"), *kind == "raw", rest).await
        }
        _ => Err(HubError::NoRoute),
    }
}

/// `GET|HEAD /{repo}/resolve|raw/{rev}/{path}`.
async fn file(call: &Call, repo_id: &str, raw: bool, rest: &[&str]) -> Result<Response<Body>, HubError> {
    if call.method != Method::GET && call.method != Method::HEAD {
        return Err(HubError::MethodNotAllowed);
    }
    let repo = open_repo(call, repo_id, Need::Content)?;
    let (rev, path) = split_revision(rest).ok_or(HubError::NoRoute)?;
    let commit = resolve_revision(call, repo, &rev)?;
    let path = path.join("/");
    let entry = commit.file(&path).ok_or_else(|| HubError::EntryNotFound {
        commit: commit.sha.clone(),
    })?;
    let hashes = store::hashes_of(&commit, &path).await?;

    let mut headers = HeaderMap::new();
    set_header(&mut headers, "x-repo-commit", &commit.sha);
    set_header(&mut headers, "etag", &format!("\"{}\"", hashes.oid));
    match &hashes.lfs {
        Some(lfs) if !raw => {
            // Large files live on the CDN: answer with where to get them and what they are.
            let location = crate::cdn::signed_url(&call.shared, repo_id, &commit.sha, &path);
            set_header(&mut headers, "location", &location);
            set_header(&mut headers, "x-linked-etag", &format!("\"{}\"", lfs.sha256));
            set_header(&mut headers, "x-linked-size", &entry.size.to_string());
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = StatusCode::FOUND;
            *resp.headers_mut() = headers;
            Ok(resp)
        }
        Some(lfs) => {
            // `/raw/` serves the git blob, which for an LFS file is its pointer.
            let pointer = bytes::Bytes::from(lfs.pointer.clone());
            let total = pointer.len() as u64;
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            content::respond(call, Source::Memory(pointer), total, headers).await
        }
        None => {
            headers.insert(header::CONTENT_TYPE, content_type(&path));
            let source = Source::Disk {
                path: entry.disk.clone(),
                stored: entry.stored,
            };
            content::respond(call, source, entry.size, headers).await
        }
    }
}

fn content_type(path: &str) -> HeaderValue {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => HeaderValue::from_static("application/json"),
        Some("md" | "txt" | "py" | "jinja") => HeaderValue::from_static("text/plain; charset=utf-8"),
        _ => HeaderValue::from_static("application/octet-stream"),
    }
}

/// Path segments, percent-decoded one by one (so `%2F` stays inside its segment).
fn decode_segments(path: &str) -> Result<Vec<String>, HubError> {
    path.trim_start_matches('/')
        .split('/')
        .map(|seg| {
            percent_decode_str(seg)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| HubError::BadRequest("path is not valid percent-encoded UTF-8".into()))
        })
        .collect()
}
