//! The routes, mounted from one table — so `/v1/capabilities` and the OpenAPI document are
//! derived from what is actually mounted and cannot drift from it.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::json;
use sha2::Digest;

use crate::AppState;
use crate::error::{ApiError, ErrorCode};
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
    Explorer,
    Health,
    Capabilities,
    Plan,
    Metrics,
    OpenApi,
}

pub const ROUTES: &[RouteInfo] = &[
    RouteInfo {
        method: "GET",
        path: "/",
        summary: "The Explorer: a page that plans a source and shows the verdict",
        id: RouteId::Explorer,
    },
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
        RouteId::Explorer => get(explorer),
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
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NoRoute,
                "no such route; see /v1/capabilities",
            )
        })
        // A route asked with another method: say which one it takes (`GET /v1/plan`).
        .method_not_allowed_fallback(|request: Request| async move {
            let path = request.uri().path();
            let allowed: Vec<&str> = ROUTES.iter().filter(|r| r.path == path).map(|r| r.method).collect();
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::MethodNotAllowed,
                format!(
                    "{} {path} is not served; {path} takes {} (see /v1/capabilities)",
                    request.method(),
                    allowed.join(", ")
                ),
            )
        })
        .layer(DefaultBodyLimit::max(state.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .with_state(state)
}

/// Whether a plan response was served from a cache: set by the plan handler for the
/// request log line.
#[derive(Debug, Clone, Copy)]
struct ServedFromCache(bool);

/// Count every response by class, for `/metrics`, and log one line per request at the
/// default verbosity: method, path, status, whether a plan was cached, milliseconds.
async fn count(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    inc(&state.metrics.http_requests);
    let started = Instant::now();
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    match status {
        400..=499 => inc(&state.metrics.errors_4xx),
        500..=599 => inc(&state.metrics.errors_5xx),
        _ => {}
    }
    let cached = response.extensions().get::<ServedFromCache>().map(|c| c.0);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    match cached {
        Some(cached) => tracing::info!(%method, path, status, cached, ms = format!("{ms:.2}"), "request"),
        None => tracing::info!(%method, path, status, ms = format!("{ms:.2}"), "request"),
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
        // The one device catalogue `devices` accepts, and the engine releases runtime
        // verdicts are judged against.
        "devices": preflight_plan::devices::catalogue(),
        "engines": preflight_plan::Engine::ALL
            .iter()
            .map(|e| (e.key().to_owned(), json!(preflight_plan::engine_version(*e))))
            .collect::<serde_json::Map<_, _>>(),
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
    let redis = state.pipeline.cache.shared().is_some();
    let text = state.metrics.render(entries, bytes, state.pipeline.in_flight(), redis);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn openapi(State(state): State<Arc<AppState>>) -> Response {
    json_response(state.openapi.clone())
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
            ErrorCode::BadAuthorization,
            "Authorization must be `Bearer <hub token>`",
        )),
    }
}

/// The request body, at most `max_body_bytes` and within `body_timeout`: a declared length
/// over the limit is refused before anything is read, and a client that stops sending is
/// answered 408 and its connection closed — never held open waiting.
async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::BodyTooLarge,
            format!("request body over the {}-byte limit", state.max_body_bytes),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > state.max_body_bytes as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(state.body_timeout, axum::body::to_bytes(body, state.max_body_bytes)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let limit =
                std::error::Error::source(&e).is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            Err(if limit {
                too_large()
            } else {
                ApiError::bad_request(ErrorCode::BadBody, format!("cannot read the request body: {e}"))
            })
        }
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::BodyTimeout,
            format!(
                "the request body did not arrive within {}s",
                state.body_timeout.as_secs()
            ),
        )),
    }
}

async fn plan(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    inc(&state.metrics.plan_requests);
    let result = async {
        let body = read_body(&state, &headers, body).await?;
        let request: PlanRequest = serde_json::from_slice(&body).map_err(|e| bad_plan_body(&body, e))?;
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
            let mut response = verdict_response(&planned.body, &serving);
            response.extensions_mut().insert(ServedFromCache(planned.cached));
            response
        }
        Err(e) => e.into_response(),
    }
}

