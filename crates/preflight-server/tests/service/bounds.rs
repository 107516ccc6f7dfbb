//! Bad input of every kind: a specific 4xx with `{"error": {"code", "message"}}`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use crate::support::{send, server};

#[tokio::test]
async fn malformed_requests_are_400_with_a_code() {
    let s = server(&[]).await;
    let cases = [
        (json!({ "sources": [] }), "no_sources"),
        (json!({ "sources": vec!["hf://a/b"; 9] }), "too_many_sources"),
        (json!({ "sources": ["hf://not a repo"] }), "invalid_source"),
        (json!({ "sources": ["hf://a/b"], "extra": 1 }), "bad_request"),
        (json!({ "source": "hf://a/b" }), "bad_request"),
        (
            json!({ "sources": ["hf://a/b"], "options": { "context": 0 } }),
            "invalid_options",
        ),
        (
            json!({ "sources": ["hf://a/b"], "options": { "devices": "warp-drive:2" } }),
            "invalid_options",
        ),
        (
            json!({ "sources": ["hf://a/b"], "options": { "bogus": 1 } }),
            "invalid_options",
        ),
    ];
    for (body, code) in cases {
        let (status, _, v) = s.plan_with(body.clone(), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], code, "{body}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let request = Request::post("/v1/plan")
        .body(Body::from("{not json"))
        .expect("request");
    let (status, _, v) = send(&s.app, request).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    assert_eq!(s.counts().probes, 0, "validation happens before any network");
}

/// A bad option is reported on its field — by name, with a message about it — whether the
/// planner's validation or the reading of its type caught it, so a form can show it there.
#[tokio::test]
async fn a_bad_option_names_its_field() {
    let s = server(&[]).await;
    for (options, field) in [
        (json!({ "context": 0 }), "context"),
        (json!({ "sequences": 4, "context": "lots" }), "context"),
        (json!({ "devices": "warp-drive:2" }), "devices"),
        (json!({ "devices": [7] }), "devices"),
        (json!({ "gpu_utilization": 1.5 }), "gpu_utilization"),
        (json!({ "kv_dtype": "fp3" }), "kv_dtype"),
        (
            json!({ "devices": "h100-80gb", "workload": "isl=1k,osl=1k" }),
            "workload",
        ),
        (json!({ "devices": "h100-80gb", "workload": 64 }), "workload"),
        (json!({ "workload": "isl=1k,osl=1k,rate=2" }), "workload"),
        (
            json!({ "devices": "h100-80gb", "workload": "isl=1k,osl=1k,rate=2", "slo": "tpot=50" }),
            "slo",
        ),
        (json!({ "devices": "h100-80gb", "slo": "tpot=50ms" }), "slo"),
        (json!({ "bogus": 1 }), "bogus"),
    ] {
        let body = json!({ "sources": ["hf://a/b"], "options": options });
        let (status, _, v) = s.plan_with(body.clone(), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["code"], "invalid_options", "{body}: {v}");
        assert_eq!(v["error"]["field"], field, "{body}: {v}");
        let message = v["error"]["message"].as_str().expect("message");
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
    }
    // Not an option's fault: no field.
    let (_, _, v) = s.plan_with(json!({ "sources": [] }), None).await;
    assert!(v["error"].get("field").is_none(), "{v}");
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let s = server(&["--max-body-bytes", "1024"]).await;
    let body = json!({ "sources": ["hf://a/b"], "pad": "x".repeat(4096) }).to_string();
    let (status, _, v) = send(
        &s.app,
        Request::post("/v1/plan").body(Body::from(body)).expect("request"),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(v["error"]["code"], "body_too_large");
}

#[tokio::test]
async fn a_local_path_on_the_public_profile_is_403_naming_the_profile() {
    let s = server(&[]).await;
    let (status, _, v) = s.plan(&["/etc/passwd"]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(v["error"]["code"], "local_source_refused");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("public")));
    // A bare repo id is most likely a Hub repo meant as one: the CLI's hint, here too.
    let (status, _, v) = s.plan(&["Qwen/Qwen3-8B"]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("did you mean hf://Qwen/Qwen3-8B?"), "{v}");
}

/// The API reads options as the CLI does: `"32k"` tokens, dtypes in any case.
#[tokio::test]
async fn options_read_as_the_cli_reads_them() {
    let s = server(&[]).await;
    let (status, _, v) = s
        .plan_with(
            serde_json::json!({
                "sources": ["hf://Qwen/Qwen3-0.6B"],
                "options": {"context": "32k", "kv_dtype": "BF16", "weights_dtype": "FP8"}
            }),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let memory = &v["artifacts"][0]["memory"];
    assert_eq!(memory["context"], 32_768);
    assert_eq!(memory["kv_dtype"], "bf16");
    assert_eq!(memory["weights_dtype"], "fp8");
    let (status, _, v) = s
        .plan_with(
            serde_json::json!({"sources": ["hf://Qwen/Qwen3-0.6B"], "options": {"context": "32 thousand"}}),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["code"], "invalid_options", "{v}");
    assert_eq!(v["error"]["field"], "context", "{v}");
    // The workload and targets in the CLI's own words; the estimate beside the memory.
    let (status, _, v) = s
        .plan_with(
            serde_json::json!({
                "sources": ["hf://Qwen/Qwen3-0.6B"],
                "options": {"devices": "l4", "workload": "isl=1k,osl=128,concurrency=4", "slo": "tpot=1s"}
            }),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["performance"]["workload"], "isl=1024,osl=128,concurrency=4", "{v}");
    assert_eq!(v["performance"]["estimate"], true);
    assert_eq!(v["performance"]["slo"][0]["target"], "tpot=1000ms");
}

#[tokio::test]
async fn a_local_path_outside_the_allowed_roots_is_403() {
    let root = tempfile::tempdir().expect("tempdir");
    let s = server(&[
        "--profile",
        "local",
        "--local-root",
        root.path().to_str().expect("utf8"),
    ])
    .await;
    for path in ["/etc", &format!("{}/../", root.path().display())] {
        let (status, _, v) = s.plan(&[path]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {v}");
    }
}

#[tokio::test]
async fn upstream_answers_become_honest_statuses() {
    let s = server(&[]).await;
    for (source, status, code) in [
        ("hf://nobody/nothing", StatusCode::NOT_FOUND, "repo_not_found"),
        ("hf://Qwen/Qwen3-8B@nope", StatusCode::NOT_FOUND, "revision_not_found"),
        ("hf://meta-llama/Llama-3.1-8B", StatusCode::UNAUTHORIZED, "gated"),
    ] {
        let (got, _, v) = s.plan(&[source]).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{source}: {v}"
        );
    }
    s.hub.add_fault(preflight_testhub::Fault::status(502));
    let (got, _, v) = s.plan(&["hf://Qwen/Qwen3-0.6B"]).await;
    assert_eq!(
        (got, v["error"]["code"].as_str()),
        (StatusCode::BAD_GATEWAY, Some("upstream_failed")),
        "{v}"
    );
    assert_eq!(s.counts().plans, 0, "nothing was planned from a failed read");
}

/// Issue 27: a service whose `--hub-redirect-hosts` names the CDN's host but not its port
/// (the fixture Hub's CDN listens on another loopback port) answered 502 "redirect to
/// 127.0.0.1 refused", which never said which port, nor how to allow it.
#[tokio::test]
async fn a_refused_redirect_names_the_port_and_the_flag_that_allows_it() {
    let hub = crate::support::hub().await;
    let cdn = hub.cdn_url().trim_start_matches("http://").to_owned();
    let data = tempfile::tempdir().expect("tempdir");
    let mut args = crate::support::args(&hub, data.path(), &[]);
    args.hub_redirect_hosts = vec![".hf.co".into(), "127.0.0.1".into()];
    let state = preflight_server::state(&args).expect("state");
    let app = preflight_server::app(state);
    let body = json!({ "sources": ["hf://Qwen/Qwen3-0.6B"] }).to_string();
    let (status, _, v) = send(&app, Request::post("/v1/plan").body(Body::from(body)).expect("request")).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::BAD_GATEWAY, Some("upstream_failed")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().expect("message");
    assert!(message.contains(&format!("redirect to {cdn} refused")), "{message}");
    assert!(
        message.contains(&format!("list {cdn} in --hub-redirect-hosts")),
        "{message}"
    );
}

#[tokio::test]
async fn header_bytes_past_the_per_plan_cap_are_413_and_nothing_is_stored() {
    let s = server(&["--max-header-bytes", "1000000"]).await;
    let (status, _, v) = s.plan(&["hf://deepseek-ai/DeepSeek-V3"]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "headers_too_large");
    let (status, _, v) = s.plan(&["hf://deepseek-ai/DeepSeek-V3"]).await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "a failure is not cached as a verdict: {v}"
    );
    assert_eq!(s.counts().plans, 0);
}

/// `devices` may be a JSON list as well as the CLI's string: the same plan under the same
/// cache key, so the list form of a request the string form made is a hit.
#[tokio::test]
async fn devices_may_be_a_json_list() {
    let s = server(&[]).await;
    let source = "hf://Qwen/Qwen3-0.6B";
    let (status, _, listed) = s
        .plan_with(
            json!({ "sources": [source], "options": { "devices": ["h100-80gb:2", "l4:1"] } }),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["memory"]["per_device"].as_array().map(Vec::len), Some(3));
    assert_eq!(listed["serving"]["cached"], false);
    let (status, _, joined) = s
        .plan_with(
            json!({ "sources": [source], "options": { "devices": "h100-80gb:2,l4:1" } }),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    assert_eq!(joined["serving"]["cached"], true, "one canonical form, one key");
    assert_eq!(joined["memory"], listed["memory"]);
}

/// A degree the model does not split is known only once its config is read: still the
/// caller's mistake (400 on `tensor_parallel`, naming the degrees that do), never a verdict,
/// and nothing is cached for it.
#[tokio::test]
async fn a_degree_the_model_cannot_split_is_400_after_staging() {
    let s = server(&[]).await;
    let options = json!({ "devices": "h100-80gb:3", "tensor_parallel": 3 });
    for _ in 0..2 {
        let body = json!({ "sources": ["hf://Qwen/Qwen3-0.6B"], "options": options });
        let (status, _, v) = s.plan_with(body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        assert_eq!(v["error"]["field"], "tensor_parallel", "{v}");
        let message = v["error"]["message"].as_str().expect("message");
        assert!(
            message.contains("degrees that split it and divide the 3 devices: 1"),
            "{message}"
        );
    }
    assert_eq!(
        s.counts().plans,
        2,
        "the refusal is planned afresh each time, never served from a cache"
    );
}
