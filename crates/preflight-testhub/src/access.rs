//! Which repo, at which commit, a request may read: the caller judged from `Authorization`,
//! privacy and gating applied, the revision split from the path and resolved against the live
//! refs. Shared by the file routes (`hub.rs`) and the API (`api.rs`, which `hub.rs` routes
//! to), so the API needs nothing from its router.

use std::sync::Arc;

use axum::http::header;

use crate::error::HubError;
use crate::log::Call;
use crate::store::{Commit, Repo};

/// Who is asking, judged from `Authorization` alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    Anonymous,
    /// A token the hub was started with: sees every repo, gated or private.
    Granted,
    /// Any other bearer token: a real account that was never granted anything.
    NoGrant,
}

fn caller(call: &Call) -> Result<Caller, HubError> {
    let Some(value) = call.headers.get(header::AUTHORIZATION) else {
        return Ok(Caller::Anonymous);
    };
    let value = value.to_str().map_err(|_| HubError::InvalidCredentials)?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(HubError::InvalidCredentials)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(HubError::InvalidCredentials);
    }
    Ok(if call.shared.tokens.iter().any(|t| t == token) {
        Caller::Granted
    } else {
        Caller::NoGrant
    })
}

/// Metadata (model info, tree) of a gated repo is public on the Hub; its files are not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Metadata,
    Content,
}

pub(crate) fn open_repo<'a>(call: &'a Call, id: &str, need: Need) -> Result<&'a Repo, HubError> {
    let caller = caller(call)?;
    let repo = call
        .shared
        .store
        .repo(id)
        .filter(|r| !r.private || caller == Caller::Granted)
        .ok_or(HubError::RepoNotFound {
            authenticated: caller != Caller::Anonymous,
        })?;
    if need == Need::Content && repo.gated.is_gated() {
        match caller {
            Caller::Anonymous => {
                return Err(HubError::GatedAnonymous { repo: repo.id.clone() });
            }
            Caller::NoGrant => {
                return Err(HubError::GatedNotGranted {
                    repo: repo.id.clone(),
                    endpoint: call.shared.hub_url.clone(),
                });
            }
            Caller::Granted => {}
        }
    }
    Ok(repo)
}

/// A branch or tag (as the live refs have it now), or a full commit id of this repo.
pub(crate) fn resolve_revision(call: &Call, repo: &Repo, rev: &str) -> Result<Arc<Commit>, HubError> {
    let sha = call.shared.ref_target(&repo.id, rev).unwrap_or_else(|| rev.to_owned());
    repo.commits
        .get(&sha)
        .cloned()
        .ok_or_else(|| HubError::RevisionNotFound { rev: rev.to_owned() })
}

/// The revision and what follows it. `refs/pr/N` and `refs/convert/NAME` may come
/// unencoded, as three segments.
pub(crate) fn split_revision<'a, 'b>(rest: &'a [&'b str]) -> Option<(String, &'a [&'b str])> {
    match rest {
        ["refs", kind @ ("pr" | "convert"), name, tail @ ..] => Some((format!("refs/{kind}/{name}"), tail)),
        [rev, tail @ ..] => Some(((*rev).to_owned(), tail)),
        [] => None,
    }
}
