//! Starting and stopping: loopback only, fixture errors named, both start modes.

use preflight_testhub::{Error, TestHub};

use crate::*;

#[tokio::test]
async fn refuses_to_listen_beyond_loopback() {
    let err = TestHub::builder()
        .listen("0.0.0.0:0".parse().unwrap())
        .start()
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::NotLoopback { .. }), "{err}");
}

#[tokio::test]
async fn a_ref_to_a_missing_commit_is_a_fixture_error() {
    let dir = tiny_tree();
    std::fs::write(
        dir.path().join("acme/tiny/refs.json"),
        format!(r#"{{"main": "{}"}}"#, "9".repeat(40)),
    )
    .unwrap();
    let err = TestHub::builder().root(dir.path()).start().await.err().unwrap();
    assert!(matches!(err, Error::Fixture { .. }), "{err}");
    assert!(err.to_string().contains("refs.json"), "{err}");
}

#[tokio::test]
async fn shutdown_frees_the_port() {
    let (hub, _dir) = tiny_hub().await;
    let url = format!("{}/acme/tiny/resolve/main/config.json", hub.url());
    assert_eq!(client().get(&url).send().await.unwrap().status(), 200);
    hub.shutdown().await;
    assert!(reqwest::Client::new().get(&url).send().await.is_err());
}

#[test]
fn start_blocking_serves_from_its_own_thread() {
    let dir = tiny_tree();
    let hub = TestHub::builder().root(dir.path()).start_blocking().unwrap();
    let url = format!("{}/acme/tiny/resolve/main/config.json", hub.url());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = runtime.block_on(async { client().get(&url).send().await.unwrap().status() });
    assert_eq!(status, 200);
    assert_eq!(hub.requests().len(), 1);
    drop(hub);
    let after = runtime.block_on(async { reqwest::Client::new().get(&url).send().await });
    assert!(after.is_err(), "stopped on drop");
}
