//! The fixture Hub driven by a plain HTTP client, one module per area. Tests over the
//! repository's fixtures use the default root; tests that need odd shapes (private repos,
//! `refs/pr/N`, sub-directories, files over 10 MiB) build a small tree of their own.

mod api;
mod faults;
mod gating;
mod lifecycle;
mod log;
mod ranges;
mod resolve;

use std::collections::BTreeMap;
use std::path::Path;

use preflight_testhub::TestHub;
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use tempfile::TempDir;

/// The token the hubs in these tests accept.
pub const TOKEN: &str = "hf_testhub_granted";

pub const QWEN_06B: &str = "Qwen/Qwen3-0.6B";
pub const QWEN_06B_COMMIT: &str = "dddfa76ae3e10718cbac099bca361329f5200760";
pub const QWEN_06B_SIZE: u64 = 1_192_135_096;

/// A hub over the repository's `fixtures/hub`.
pub async fn fixtures_hub() -> TestHub {
    TestHub::builder().token(TOKEN).start().await.unwrap()
}

/// Does not follow redirects, so 302s can be inspected.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

/// Follows redirects like an ordinary client (dropping `Authorization` across origins).
pub fn following() -> reqwest::Client {
    reqwest::Client::new()
}

pub fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

pub fn expected() -> BTreeMap<String, Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/expected.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub const C1: &str = "1111111111111111111111111111111111111111";
pub const C2: &str = "2222222222222222222222222222222222222222";
/// Full size of `model.safetensors` in the tiny tree (its stored prefix is far smaller).
pub const TINY_MODEL_SIZE: u64 = 300_000;
/// Over the 10 MiB LFS threshold, though `.json` is not an LFS extension.
pub const TINY_BIG_JSON_SIZE: u64 = 11 * 1024 * 1024;

/// The safetensors prefix stored for `acme/tiny`'s model: length, header, 4 data bytes.
pub fn tiny_safetensors_prefix() -> Vec<u8> {
    let header = json!({
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "BF16", "shape": [10, 20], "data_offsets": [0, 400]},
        "b": {"dtype": "F32", "shape": [7], "data_offsets": [400, 428]},
    })
    .to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[1, 2, 3, 4]);
    bytes
}

/// `acme/tiny` (public, `main`/`v1.0` -> C1, `refs/pr/1` -> C2), `acme/secret` (private),
/// `acme/gate` (gated "auto").
pub fn tiny_tree() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, bytes: &[u8]| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    let tiny = "acme/tiny";
    write(
        &format!("{tiny}/refs.json"),
        json!({"main": C1, "v1.0": C1, "refs/pr/1": C2}).to_string().as_bytes(),
    );
    write(&format!("{tiny}/repo.json"), br#"{"gated": false, "private": false}"#);
    write(
        &format!("{tiny}/{C1}/config.json"),
        br#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}"#,
    );
    write(&format!("{tiny}/{C1}/model.safetensors"), &tiny_safetensors_prefix());
    write(&format!("{tiny}/{C1}/sub/dir/notes.txt"), b"hello");
    write(&format!("{tiny}/{C1}/sub/top.txt"), b"top");
    write(&format!("{tiny}/{C1}/big.json"), b"{\"padding\": \"");
    write(
        &format!("{tiny}/{C1}/.stubs.json"),
        json!({"model.safetensors": TINY_MODEL_SIZE, "big.json": TINY_BIG_JSON_SIZE})
            .to_string()
            .as_bytes(),
    );
    write(&format!("{tiny}/{C2}/config.json"), br#"{"model_type": "pr"}"#);

    for (repo, meta) in [
        ("acme/secret", r#"{"gated": false, "private": true}"#),
        ("acme/gate", r#"{"gated": "auto", "private": false}"#),
    ] {
        write(&format!("{repo}/refs.json"), json!({"main": C1}).to_string().as_bytes());
        write(&format!("{repo}/repo.json"), meta.as_bytes());
        write(&format!("{repo}/{C1}/config.json"), b"{}");
    }
    dir
}

/// A hub over [`tiny_tree`]; keep the `TempDir` alive as long as the hub.
pub async fn tiny_hub() -> (TestHub, TempDir) {
    let dir = tiny_tree();
    let hub = TestHub::builder().root(dir.path()).token(TOKEN).start().await.unwrap();
    (hub, dir)
}