/// The stored verdict with this response's `serving` block spliced in, without re-parsing.
/// A body that is not a plan request. When the fault is one option's value, name that
/// option (`field`), found by reading each option alone, so a form can say it on the field
/// rather than as a parser's message.
fn bad_plan_body(body: &[u8], e: serde_json::Error) -> ApiError {
    let options = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("options").and_then(|o| o.as_object()).cloned());
    for (field, value) in options.iter().flatten() {
        let alone = serde_json::Value::Object([(field.clone(), value.clone())].into_iter().collect());
        if let Err(e) = serde_json::from_value::<preflight_plan::PlanOptions>(alone) {
            let message = e.to_string();
            let message = message
                .strip_prefix(&format!("{field}: "))
                .unwrap_or(&message)
                .to_owned();
            return ApiError::invalid_option(field.clone(), format!("{field}: {message}"));
        }
    }
    ApiError::bad_request(
        ErrorCode::BadRequest,
        format!("expected {{\"sources\": [...], \"options\": {{...}}}}: {e}"),
    )
}

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

/// The Explorer page: one self-contained file (inline CSS and JS, no third-party requests),
/// embedded in the binary. The device suggestions are filled in from the planner's catalogue,
/// so they cannot drift from what `devices` accepts.
const EXPLORER_TEMPLATE: &str = include_str!("../assets/explorer.html");

/// The page as served, and its Content-Security-Policy. The policy allows the page's own
/// inline script and style by hash and nothing from any other origin: the page can only talk
/// to this server, and a verdict's text can never run as script.
struct ExplorerPage {
    html: String,
    csp: HeaderValue,
}

static EXPLORER: LazyLock<ExplorerPage> = LazyLock::new(|| {
    let options: String = preflight_plan::devices::catalogue()
        .iter()
        .map(|d| {
            // A part whose memory the catalogue does not know is suggested with the size to fill in.
            let value = match d.memory_bytes {
                Some(_) => d.name.clone(),
                None => format!("{}=", d.name),
            };
            format!(
                "<option value=\"{}\">{}</option>",
                escape_html(&value),
                escape_html(&d.description)
            )
        })
        .collect();
    let html = EXPLORER_TEMPLATE.replacen("<!--DEVICES-->", &options, 1);
    let hashes = |open: &str, close: &str| -> String {
        inline_blocks(&html, open, close)
            .map(|block| format!(" 'sha256-{}'", base64(&sha2::Sha256::digest(block))))
            .collect()
    };
    let csp = format!(
        "default-src 'none'; script-src{}; style-src{}; connect-src 'self'; img-src 'self' data:; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        hashes("<script>", "</script>"),
        hashes("<style>", "</style>"),
    );
    let csp = HeaderValue::from_str(&csp).unwrap_or(HeaderValue::from_static("default-src 'none'"));
    ExplorerPage { html, csp }
});

async fn explorer() -> Response {
    let page = &*EXPLORER;
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::CONTENT_SECURITY_POLICY, page.csp.clone()),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
        page.html.clone(),
    )
        .into_response()
}

/// The contents of every `open`…`close` block (inline `<script>` or `<style>` elements).
fn inline_blocks<'a>(html: &'a str, open: &'a str, close: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    html.split(open)
        .skip(1)
        .filter_map(move |rest| rest.split_once(close).map(|(block, _)| block))
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Standard base64 with padding, as CSP hash sources are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn the_explorer_is_self_contained_and_its_policy_covers_its_inline_code() {
        let page = &*EXPLORER;
        assert!(!page.html.contains("<!--DEVICES-->"), "device catalogue not filled in");
        assert!(page.html.contains("<option value=\"h100-80gb\">"));
        // No third-party requests: nothing is loaded from another origin.
        for attribute in [
            "src=\"http",
            "href=\"http",
            "src=\"//",
            "href=\"//",
            "@import",
            "url(http",
        ] {
            assert!(!page.html.contains(attribute), "the page loads `{attribute}…`");
        }
        let csp = page.csp.to_str().expect("ascii");
        assert_eq!(
            csp.matches("'sha256-").count(),
            2,
            "one script and one style, each hashed: {csp}"
        );
        assert!(csp.contains("connect-src 'self'") && csp.contains("default-src 'none'"));
        assert!(!csp.contains("unsafe-inline"));
    }
}
