//! Hybrid stacks: per-token caches beside per-sequence recurrent state, worked by hand.

use preflight_plan::CacheKind;

use crate::support::memory_of;

/// Qwen3.5-35B-A3B: 10 gated full-attention layers and 30 gated-DeltaNet layers.
///
/// Full attention (vLLM `FullAttentionSpec`, `kv_cache_interface.py`): K and V of 2 KV heads
/// × head_dim 256 in bf16 = 2 × 2 × 256 × 2 = 2,048 bytes a token a layer; 10 layers = 20,480.
///
/// DeltaNet (vLLM `MambaStateShapeCalculator.gated_delta_net_state_shape`, mamba_utils.py
/// l.177–200; dtypes by `gated_delta_net_state_dtype` with `mamba_ssm_cache_dtype` set from
/// the config's `mamba_ssm_dtype` by `Qwen3_5ForConditionalGenerationConfig`, models/config.py):
/// conv state (kernel 4 − 1) × conv_dim (16 × 128 × 2 + 32 × 128 = 8,192) in bf16
/// = 3 × 8,192 × 2 = 49,152 bytes; recurrent state 32 value heads × 128 × 128 in float32
/// = 2,097,152 bytes; 2,146,304 a layer, × 30 = 64,389,120 bytes a sequence.
#[test]
fn qwen3_5_35b_a3b_kv_per_token_and_state_per_sequence() {
    let m = memory_of("Qwen/Qwen3.5-35B-A3B", r#"{"context": 4096, "sequences": 2}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 20_480);
    assert_eq!(m.state_bytes_per_sequence, 64_389_120);
    assert_eq!(m.state_bytes, 2 * 64_389_120);
    let linear = m
        .kv_cache
        .iter()
        .find(|g| g.kind == CacheKind::LinearAttention)
        .expect("linear-attention group");
    assert_eq!(
        (
            linear.layers,
            linear.bytes_per_sequence_per_layer,
            linear.bytes_per_token_per_layer
        ),
        (30, Some(2_146_304), None)
    );
    let full = m
        .kv_cache
        .iter()
        .find(|g| g.kind == CacheKind::Full)
        .expect("full group");
    assert_eq!((full.layers, full.bytes_per_token_per_layer), (10, Some(2_048)));
    // The state does not grow with the context; the full layers do.
    assert_eq!(m.model_cache_bytes(), 20_480 * 4096 * 2 + 64_389_120 * 2);
    let longer = memory_of("Qwen/Qwen3.5-35B-A3B", r#"{"context": 8192, "sequences": 2}"#);
    assert_eq!(longer.model_cache_bytes() - m.model_cache_bytes(), 20_480 * 4096 * 2);
    assert_eq!(longer.state_bytes, m.state_bytes);
}

/// Under tensor parallelism each rank holds its share of the value heads' state and of the
/// conv channels (`divide(num_v_heads, tp)`, `divide(conv_dim, tp)`), and one of the two KV
/// heads of each full layer. (SGLang's accounting: the cells held, not vLLM's pages.)
#[test]
fn qwen3_5_state_splits_over_ranks() {
    let whole = memory_of(
        "Qwen/Qwen3.5-35B-A3B",
        r#"{"context": 1024, "tensor_parallel": 1, "engine": "sglang"}"#,
    );
    let split = memory_of(
        "Qwen/Qwen3.5-35B-A3B",
        r#"{"context": 1024, "tensor_parallel": 2, "engine": "sglang"}"#,
    );
    let rank = split
        .per_rank
        .expect("16 heads, 2 KV heads and 512-wide experts split 2 ways");
    assert_eq!(rank.kv_cache_bytes, whole.kv_cache_bytes / 2);
}

/// DeepSeek-V3.2 (NVFP4 weights, KV in the model's bf16): every layer caches the MLA latent
/// and the sparse-attention indexer's key. Latent (vLLM `MLAAttentionSpec`): kv_lora_rank
/// 512 + qk_rope_head_dim 64 = 576 elements × 2 bytes = 1,152. Indexer key (vLLM
/// deepseek_v2.py l.660–671, `DeepseekV32IndexerCache`): index_head_dim 128 FP8 bytes + one
/// F32 scale per 128-element block = 128 + 4 = 132. 1,284 bytes a layer; 61 layers = 78,324.
#[test]
fn deepseek_v3_2_caches_latent_and_indexer_key_per_token() {
    let m = memory_of("nvidia/DeepSeek-V3.2-NVFP4", r#"{"context": 4096}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 61 * (1_152 + 132));
    assert_eq!(m.kv_cache.len(), 1);
    let group = &m.kv_cache[0];
    assert_eq!(
        (group.kind, group.layers, group.bytes_per_token_per_layer),
        (CacheKind::MlaIndexer, 61, Some(1_284))
    );
    assert_eq!(m.state_bytes_per_sequence, 0);
    // The MTP layer is one more layer of the same kind when asked for.
    let with_mtp = memory_of(
        "nvidia/DeepSeek-V3.2-NVFP4",
        r#"{"context": 4096, "include_mtp": true}"#,
    );
    assert_eq!(with_mtp.kv_cache_bytes_per_token, 62 * 1_284);
}

/// An FP8 KV cache halves the full-attention layers' bytes but not the DeltaNet state: vLLM
/// keeps that in the model's dtype (conv) and the config's `mamba_ssm_dtype` (recurrent).
#[test]
fn a_kv_dtype_leaves_the_recurrent_state_in_the_models_dtype() {
    let bf16 = memory_of("Qwen/Qwen3.5-35B-A3B", r#"{"context": 4096}"#);
    let fp8 = memory_of("Qwen/Qwen3.5-35B-A3B", r#"{"context": 4096, "kv_dtype": "fp8"}"#);
    assert_eq!(fp8.kv_cache_bytes_per_token, bf16.kv_cache_bytes_per_token / 2);
    assert_eq!(fp8.state_bytes_per_sequence, bf16.state_bytes_per_sequence);
    assert_eq!(fp8.state_bytes_per_sequence, 64_389_120);
}
