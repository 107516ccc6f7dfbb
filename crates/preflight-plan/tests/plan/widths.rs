//! The architecture's widths as declared (issue 27 item 7): an MLA model shows the head_dim
//! its config declares and its latent and rope widths beside it, never `head_dim 0`.

use preflight_plan::{PlanOptions, plan};
use serde_json::json;

use crate::support::{fixtures, hub};

/// Every bundled checkpoint with an attention layer shows a head width: MLA's as declared
/// (GLM-5.2's config says 192, its nope width), else qk nope + rope; DeepSeek-V4's one
/// compressed K=V head its 512.
#[test]
fn no_checkpoint_with_attention_has_head_dim_0() {
    let mut repos: Vec<String> = Vec::new();
    for org in std::fs::read_dir(fixtures().join("hub")).expect("hub") {
        let org = org.expect("org").path();
        for repo in std::fs::read_dir(&org).expect("repos") {
            let repo = repo.expect("repo").path();
            let name = |p: &std::path::Path| p.file_name().expect("name").to_string_lossy().into_owned();
            repos.push(format!("{}/{}", name(&org), name(&repo)));
        }
    }
    for pack in std::fs::read_dir(fixtures().join("packed")).expect("packed") {
        let name = pack.expect("pack").file_name().to_string_lossy().into_owned();
        if let Some(repo) = name.strip_suffix(".tar.gz") {
            repos.push(repo.replacen("--", "/", 1));
        }
    }
    assert!(repos.len() > 50, "{repos:?}");
    for repo in &repos {
        let v = plan(&[hub(repo)], &PlanOptions::default()).expect("plan");
        let Some(arch) = &v.artifacts[0].architecture else {
            continue;
        };
        assert!(arch.head_dim > 0, "{repo}: head_dim 0");
    }
}

#[test]
fn mla_widths_are_shown_as_declared() {
    let glm = plan(&[hub("zai-org/GLM-5.2")], &PlanOptions::default()).expect("plan");
    let arch = glm.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!(arch.head_dim, 192, "GLM-5.2's config declares 192");
    assert_eq!(arch.v_head_dim, Some(256));
    assert_eq!(
        serde_json::to_value(&arch.mla).expect("json"),
        json!({"kv_lora_rank": 512, "q_lora_rank": 2048, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256})
    );
    // No head_dim declared: a query/key head's width, nope + rope.
    let v3 = plan(&[hub("deepseek-ai/DeepSeek-V3")], &PlanOptions::default()).expect("plan");
    let arch = v3.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!((arch.head_dim, arch.v_head_dim), (192, Some(128)));
    let lite = plan(&[hub("deepseek-ai/DeepSeek-V2-Lite-Chat")], &PlanOptions::default()).expect("plan");
    let mla = lite.artifacts[0]
        .architecture
        .as_ref()
        .and_then(|a| a.mla.as_ref())
        .expect("mla");
    assert_eq!(
        (mla.kv_lora_rank, mla.q_lora_rank),
        (512, None),
        "V2-Lite projects queries directly"
    );
    // The GGUF says the same widths in llama.cpp's keys.
    let gguf = plan(&[hub("deepseek-ai/DeepSeek-V3-GGUF")], &PlanOptions::default()).expect("plan");
    let arch = gguf.artifacts[0].architecture.as_ref().expect("architecture");
    let mla = arch.mla.as_ref().expect("mla");
    assert_eq!(
        (
            arch.head_dim,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim
        ),
        (192, 128, 64, 128)
    );
    // DeepSeek-V4: one shared K=V head, 512 wide.
    let v4 = plan(&[hub("deepseek-ai/DeepSeek-V4-Pro")], &PlanOptions::default()).expect("plan");
    let arch = v4.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!((arch.kv_heads, arch.head_dim), (1, 512));
}
