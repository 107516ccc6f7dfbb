//! Each fault switch, from the library and over the admin endpoint.

use std::time::{Duration, Instant};

use preflight_testhub::{Fault, FaultKind, Origin};
use serde_json::json;

use crate::*;

fn config_url(hub: &preflight_testhub::TestHub) -> String {
    format!("{}/acme/tiny/resolve/main/config.json", hub.url())
}

#[tokio::test]
async fn latency_delays_matching_requests() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::latency(Duration::from_millis(300)).times(1));
    let started = Instant::now();
    assert_eq!(client().get(config_url(&hub)).send().await.unwrap().status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(hub.faults().is_empty(), "used up");
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after_k_times() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::rate_limit(7).times(2));
    for _ in 0..2 {
        let resp = client().get(config_url(&hub)).send().await.unwrap();
        assert_eq!(resp.status(), 429);
        assert_eq!(header(&resp, "retry-after"), Some("7"));
        assert_eq!(header(&resp, "ratelimit"), Some("\"resolvers\";r=0;t=7"));
    }
    assert_eq!(client().get(config_url(&hub)).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn status_faults_can_fail_just_one_shard() {
    let hub = fixtures_hub().await;
    hub.add_fault(Fault::status(503).times(1).path_contains("model-00002"));
    let shard = |n: u32| {
        format!(
            "{}/Qwen/Qwen3-8B/resolve/main/model-0000{n}-of-00004.safetensors",
            hub.url()
        )
    };
    let get = |url: String| async move {
        following()
            .get(url)
            .header("range", "bytes=0-7")
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(get(shard(1)).await, 206);
    assert_eq!(get(shard(2)).await, 503);
    assert_eq!(get(shard(2)).await, 206, "only once");
    let failed: Vec<_> = hub.requests().into_iter().filter(|r| r.status == 503).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].faults, ["status"]);
}

#[tokio::test]
async fn faults_can_be_scoped_to_the_cdn() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::status(502).origin(Origin::Cdn));
    assert_eq!(client().get(config_url(&hub)).send().await.unwrap().status(), 200);
    let model = format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url());
    assert_eq!(following().get(&model).send().await.unwrap().status(), 502);
    assert_eq!(hub.faults().len(), 1, "no `times`: armed until cleared");
    hub.clear_faults();
    assert_eq!(following().head(&model).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn truncate_sends_half_the_body_then_drops_the_connection() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::truncate().times(1).path_contains("model.safetensors"));
    let model = format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url());
    let resp = following().get(&model).send().await.unwrap();
    assert_eq!(resp.content_length(), Some(TINY_MODEL_SIZE));
    assert!(resp.bytes().await.is_err(), "a short body must be an error");

    let cut = hub.requests().into_iter().find(|r| r.origin == Origin::Cdn).unwrap();
    assert_eq!(cut.faults, ["truncate"]);
    assert_eq!(cut.body_bytes, TINY_MODEL_SIZE / 2);
    // Used up: the next read is whole.
    let body = following().get(&model).send().await.unwrap().bytes().await;
    assert_eq!(body.unwrap().len() as u64, TINY_MODEL_SIZE);
}

#[tokio::test]
async fn truncate_applies_to_api_json_too() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::truncate().times(1));
    let resp = client()
        .get(format!("{}/api/models/acme/tiny", hub.url()))
        .send()
        .await
        .unwrap();
    assert!(resp.json::<serde_json::Value>().await.is_err());
}

#[tokio::test]
async fn ignore_range_answers_200_with_the_whole_body() {
    let (hub, dir) = tiny_hub().await;
    hub.add_fault(Fault::ignore_range().times(1));
    // Requests without Range don't use it up.
    assert_eq!(client().get(config_url(&hub)).send().await.unwrap().status(), 200);
    let resp = client()
        .get(config_url(&hub))
        .header("range", "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "content-range").is_none());
    let whole = std::fs::read(dir.path().join(format!("acme/tiny/{C1}/config.json"))).unwrap();
    assert_eq!(resp.bytes().await.unwrap(), whole);
    assert!(hub.faults().is_empty());
}

#[tokio::test]
async fn lie_content_range_shifts_the_start() {
    let (hub, _dir) = tiny_hub().await;
    hub.add_fault(Fault::lie_content_range().times(1));
    let model = format!("{}/acme/tiny/resolve/main/model.safetensors", hub.url());
    let resp = following()
        .get(&model)
        .header("range", "bytes=8-15")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(
        header(&resp, "content-range"),
        Some(format!("bytes 9-16/{TINY_MODEL_SIZE}").as_str())
    );
    assert_eq!(resp.bytes().await.unwrap(), tiny_safetensors_prefix()[8..16]);
}

#[tokio::test]
async fn admin_endpoint_arms_lists_and_clears_faults() {
    let (hub, _dir) = tiny_hub().await;
    let faults_url = format!("{}/_testhub/faults", hub.url());
    let armed: serde_json::Value = client()
        .post(&faults_url)
        .json(&json!([
            {"kind": "status", "status": 500, "times": 1, "path_contains": "config.json"},
            {"kind": "latency", "ms": 1, "origin": "cdn"}
        ]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(armed.as_array().unwrap().len(), 2);
    assert_eq!(
        hub.faults()[0],
        Fault::status(500).times(1).path_contains("config.json")
    );
    assert_eq!(hub.faults()[1].kind, FaultKind::Latency { ms: 1 });

    assert_eq!(client().get(config_url(&hub)).send().await.unwrap().status(), 500);
    let left: serde_json::Value = client().get(&faults_url).send().await.unwrap().json().await.unwrap();
    assert_eq!(left, json!([{"kind": "latency", "ms": 1, "origin": "cdn"}]));

    for bad in [
        json!({"kind": "status", "status": 200}),
        json!({"kind": "truncate", "times": 0}),
        json!({"kind": "explode"}),
    ] {
        let resp = client().post(&faults_url).json(&bad).send().await.unwrap();
        assert!(resp.status().is_client_error(), "{bad}");
    }
    let resp = client().delete(&faults_url).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    assert!(hub.faults().is_empty());
}
