//! SGLang 0.5.23's pool rules, worked by hand on bundled checkpoints (docs/memory.md § SGLang):
//! which layers its pools hold, and how many tokens a pool of given bytes reports.

use preflight_plan::{ArtifactMemory, CacheKind, Memory};

use crate::support::plan_with;

/// The system's memory and the artifact's, planned for SGLang on one H100 at `context`.
fn sglang(repo: &str, context: u64) -> (Memory, ArtifactMemory) {
    let json = format!(
        r#"{{"engine": "sglang", "devices": "h100-80gb:1", "mem_fraction_static": 0.8, "context": {context}}}"#
    );
    let verdict = plan_with(&[repo], &json);
    let artifact = verdict.artifacts[0].memory.clone().expect("memory");
    (verdict.memory.expect("system memory"), artifact)
}

/// gemma-3 is not among SGLang's hybrid SWA architectures (`is_hybrid_swa_model`): its one
/// pool holds every layer's K and V for every token, sliding layers too. gemma-3-1b: 26 layers
/// (22 sliding, window 512), 1 KV head of 256, bf16: 1,024 bytes a token a layer.
#[test]
fn gemma_3_sliding_layers_keep_every_token_in_the_one_pool() {
    let (system, artifact) = sglang("google/gemma-3-1b-it", 8_192);
    let sliding = artifact
        .kv_cache
        .iter()
        .find(|g| g.kind == CacheKind::Sliding)
        .expect("sliding layers");
    assert_eq!((sliding.layers, sliding.window), (22, None));
    assert_eq!(sliding.tokens_per_sequence, Some(8_192));
    // A token costs all 26 layers, and the pool is so many of them.
    assert_eq!(artifact.kv_cache_bytes_per_token, 26 * 1_024);
    let pool = system.kv_pool_bytes.expect("pool");
    assert_eq!(system.kv_pool_tokens, Some(pool / (26 * 1_024)));
}

/// gpt-oss is (`SWA_SINK_ARCHS`): its sliding layers keep their window in a pool of their own,
/// which holds 0.8 tokens (`--swa-full-tokens-ratio`) for each token of the full pool. gpt-oss-20b:
/// 24 layers, 12 sliding (window 128) and 12 full, 8 KV heads of 64, bf16: 2 × 8 × 64 × 2 =
/// 2,048 bytes a token a layer; a full-pool token costs 12 × 2,048 + 0.8 × 12 × 2,048 =
/// 44,236.8 bytes.
#[test]
fn gpt_oss_pool_reports_full_tokens_each_with_0_8_swa_tokens() {
    let (system, artifact) = sglang("openai/gpt-oss-20b", 8_192);
    let sliding = artifact
        .kv_cache
        .iter()
        .find(|g| g.kind == CacheKind::Sliding)
        .expect("sliding layers");
    assert_eq!(
        (sliding.layers, sliding.window, sliding.tokens_per_sequence),
        (12, Some(128), Some(128))
    );
    let pool = system.kv_pool_bytes.expect("pool");
    assert_eq!(system.kv_pool_tokens, Some((pool as f64 / 44_236.8).floor() as u64));
}

/// A hybrid linear-attention model's state slots take their share of the pool first: state :
/// KV = 0.9 (`--mamba-full-memory-ratio`), as many whole slots as fit plus a padding slot;
/// the KV pool is the rest, over the full-attention layers' bytes a token. Qwen3.5-0.8B: 6
/// full layers, 18 gated-DeltaNet layers.
#[test]
fn qwen3_5_state_slots_take_nine_nineteenths_first() {
    let (system, artifact) = sglang("Qwen/Qwen3.5-0.8B", 8_192);
    let pool = system.kv_pool_bytes.expect("pool");
    let state = artifact.state_bytes_per_sequence;
    assert!(state > 0);
    let slots = ((pool as f64 * 0.9 / 1.9 - state as f64) / state as f64).floor() as u64 + 1;
    let kv = pool - slots * state;
    assert_eq!(system.kv_pool_tokens, Some(kv / artifact.kv_cache_bytes_per_token));
}
