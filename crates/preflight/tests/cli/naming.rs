//! How a source is named and its widths read (issue 27 item 7): an HF cache snapshot folder by
//! its repo and commit, not its hash; an MLA model by the head_dim its config declares and its
//! latent and rope widths beside it, never `head_dim 0`.

use std::fs;

use serde_json::Value;

use crate::support::{materialize, packed, preflight};

/// `~/.cache/huggingface/hub/models--ORG--NAME/snapshots/COMMIT` is `ORG/NAME` at `COMMIT`,
/// in the title and the JSON, not a folder named by its hash.
#[test]
fn an_hf_cache_snapshot_is_titled_by_its_repo_and_commit() {
    let home = tempfile::tempdir().expect("tempdir");
    let staged = materialize("Qwen/Qwen3-0.6B", home.path());
    let refs: Value = serde_json::from_slice(
        &fs::read(preflight_testhub::fixtures_hub().join("Qwen/Qwen3-0.6B/refs.json")).expect("refs"),
    )
    .expect("json");
    let commit = refs["main"].as_str().expect("main");
    let snapshot = home.path().join("hub/models--Qwen--Qwen3-0.6B/snapshots").join(commit);
    fs::create_dir_all(snapshot.parent().expect("parent")).expect("mkdir");
    fs::rename(&staged, &snapshot).expect("move into the cache layout");
    let out = preflight(&["plan", &snapshot.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().nth(2),
        Some(format!("Qwen/Qwen3-0.6B @ {}  [safetensors]", &commit[..12]).as_str()),
        "{text}"
    );
    let out = preflight(&["plan", "--json", &snapshot.to_string_lossy()]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let artifact = &v["artifacts"][0];
    assert_eq!(artifact["name"], "Qwen/Qwen3-0.6B");
    assert_eq!(artifact["source"]["repo"], "Qwen/Qwen3-0.6B");
    assert_eq!(artifact["source"]["commit"], commit);
    assert_eq!(artifact["source"]["pinned"], false);
}

/// GLM-5.2's config declares `head_dim: 192`; MLA's widths stand beside it. DeepSeek-V3
/// declares none: its query/key head is nope + rope.
#[test]
fn mla_models_show_their_declared_widths_never_head_dim_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (repo, want) in [
        (
            "zai-org/GLM-5.2",
            "64 heads / 64 kv · head_dim 192 as declared (qk 256 = nope 192 + rope 64, v 256, kv latent 512, q latent 2048) · vocab",
        ),
        (
            "deepseek-ai/DeepSeek-V2-Lite-Chat",
            "16 heads / 16 kv · head_dim 192 (qk nope 128 + rope 64, v 128, kv latent 512) · vocab",
        ),
    ] {
        assert!(packed().contains_key(repo), "{repo}");
        let path = materialize(repo, dir.path());
        let out = preflight(&["plan", &path.to_string_lossy()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(want), "{repo}: missing {want:?} in\n{text}");
        assert!(!text.contains("head_dim 0"), "{text}");
    }
}
