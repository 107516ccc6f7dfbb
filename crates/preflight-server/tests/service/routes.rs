//! The routes: capabilities report exactly what is mounted; the OpenAPI document is a
//! reviewed snapshot; health does nothing but answer.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};

use crate::support::{send, server};

#[tokio::test]
async fn capabilities_and_the_router_agree() {
    let s = server(&[]).await;
    let (status, _, caps) = s.get("/v1/capabilities").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(caps["profile"], "public");
    assert_eq!(caps["sources"]["POST /v1/plan"], serde_json::json!(["hf"]));
    // The device catalogue and engine releases, from the planner's data.
    let h100 = caps["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["name"] == "h100-80gb")
        .expect("h100-80gb listed");
    assert_eq!(
        (h100["compute_capability"].as_u64(), h100["memory_bytes"].as_u64()),
        (Some(90), Some(80 << 30))
    );
    assert_eq!(caps["engines"]["vllm"], "0.19.0");
    let routes = caps["routes"].as_array().expect("routes");
    assert!(!routes.is_empty());
    for route in routes {
        let (method, path) = (
            route["method"].as_str().expect("method"),
            route["path"].as_str().expect("path"),
        );
        let request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("method"))
            .uri(path)
            .body(Body::from("{}"))
            .expect("request");
        let (status, _, _) = send(&s.app, request).await;
        assert!(
            status != StatusCode::NOT_FOUND && status != StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path} is reported but not mounted ({status})"
        );
    }
    // And what is not reported is not mounted.
    let (status, _, v) = s.get("/v1/secret").await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_route"))
    );
    // A route asked with the wrong method says which one it takes, as a document.
    let (status, _, v) = s.get("/v1/plan").await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, Some("method_not_allowed"))
    );
    assert!(
        v["error"]["message"].as_str().is_some_and(|m| m.contains("takes POST")),
        "{v}"
    );
    let (_, _, openapi) = s.get("/v1/openapi.json").await;
    let documented: Vec<String> = openapi["paths"].as_object().expect("paths").keys().cloned().collect();
    let mut reported: Vec<String> = routes
        .iter()
        .map(|r| r["path"].as_str().expect("path").to_owned())
        .collect();
    reported.sort();
    reported.dedup();
    let mut documented = documented;
    documented.sort();
    assert_eq!(documented, reported);
}

#[tokio::test]
async fn the_openapi_document_is_a_reviewed_snapshot() {
    let s = server(&[]).await;
    let (status, _, doc) = s.get("/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    insta::assert_json_snapshot!("openapi", doc);
}

#[tokio::test]
async fn health_answers_and_counts_nothing_else() {
    let s = server(&[]).await;
    let (status, _, v) = s.get("/v1/health").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["status"], "ok");
    assert!(v["uptime_seconds"].is_u64() && v["requests_served"].is_u64());
    assert_eq!(
        s.counts(),
        crate::support::Counts {
            probes: 0,
            staging: 0,
            plans: 0,
            hits: 0
        }
    );
    assert!(s.hub.requests().is_empty());
}

#[tokio::test]
async fn metrics_expose_the_same_counters_tests_read() {
    let s = server(&[]).await;
    s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    let request = Request::get("/metrics").body(Body::empty()).expect("request");
    let (status, _, text) = send(&s.app, request).await;
    assert_eq!(status, StatusCode::OK);
    let text = text.as_str().expect("text").to_owned();
    for line in [
        "preflight_probes_total 2",
        "preflight_staging_passes_total 1",
        "preflight_planner_invocations_total 1",
        "preflight_cache_hits_total 1",
        "preflight_cache_memory_entries 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing `{line}` in\n{text}");
    }
}
