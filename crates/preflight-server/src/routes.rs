//! The routes, mounted from one table — so `/v1/capabilities` and the OpenAPI document are
//! derived from what is actually mounted and cannot drift from it.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::metrics::inc;
use crate::pipeline::{MAX_SOURCES, PlanRequest};

/// One mounted route, as capabilities and the OpenAPI document describe it.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RouteInfo {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    #[serde(skip)]
    id: RouteId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RouteId {
    Health,
    Capabilities,
    Plan,
    Metrics,
    OpenApi,
}

pub const ROUTES: &[RouteInfo] = &[
    RouteInfo {
        method: "GET",
        path: "/v1/health",
        summary: "Liveness; does nothing else (the deploy gate's floor)",
        id: RouteId::Health,
    },
    RouteInfo {
        method: "GET",
        path: "/v1/capabilities",
        summary: "Profile, version, mounted routes, accepted source kinds",
        id: RouteId::Capabilities,
    },
    RouteInfo {
        method: "POST",
        path: "/v1/plan",
        summary: "Plan 1 to 8 sources as one system; answers the verdict",
        id: RouteId::Plan,
    },
    RouteInfo {
        method: "GET",
        path: "/metrics",
        summary: "Prometheus metrics",
        id: RouteId::Metrics,
    },
    RouteInfo {
        method: "GET",
        path: "/v1/openapi.json",
        summary: "This API's OpenAPI document",
        id: RouteId::OpenApi,
    },
];

fn handler(id: RouteId) -> MethodRouter<Arc<AppState>> {
    match id {
        RouteId::Health => get(health),
        RouteId::Capabilities => get(capabilities),
        RouteId::Plan => post(plan),
        RouteId::Metrics => get(metrics),
        RouteId::OpenApi => get(openapi),
    }
}

/// Mount every route of [`ROUTES`]; the state records what was mounted.
pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new();
    for route in ROUTES {
        router = router.route(route.path, handler(route.id));
    }
    router
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such route; see /v1/capabilities") })
        .layer(DefaultBodyLimit::max(state.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .with_state(state)
}

/// Count every response by class, for `/metrics`.
async fn count(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    inc(&state.metrics.http_requests);
    let response = next.run(request).await;
    match response.status().as_u16() {
        400..=499 => inc(&state.metrics.errors_4xx),
        500..=599 => inc(&state.metrics.errors_5xx),
        _ => {}
    }
    response
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let served = crate::metrics::Metrics::get(&state.metrics.http_requests);
    json_response(
        json!({ "status": "ok", "uptime_seconds": state.started.elapsed().as_secs(), "requests_served": served }),
    )
}

pub fn capabilities_document(state: &AppState) -> serde_json::Value {
    let kinds: &[&str] = match state.profile {
        crate::config::Profile::Public => &["hf"],
        crate::config::Profile::Local => &["hf", "local"],
    };
    json!({
        "profile": state.profile.as_str(),
        "version": env!("CARGO_PKG_VERSION"),
        "revision": env!("PREFLIGHT_REVISION"),
        "semantics_version": preflight_plan::SEMANTICS_VERSION,
        "routes": state.mounted,
        "sources": { "POST /v1/plan": kinds },
        "limits": {
            "max_sources": MAX_SOURCES,
            "max_plans_in_flight": state.pipeline.permit_count,
            "max_body_bytes": state.max_body_bytes,
            "max_header_bytes": state.pipeline.max_header_bytes,
            "upstream_timeout_seconds": state.pipeline.upstream_timeout.as_secs(),
        },
    })
}

async fn capabilities(State(state): State<Arc<AppState>>) -> Response {
    json_response(capabilities_document(&state))
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let (entries, bytes) = state.pipeline.cache.memory_usage().await;
    let text = state.metrics.render(entries, bytes, state.pipeline.in_flight());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn openapi(State(state): State<Arc<AppState>>) -> Response {
    json_response(crate::openapi::document(&state.mounted))
}

/// The caller's Hub token, from `Authorization: Bearer …`.
fn bearer(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    match token {
        Some(t) => Ok(Some(t.to_owned())),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "bad_authorization",
            "Authorization must be `Bearer <hub token>`",
        )),
    }
}

async fn plan(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    inc(&state.metrics.plan_requests);
    let result = async {
        let body = body.map_err(|e| match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("request body over the {}-byte limit", state.max_body_bytes),
            ),
            _ => ApiError::bad_request("bad_body", e.body_text()),
        })?;
        let request: PlanRequest = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(
                "bad_request",
                format!("expected {{\"sources\": [...], \"options\": {{...}}}}: {e}"),
            )
        })?;
        let token = bearer(&headers)?;
        state.pipeline.plan(request, token).await
    }
    .await;
    match result {
        Ok(planned) => {
            let histogram = if planned.cached {
                &state.metrics.hit_latency
            } else {
                &state.metrics.miss_latency
            };
            histogram.observe(started.elapsed());
            let serving =
                json!({ "cached": planned.cached, "cacheable": planned.cacheable, "profile": state.profile.as_str() });
            verdict_response(&planned.body, &serving)
        }
        Err(e) => e.into_response(),
    }
}

/// The stored verdict with this response's `serving` block spliced in, without re-parsing.
fn verdict_response(body: &str, serving: &serde_json::Value) -> Response {
    let rest = body.strip_prefix('{').unwrap_or(body);
    let separator = if rest.trim_start().starts_with('}') { "" } else { "," };
    let text = format!("{{\"serving\":{serving}{separator}{rest}");
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        text,
    )
        .into_response()
}

fn json_response(value: serde_json::Value) -> Response {
    axum::Json(value).into_response()
}
