//! The second origin, standing in for the Hub's CDN: serves LFS objects at URLs the Hub
//! origin signed, and needs no `Authorization` — the signature is the grant. Being a
//! different origin (another port), it is where a correct client drops its token; the
//! request log records whether one arrived anyway.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, header};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha2::{Digest, Sha256};

use crate::Shared;
use crate::content::{self, Source, set_header};
use crate::error::HubError;
use crate::faults::Origin;
use crate::log::Call;
use crate::store;

/// Unreserved characters stay as they are; everything else in a segment is encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Where the Hub origin redirects a large file: `/lfs/{repo}/{commit}/{path}?sig=…`.
pub(crate) fn signed_url(shared: &Shared, repo: &str, commit: &str, path: &str) -> String {
    let encoded: Vec<String> = path
        .split('/')
        .map(|seg| utf8_percent_encode(seg, SEGMENT).to_string())
        .collect();
    format!(
        "{}/lfs/{repo}/{commit}/{}?sig={}",
        shared.cdn_url,
        encoded.join("/"),
        signature(shared, repo, commit, path)
    )
}

/// A keyed digest: not security, just enough that only URLs the Hub origin handed out work,
/// so a client can't skip the redirect by guessing the CDN's layout.
fn signature(shared: &Shared, repo: &str, commit: &str, path: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(shared.sign_key);
    hasher.update(format!("{repo}\n{commit}\n{path}").as_bytes());
    hex::encode(&hasher.finalize()[..16])
}

pub(crate) async fn handle(State(shared): State<Arc<Shared>>, req: Request<Body>) -> Response<Body> {
    let (parts, _) = req.into_parts();
    let call = Call::new(shared, Origin::Cdn, &parts);
    let resp = match call.before().await {
        Some(resp) => resp,
        None => serve(&call, &parts.uri).await.unwrap_or_else(HubError::into_response),
    };
    call.finish(resp)
}

async fn serve(call: &Call, uri: &Uri) -> Result<Response<Body>, HubError> {
    if call.method != Method::GET && call.method != Method::HEAD {
        return Err(HubError::MethodNotAllowed);
    }
    let raw: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let ["lfs", org, name, commit, path @ ..] = raw.as_slice() else {
        return Err(HubError::NoRoute);
    };
    let mut segments = Vec::with_capacity(path.len());
    for seg in path {
        let seg = percent_decode_str(seg)
            .decode_utf8()
            .map_err(|_| HubError::BadRequest("path is not valid percent-encoded UTF-8".into()))?;
        segments.push(seg.into_owned());
    }
    let path = segments.join("/");
    let repo_id = format!("{org}/{name}");
    let sig = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "sig")
        .map(|(_, v)| v.into_owned());
    if sig.as_deref() != Some(signature(&call.shared, &repo_id, commit, &path).as_str()) {
        return Err(HubError::BadSignature);
    }

    // A signed URL names a file that existed; a missing one means the fixture changed.
    let missing = || HubError::Internal(format!("{repo_id}@{commit}/{path} is gone"));
    let commit = call
        .shared
        .store
        .repo(&repo_id)
        .and_then(|r| r.commits.get(*commit))
        .cloned()
        .ok_or_else(missing)?;
    let entry = commit.file(&path).ok_or_else(missing)?;
    let hashes = store::hashes_of(&commit, &path).await?;

    let mut headers = HeaderMap::new();
    if let Some(lfs) = &hashes.lfs {
        set_header(&mut headers, "etag", &format!("\"{}\"", lfs.sha256));
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    let file_name = path.rsplit('/').next().unwrap_or(&path);
    set_header(
        &mut headers,
        "content-disposition",
        &format!("inline; filename*=UTF-8''{}", utf8_percent_encode(file_name, SEGMENT)),
    );
    let source = Source::Disk {
        path: entry.disk.clone(),
        stored: entry.stored,
    };
    content::respond(call, source, entry.size, headers).await
}
