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

/// A folder of the HF cache names its repo and commit (issue 27 item 7): planned as a local
/// path, it is `Qwen/Qwen3-8B` at that commit, not a folder called by its hash. It has no card
/// or gating to read; its files are listed with their sizes.
#[test]
fn an_hf_cache_snapshot_folder_is_its_repo_at_its_commit() {
    let home = tempfile::tempdir().expect("tempdir");
    let commit = cache_repo(home.path(), "Qwen/Qwen3-8B");
    let snapshot = home.path().join("hub/models--Qwen--Qwen3-8B/snapshots").join(&commit);
    for path in [snapshot.clone(), snapshot.join("model-00004-of-00004.safetensors")] {
        let facts = preflight_source::local::stage(&path).expect("stage");
        assert_eq!(
            facts.source.repo.as_deref(),
            Some("Qwen/Qwen3-8B"),
            "{}",
            path.display()
        );
        assert_eq!(facts.source.commit.as_deref(), Some(commit.as_str()));
        assert!(!facts.source.pinned);
        assert_eq!((facts.meta.license.as_deref(), facts.meta.gated), (None, None));
        let files = facts.meta.files.as_deref().expect("listed");
        assert!(files.iter().any(|f| f.name == "config.json" && f.size.is_some()));
    }
    // An org-less repo, and folders that only look like the cache.
    use preflight_source::local::hf_cache_snapshot;
    let c = "0123456789abcdef0123456789abcdef01234567";
    assert_eq!(
        hf_cache_snapshot(std::path::Path::new(&format!("/x/models--gpt2/snapshots/{c}"))),
        Some(("gpt2".into(), c.into()))
    );
    for path in [
        format!("/x/models--a--b/snapshots/{}", &c[..12]),
        format!("/x/datasets--a--b/snapshots/{c}"),
        format!("/x/models--a--b/refs/{c}"),
        format!("/x/models--a--b--c/snapshots/{c}"),
    ] {
        assert_eq!(hf_cache_snapshot(std::path::Path::new(&path)), None, "{path}");
    }
}
