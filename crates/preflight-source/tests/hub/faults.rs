//! Every fault switch of the fixture Hub: the plan succeeds after retries, or fails with a
//! specific error — and a failed staging returns nothing.

use std::time::Duration;

use preflight_source::SourceError;
use preflight_source::hub::HubError;
use preflight_testhub::Fault;

use crate::support::{client, hub, plan_source};

const SOURCE: &str = "hf://Qwen/Qwen3-8B";

#[tokio::test]
async fn rate_limited_then_served_honours_retry_after() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::rate_limit(1).times(2).path_contains("model-00002"));
    let started = std::time::Instant::now();
    let (facts, _) = plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .expect("succeeds after retries");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited out Retry-After: 1 twice"
    );
    assert_eq!(hub.requests().iter().filter(|r| r.status == 429).count(), 2);
    assert!(facts.staging.requests >= 2 + 7);
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::status(503).times(2).path_contains("model-00003"));
    hub.add_fault(Fault::status(500).times(1).path_contains("config.json"));
    plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .expect("succeeds after retries");
    assert_eq!(hub.requests().iter().filter(|r| r.status >= 500).count(), 3);
}

#[tokio::test]
async fn persistent_server_errors_fail_with_the_status() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::status(502).path_contains("model-00004"));
    match plan_source(&client(&hub, None, home.path()), SOURCE).await {
        Err(SourceError::Hub(HubError::Upstream { status, url })) => {
            assert_eq!(status, 502);
            assert!(url.contains("model-00004"));
        }
        other => panic!("expected an upstream error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_truncated_body_is_retried() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::truncate().times(1).path_contains("model-00001"));
    plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .expect("the retry reads it whole");
    assert_eq!(
        hub.requests()
            .iter()
            .filter(|r| r.faults.iter().any(|f| f == "truncate"))
            .count(),
        1
    );
}

#[tokio::test]
async fn persistent_truncation_fails_as_truncated() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::truncate().path_contains("model.safetensors.index.json"));
    let err = plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .map(|_| ())
        .expect_err("fails");
    assert!(matches!(err, SourceError::Hub(HubError::Truncated { .. })), "{err}");
}

#[tokio::test]
async fn a_server_that_ignores_range_is_refused_not_downloaded() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::ignore_range().path_contains("model-00002"));
    let err = plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .map(|_| ())
        .expect_err("fails");
    assert!(err.to_string().contains("ignored the Range"), "{err}");
    // The 4.9 GB body was not read: the connection was dropped after the headers.
    let sent: u64 = hub
        .requests()
        .iter()
        .filter(|r| r.path.contains("model-00002"))
        .map(|r| r.body_bytes)
        .sum();
    assert!(sent < 64 << 20, "read {sent} bytes of an ignored-Range body");
}

#[tokio::test]
async fn a_lying_content_range_is_refused() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::lie_content_range().path_contains("model-00001"));
    let err = plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .map(|_| ())
        .expect_err("fails");
    assert!(err.to_string().contains("Content-Range"), "{err}");
}

#[tokio::test]
async fn added_latency_slows_but_does_not_fail() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::latency(Duration::from_millis(20)));
    plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .expect("slow but fine");
}

#[tokio::test]
async fn a_request_slower_than_the_timeout_fails_as_a_timeout() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::latency(Duration::from_secs(5)).path_contains("config.json"));
    let c = preflight_source::hub::HubClient::new(preflight_source::hub::HubConfig {
        endpoint: hub.url().to_owned(),
        hf_home: home.path().to_owned(),
        request_timeout: Duration::from_millis(200),
        retry_base: Duration::from_millis(5),
        max_retries: 1,
        ..Default::default()
    })
    .expect("client");
    let err = plan_source(&c, SOURCE).await.map(|_| ()).expect_err("times out");
    assert!(matches!(err, SourceError::Hub(HubError::Timeout { .. })), "{err}");
}

#[tokio::test]
async fn a_truncated_small_file_is_retried_too() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::truncate().times(1).path_contains("model.safetensors.index.json"));
    plan_source(&client(&hub, None, home.path()), SOURCE)
        .await
        .expect("the retry reads the index whole");
}
