//! KV cache of Gemma 4 (two attention geometries, one per layer kind) and Llama 4 (chunked
//! local attention beside full NoPE layers), worked by hand from each packed fixture's config.
//!
//! The formula throughout is vLLM 0.19's page size for an attention layer,
//! `AttentionSpec.real_page_size_bytes = 2 × block_size × num_kv_heads × head_size × dtype
//! bytes` (`vllm/v1/kv_cache_interface.py` l.80-87): per token and layer, 2 (K and V) ×
//! KV heads × head_dim × dtype bytes. Sliding layers (`SlidingWindowSpec`) and chunked
//! layers (`ChunkedLocalAttentionSpec`, l.229-244) use the same page and keep at most their
//! window / chunk of tokens a sequence, so past it they stop growing.

use preflight_plan::CacheKind;

use crate::support::memory_of;

const GEMMA4: &str = "google/gemma-4-31B-it";
const SCOUT: &str = "meta-llama/Llama-4-Scout-17B-16E-Instruct";

/// Gemma-4-31B (`text_config`): dtype bfloat16 → 2 bytes.
/// Sliding layers (50, window 1024): num_key_value_heads 16 × head_dim 256:
///   2 × 16 × 256 × 2 = 16,384 bytes a token a layer.
/// Full layers (10): `attention_k_eq_v` → num_global_key_value_heads 4 × global_head_dim 512.
///   The checkpoint has no v_proj there, but vLLM's gemma4.py loads the K weights into both
///   the K and V slots of `QKVParallelLinear` and its `Attention` caches both:
///   2 × 4 × 512 × 2 = 8,192 bytes a token a layer.
const GEMMA4_SLIDING_PER_TOKEN: u64 = 2 * 16 * 256 * 2;
const GEMMA4_FULL_PER_TOKEN: u64 = 2 * 4 * 512 * 2;

