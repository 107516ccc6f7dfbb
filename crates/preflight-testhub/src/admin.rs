//! `/_testhub/…` on the Hub origin: the library API over HTTP, for tests that only have a
//! URL (another process, a script). These requests are not logged and never faulted.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::Shared;
use crate::faults::Fault;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_testhub/info", get(info))
        .route("/_testhub/requests", get(requests).delete(clear_requests))
        .route(
            "/_testhub/faults",
            get(faults).post(add_faults).put(set_faults).delete(clear_faults),
        )
        .route("/_testhub/refs", post(set_ref))
        .route("/_testhub/reset", post(reset))
}

/// Both origins' URLs: a client that only knows the Hub's learns where its CDN listens
/// (e.g. to allow redirects to exactly that host and port).
async fn info(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({ "hub": shared.hub_url, "cdn": shared.cdn_url })).into_response()
}

async fn requests(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.log.snapshot()).into_response()
}

async fn clear_requests(State(shared): State<Arc<Shared>>) -> StatusCode {
    shared.log.clear();
    StatusCode::NO_CONTENT
}

async fn faults(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.faults.snapshot()).into_response()
}

/// One fault or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Fault),
    Many(Vec<Fault>),
}

impl OneOrMany {
    fn checked(self) -> Result<Vec<Fault>, String> {
        let faults = match self {
            OneOrMany::One(f) => vec![f],
            OneOrMany::Many(fs) => fs,
        };
        match faults.iter().find_map(Fault::problem) {
            Some(problem) => Err(problem),
            None => Ok(faults),
        }
    }
}

async fn add_faults(State(shared): State<Arc<Shared>>, Json(body): Json<OneOrMany>) -> Response {
    match body.checked() {
        Ok(faults) => {
            shared.faults.extend(faults);
            Json(shared.faults.snapshot()).into_response()
        }
        Err(problem) => bad_request(&problem),
    }
}

async fn set_faults(State(shared): State<Arc<Shared>>, Json(body): Json<OneOrMany>) -> Response {
    match body.checked() {
        Ok(faults) => {
            shared.faults.replace(faults);
            Json(shared.faults.snapshot()).into_response()
        }
        Err(problem) => bad_request(&problem),
    }
}

async fn clear_faults(State(shared): State<Arc<Shared>>) -> StatusCode {
    shared.faults.replace(Vec::new());
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
struct SetRef {
    repo: String,
    #[serde(rename = "ref")]
    name: String,
    commit: String,
}

async fn set_ref(State(shared): State<Arc<Shared>>, Json(body): Json<SetRef>) -> Response {
    match shared.set_ref(&body.repo, &body.name, &body.commit) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => bad_request(&e.to_string()),
    }
}

async fn reset(State(shared): State<Arc<Shared>>) -> StatusCode {
    shared.reset();
    StatusCode::NO_CONTENT
}

fn bad_request(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response()
}
