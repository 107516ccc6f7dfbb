//! What staging learns about a source beside its checkpoint (issue 27 item 12): the card's
//! licence, the Hub's gating and the files with their sizes — from the model-info request
//! staging already makes, not from requests of their own.

use std::fs;

use preflight_formats::facts::Gated;
use preflight_source::hub::Counters;
use preflight_source::hub::stage::{PlanBudget, resolve_with_listing, stage};

use crate::support::{TOKEN, client, commit_of, hub, hub_requests, hub_spec, plan_source};

fn model_info_requests(hub: &preflight_testhub::TestHub) -> usize {
    hub.requests()
        .iter()
        .filter(|r| r.path.starts_with("/api/models/"))
        .count()
}

#[tokio::test]
async fn a_repos_model_info_gives_licence_gating_and_sized_files_in_its_one_request() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, probes) = plan_source(&client(&hub, None, home.path()), "hf://Qwen/Qwen3-8B")
        .await
        .expect("stage");
    assert_eq!(facts.meta.license.as_deref(), Some("other"));
    assert_eq!(facts.meta.gated, Some(Gated::No));
    let dir = preflight_testhub::fixtures_hub()
        .join("Qwen/Qwen3-8B")
        .join(commit_of("Qwen/Qwen3-8B"));
    let files = facts.meta.files.as_deref().expect("a listing");
    let config = files.iter().find(|f| f.name == "config.json").expect("config listed");
    assert_eq!(
        config.size,
        Some(fs::metadata(dir.join("config.json")).expect("size").len())
    );
    let shard = files
        .iter()
        .find(|f| f.name == "model-00001-of-00004.safetensors")
        .expect("shard listed");
    assert_eq!(
        shard.size,
        Some(4_902_257_696),
        "an LFS file's own size, not its pointer's"
    );
    assert_eq!(model_info_requests(&hub), 1, "the model info staging always asked for");
    assert_eq!(
        probes + facts.staging.requests,
        hub_requests(&hub.requests()).len() as u64
    );
}

#[tokio::test]
async fn a_gated_repo_is_said_to_be_gated() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, _) = plan_source(&client(&hub, Some(TOKEN), home.path()), "hf://meta-llama/Llama-3.1-8B")
        .await
        .expect("stage");
    assert_eq!(facts.meta.gated, Some(Gated::Manual));
}

/// A named GGUF had no model info before; it is read beside the header, no round trip added.
#[tokio::test]
async fn a_named_gguf_reads_its_repos_model_info_beside_its_header() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, _) = plan_source(
        &client(&hub, None, home.path()),
        "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf",
    )
    .await
    .expect("stage");
    assert_eq!(facts.meta.license.as_deref(), Some("apache-2.0"));
    assert_eq!(facts.meta.gated, Some(Gated::No));
    assert_eq!(model_info_requests(&hub), 1);
}

/// The CLI's resolution already read the model info: staging takes it, and asks again for
/// nothing — a named GGUF then costs no probe either, the model info answering for it.
#[tokio::test]
async fn model_info_from_the_resolution_is_not_asked_for_again() {
    let hub = hub().await;
    let home = tempfile::tempdir().expect("tempdir");
    let client = client(&hub, None, home.path());
    for source in ["hf://Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf"] {
        hub.clear_requests();
        let spec = hub_spec(source);
        let (commit, info) = resolve_with_listing(&client, &spec, &Counters::default())
            .await
            .expect("resolve");
        assert!(info.is_some(), "{source}");
        let facts = stage(&client, &spec, &commit, info, &PlanBudget::new(client.config()))
            .await
            .expect("stage");
        assert_eq!(model_info_requests(&hub), 1, "{source}");
        assert!(
            !hub.requests().iter().any(|r| r.range.as_deref() == Some("bytes=0-0")),
            "{source}: no probe"
        );
        assert!(facts.meta.license.is_some(), "{source}");
    }
}

/// The card's `license_name` says which licence `other` means; the fixture Hub reads it out of
/// the README's front matter as the Hub does.
#[tokio::test]
async fn a_cards_licence_name_is_kept() {
    let root = tempfile::tempdir().expect("tempdir");
    preflight_testhub::fork_repo(&preflight_testhub::fixtures_hub(), "Qwen/Qwen3-0.6B", root.path()).expect("fork");
    let readme = root
        .path()
        .join("Qwen/Qwen3-0.6B")
        .join(commit_of("Qwen/Qwen3-0.6B"))
        .join("README.md");
    // A hard link to the fixture's own README: replaced, never written through.
    fs::remove_file(&readme).expect("unlink");
    fs::write(
        &readme,
        "---\nlicense: other\nlicense_name: qwen-research\n---\n# fork\n",
    )
    .expect("readme");
    let hub = preflight_testhub::TestHub::builder()
        .root(root.path())
        .start()
        .await
        .expect("hub");
    let home = tempfile::tempdir().expect("tempdir");
    let (facts, _) = plan_source(&client(&hub, None, home.path()), "hf://Qwen/Qwen3-0.6B")
        .await
        .expect("stage");
    assert_eq!(
        (facts.meta.license.as_deref(), facts.meta.license_name.as_deref()),
        (Some("other"), Some("qwen-research"))
    );
}
