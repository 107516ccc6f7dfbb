use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use preflight_server::metrics::Metrics;
use preflight_server::{AppState, ServeArgs};
use preflight_testhub::{Origin, TestHub};
use serde_json::Value;
use tower::ServiceExt;

pub const TOKEN: &str = "hf_service_token";

pub struct Server {
    pub state: Arc<AppState>,
    pub app: Router,
    pub hub: Arc<TestHub>,
    pub data: tempfile::TempDir,
}

pub async fn hub() -> TestHub {
    TestHub::builder().token(TOKEN).start().await.expect("fixture hub")
}

pub fn args(hub: &TestHub, data: &std::path::Path, flags: &[&str]) -> ServeArgs {
    let data = data.to_str().expect("utf8");
    let mut all = vec![
        "--hub-endpoint",
        hub.url(),
        "--hub-redirect-hosts",
        hub.cdn_url().trim_start_matches("http://"),
        "--data-dir",
        data,
        "--upstream-retries",
        "1",
    ];
    all.extend_from_slice(flags);
    ServeArgs::from_flags(&all).expect("flags")
}

pub async fn server(flags: &[&str]) -> Server {
    server_with(hub().await, flags)
}

/// A server on a fixture tree holding only `repo`, whose `main` can be moved to the returned
/// second commit.
pub async fn server_forked(repo: &str, flags: &[&str]) -> (Server, String, tempfile::TempDir) {
    let root = tempfile::tempdir().expect("tempdir");
    let second = preflight_testhub::fork_repo(&preflight_testhub::fixtures_hub(), repo, root.path()).expect("fork");
    let hub = TestHub::builder()
        .root(root.path())
        .token(TOKEN)
        .start()
        .await
        .expect("fixture hub");
    (server_with(hub, flags), second, root)
}

/// A server on an already running fixture Hub.
pub fn server_on(hub: TestHub, flags: &[&str]) -> Server {
    server_with(hub, flags)
}

fn server_with(hub: TestHub, flags: &[&str]) -> Server {
    let data = tempfile::tempdir().expect("tempdir");
    let state = preflight_server::state(&args(&hub, data.path(), flags)).expect("state");
    Server {
        app: preflight_server::app(state.clone()),
        state,
        hub: Arc::new(hub),
        data,
    }
}

impl Server {
    /// Another replica: its own data dir and state, the same fixture Hub (its log included).
    pub fn sibling(&self, flags: &[&str]) -> Server {
        let data = tempfile::tempdir().expect("tempdir");
        let state = preflight_server::state(&args(&self.hub, data.path(), flags)).expect("state");
        Server {
            app: preflight_server::app(state.clone()),
            state,
            hub: self.hub.clone(),
            data,
        }
    }

    /// A fresh server process on the same data dir and fixture Hub: what a restart leaves.
    pub fn restart(&mut self, flags: &[&str]) {
        let state = preflight_server::state(&args(&self.hub, self.data.path(), flags)).expect("state");
        self.app = preflight_server::app(state.clone());
        self.state = state;
    }

    pub async fn plan(&self, sources: &[&str]) -> (StatusCode, HeaderMap, Value) {
        self.plan_with(serde_json::json!({ "sources": sources }), None).await
    }

    pub async fn plan_with(&self, body: Value, token: Option<&str>) -> (StatusCode, HeaderMap, Value) {
        let mut request = Request::post("/v1/plan").header("content-type", "application/json");
        if let Some(t) = token {
            request = request.header("authorization", format!("Bearer {t}"));
        }
        send(&self.app, request.body(Body::from(body.to_string())).expect("request")).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, HeaderMap, Value) {
        send(&self.app, Request::get(path).body(Body::empty()).expect("request")).await
    }

    pub fn counts(&self) -> Counts {
        let m = &self.state.metrics;
        let get = |c: &AtomicU64| Metrics::get(c);
        Counts {
            probes: get(&m.probes),
            staging: get(&m.staging_passes),
            plans: get(&m.plans),
            hits: get(&m.cache_hits),
        }
    }

    /// Requests that reached the fixture Hub's own origin (the CDN hop excluded).
    pub fn upstream(&self) -> usize {
        self.hub.requests().iter().filter(|r| r.origin == Origin::Hub).count()
    }
}

pub async fn send(app: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.expect("response");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    let value =
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (parts.status, parts.headers, value)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub probes: u64,
    pub staging: u64,
    pub plans: u64,
    pub hits: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            probes: self.probes - o.probes,
            staging: self.staging - o.staging,
            plans: self.plans - o.plans,
            hits: self.hits - o.hits,
        }
    }
}

pub fn commit_of(repo: &str) -> String {
    let refs = preflight_testhub::fixtures_hub().join(repo).join("refs.json");
    let refs: Value = serde_json::from_slice(&std::fs::read(refs).expect("refs")).expect("json");
    refs["main"].as_str().expect("main").to_owned()
}

/// POST a one-source plan on a task of its own (for concurrent requests).
pub fn spawn_plan(app: &Router, source: &'static str) -> tokio::task::JoinHandle<(StatusCode, HeaderMap, Value)> {
    let app = app.clone();
    tokio::spawn(async move {
        let body = serde_json::json!({ "sources": [source] }).to_string();
        send(&app, Request::post("/v1/plan").body(Body::from(body)).expect("request")).await
    })
}
