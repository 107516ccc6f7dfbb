//! The local HF cache: a snapshot that holds the files is planned from disk; offline mode
//! never touches the network.

use std::fs;

use preflight_source::SourceError;
use preflight_source::hub::{HubClient, HubConfig, HubError};

use crate::support::{client, commit_of, hub, plan_source};

/// Lay out `$HF_HOME/hub/models--org--name` for a fixture repo, stubs at full size.
fn cache_repo(home: &std::path::Path, repo: &str) -> String {
    let commit = commit_of(repo);
    let base = home.join("hub").join(format!("models--{}", repo.replace('/', "--")));
    let snapshot = base.join("snapshots").join(&commit);
    fs::create_dir_all(&snapshot).expect("mkdir");
    fs::create_dir_all(base.join("refs")).expect("mkdir");
    fs::write(base.join("refs/main"), &commit).expect("ref");
    let src = preflight_testhub::fixtures_hub().join(repo).join(&commit);
    let stubs: std::collections::BTreeMap<String, u64> = fs::read(src.join(".stubs.json"))
        .map(|b| serde_json::from_slice(&b).expect("json"))
        .unwrap_or_default();
    for entry in fs::read_dir(&src).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        fs::copy(&path, snapshot.join(&name)).expect("copy");
        if let Some(size) = stubs.get(&name) {
            fs::OpenOptions::new()
                .write(true)
                .open(snapshot.join(&name))
                .expect("open")
                .set_len(*size)
                .expect("extend");
        }
    }
    commit
}

#[tokio::test]
async fn a_cached_snapshot_is_planned_from_disk_after_one_probe() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    cache_repo(home.path(), "Qwen/Qwen3-8B");
    let (facts, probes) = plan_source(&client(&hub, None, home.path()), "hf://Qwen/Qwen3-8B")
        .await
        .expect("stage");
    assert_eq!(probes, 1);
    assert_eq!(hub.requests().len(), 1, "only the probe reached the Hub");
    assert!(facts.source.commit.is_some());
}

#[tokio::test]
async fn offline_plans_from_the_cache_and_never_touches_the_network() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let commit = cache_repo(home.path(), "Qwen/Qwen3-0.6B");
    let offline = HubClient::new(HubConfig {
        endpoint: hub.url().to_owned(),
        hf_home: home.path().to_owned(),
        offline: true,
        ..HubConfig::default()
    })
    .expect("client");
    let (facts, probes) = plan_source(&offline, "hf://Qwen/Qwen3-0.6B").await.expect("from cache");
    assert_eq!((probes, facts.source.commit.as_deref()), (0, Some(commit.as_str())));
    match plan_source(&offline, "hf://Qwen/Qwen3-8B").await {
        Err(SourceError::Hub(HubError::Offline { .. })) => {}
        other => panic!("expected an offline error, got {:?}", other.map(|_| ())),
    }
    assert!(
        hub.requests().is_empty(),
        "offline mode made {} requests",
        hub.requests().len()
    );
}