#[test]
fn gemma_4_31b_splits_sliding_and_full_layers_by_their_own_geometry() {
    assert_eq!(GEMMA4_SLIDING_PER_TOKEN, 16_384);
    assert_eq!(GEMMA4_FULL_PER_TOKEN, 8_192);
    for context in [1u64, 1000, 1024, 1025, 8192, 262_144] {
        let m = memory_of(GEMMA4, &format!(r#"{{"context": {context}}}"#));
        assert_eq!(m.kv_dtype, "bf16");
        let sliding = m
            .kv_cache
            .iter()
            .find(|g| g.kind == CacheKind::Sliding)
            .expect("sliding");
        let full = m.kv_cache.iter().find(|g| g.kind == CacheKind::Full).expect("full");
        assert_eq!((sliding.layers, sliding.window), (50, Some(1024)));
        assert_eq!(sliding.bytes_per_token_per_layer, Some(GEMMA4_SLIDING_PER_TOKEN));
        // vLLM keeps a window less one plus a batch of tokens, in whole pages plus one.
        let kept = (1023 + 8192u64).min(context).div_ceil(16) * 16 + 16;
        assert_eq!(sliding.tokens_per_sequence, Some(kept));
        assert_eq!(full.layers, 10);
        assert_eq!(full.bytes_per_token_per_layer, Some(GEMMA4_FULL_PER_TOKEN));
        // Only the 10 full layers grow past the window: 10 × 8,192 = 81,920 a token.
        assert_eq!(m.kv_cache_bytes_per_token, 81_920);
        assert_eq!(
            m.model_cache_bytes(),
            10 * 8_192 * context + 50 * 16_384 * context.min(1024),
            "at {context}"
        );
    }
    // At 8,192 tokens: 10 × 8,192 × 8,192 = 671,088,640 (full) + 50 × 16,384 × 1,024 =
    // 838,860,800 (sliding, capped) = 1,509,949,440 bytes.
    assert_eq!(
        memory_of(GEMMA4, r#"{"context": 8192}"#).model_cache_bytes(),
        1_509_949_440
    );
    // At the full 262,144: 81,920 × 262,144 = 21,474,836,480 (20 GiB) + 838,860,800.
    assert_eq!(
        memory_of(GEMMA4, r#"{"context": 262144}"#).model_cache_bytes(),
        22_313_697_280
    );
}

#[test]
fn gemma_4_31b_full_layers_hold_a_whole_kv_head_per_rank_at_tp_8() {
    // vLLM `get_num_kv_heads`: max(1, kv / tp). At tp 8, sliding layers hold 16 / 8 = 2 heads:
    // 2 × 2 × 256 × 2 = 2,048 bytes a token; full layers max(1, 4 / 8) = 1 head:
    // 2 × 1 × 512 × 2 = 2,048 bytes a token. At 8,192 tokens:
    // 10 × 2,048 × 8,192 + 50 × 2,048 × 1,024 = 167,772,160 + 104,857,600 = 272,629,760
    // (the cells held, as SGLang counts them; vLLM pages a window plus a batch).
    let m = memory_of(GEMMA4, r#"{"context": 8192, "tensor_parallel": 8, "engine": "sglang"}"#);
    assert_eq!(m.per_rank.expect("tp 8 splits gemma-4-31B").kv_cache_bytes, 272_629_760);
}

/// Llama-4-Scout (`text_config`): torch_dtype bfloat16; every layer 8 KV heads × head_dim 128:
/// 2 × 8 × 128 × 2 = 4,096 bytes a token a layer. `no_rope_layers` is absent, so every 4th
/// layer (3, 7, …, 47) is a NoPE full-attention layer: 12 full layers; the other 36 are
/// chunked (`attention_chunk_size` 8192).
const SCOUT_PER_TOKEN: u64 = 2 * 8 * 128 * 2;

#[test]
fn llama_4_scout_chunked_layers_stop_growing_at_8192() {
    assert_eq!(SCOUT_PER_TOKEN, 4_096);
    let at = |context: u64| memory_of(SCOUT, &format!(r#"{{"context": {context}}}"#));
    // 4k: below the chunk all 48 layers grow: 48 × 4,096 × 4,096 = 805,306,368.
    let m4k = at(4096);
    assert_eq!(m4k.model_cache_bytes(), 805_306_368);
    // 8k: exactly one chunk, still all 48: 48 × 4,096 × 8,192 = 1,610,612,736.
    let m8k = at(8192);
    assert_eq!(m8k.model_cache_bytes(), 1_610_612_736);
    // 100k: 12 full × 4,096 × 100,000 = 4,915,200,000, plus 36 chunked × 4,096 × 8,192 =
    // 1,207,959,552 (capped at the chunk) = 6,123,159,552.
    let m100k = at(100_000);
    assert_eq!(m100k.model_cache_bytes(), 6_123_159_552);
    // Only the 12 full layers grow with the context: 12 × 4,096 = 49,152 bytes a token.
    for m in [&m4k, &m8k, &m100k] {
        assert_eq!(m.kv_cache_bytes_per_token, 49_152);
        let chunked = m
            .kv_cache
            .iter()
            .find(|g| g.kind == CacheKind::Chunked)
            .expect("chunked");
        let full = m.kv_cache.iter().find(|g| g.kind == CacheKind::Full).expect("full");
        assert_eq!((chunked.layers, chunked.window), (36, Some(8192)));
        assert_eq!((full.layers, full.window), (12, None));
        assert_eq!(chunked.bytes_per_token_per_layer, Some(SCOUT_PER_TOKEN));
        assert_eq!(full.bytes_per_token_per_layer, Some(SCOUT_PER_TOKEN));
    }
    assert_eq!(m100k.kv_cache[0].kind, CacheKind::Chunked);
    assert_eq!(
        m100k
            .kv_cache
            .iter()
            .find(|g| g.kind == CacheKind::Chunked)
            .expect("chunked")
            .tokens_per_sequence,
        // vLLM keeps a chunk plus a batch of tokens (`ChunkedLocalAttentionSpec`): 8,192 + 8,192.
        Some(16_384)
    );
    // One token past the chunk adds only the full layers' 49,152 bytes.
    assert_eq!(at(8193).model_cache_bytes() - m8k.model_cache_bytes(), 49_152);
}
