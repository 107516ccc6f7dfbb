//! The KV cache by attention kind, worked by hand on each bundled checkpoint's real config.

use preflight_plan::CacheKind;

use crate::support::{GIB, KIB, codes, memory_of, plan_with};

/// One row per checkpoint: KV bytes one more token adds (past every window), worked from the
/// config, and the layers that stop growing with their window.
struct Row {
    repo: &'static str,
    per_token: u64,
    sliding: Option<(u64, u64, u64)>, // (layers, window, bytes per token per layer)
}

const ROWS: &[Row] = &[
    // GQA: 32 layers × 2 (K, V) × 8 kv heads × 128 head_dim × 2 bytes (bf16) = 128 KiB.
    Row {
        repo: "meta-llama/Llama-3.1-8B",
        per_token: 32 * 2 * 8 * 128 * 2,
        sliding: None,
    },
    // head_dim is declared 128, where hidden/heads = 1024/16 would say 64:
    // 28 × 2 × 8 × 128 × 2 = 114,688 (not 57,344).
    Row {
        repo: "Qwen/Qwen3-0.6B",
        per_token: 28 * 2 * 8 * 128 * 2,
        sliding: None,
    },
    // 36 × 2 × 8 × 128 × 2 = 147,456.
    Row {
        repo: "Qwen/Qwen3-8B",
        per_token: 36 * 2 * 8 * 128 * 2,
        sliding: None,
    },
    // 48 × 2 × 4 × 128 × 2 = 98,304: MoE changes nothing about attention.
    Row {
        repo: "Qwen/Qwen3-30B-A3B",
        per_token: 48 * 2 * 4 * 128 * 2,
        sliding: None,
    },
    // MLA caches one latent per token and layer, not per head:
    // 61 × (512 kv_lora_rank + 64 qk_rope_head_dim) × 2 = 70,272.
    Row {
        repo: "deepseek-ai/DeepSeek-V3",
        per_token: 61 * (512 + 64) * 2,
        sliding: None,
    },
    // 12 full layers grow: 12 × 2 × 8 × 64 × 2 = 24,576; 12 sliding layers stop at 128 tokens.
    Row {
        repo: "openai/gpt-oss-20b",
        per_token: 12 * 2 * 8 * 64 * 2,
        sliding: Some((12, 128, 2 * 8 * 64 * 2)),
    },
    // sliding_window is null: every layer is full. 32 × 2 × 8 × 128 × 2 = 128 KiB.
    Row {
        repo: "mistralai/Mixtral-8x7B-v0.1",
        per_token: 32 * 2 * 8 * 128 * 2,
        sliding: None,
    },
    // 4 full layers of 26 (every sixth): 4 × 2 × 1 kv head × 256 head_dim × 2 = 4,096; the
    // other 22 stop at 512 tokens.
    Row {
        repo: "google/gemma-3-1b-it",
        per_token: 4 * 2 * 256 * 2,
        sliding: Some((22, 512, 2 * 256 * 2)),
    },
    // sliding_window 2047 < 4096 applies to every layer, so nothing grows past it:
    // 32 layers × 2 × 32 × 96 (3072/32) × 2 = 12,288 bytes a layer, capped at 2,047 tokens.
    Row {
        repo: "microsoft/Phi-3-mini-4k-instruct",
        per_token: 0,
        sliding: Some((32, 2047, 2 * 32 * 96 * 2)),
    },
];

#[test]
fn kv_per_token_and_windows_match_the_hand_worked_figures() {
    for row in ROWS {
        for context in [1u64, 100, 128, 129, 512, 513, 2047, 2048, 4096] {
            let m = memory_of(row.repo, &format!(r#"{{"context": {context}}}"#));
            assert_eq!(m.kv_cache_bytes_per_token, row.per_token, "{}", row.repo);
            let full_layers_bytes = row.per_token * context;
            let sliding_bytes = row
                .sliding
                .map_or(0, |(layers, window, per)| layers * per * window.min(context));
            assert_eq!(
                m.model_cache_bytes(),
                full_layers_bytes + sliding_bytes,
                "{} at {context}",
                row.repo
            );
            let groups: u64 = m.kv_cache.iter().map(|g| g.bytes).sum();
            assert_eq!(groups, m.kv_cache_bytes, "{}: the working adds up", row.repo);
        }
    }
}

#[test]
fn llama_3_1_8b_is_128_kib_a_token_and_16_gib_at_full_context() {
    let m = memory_of("meta-llama/Llama-3.1-8B", r#"{"sequences": 1}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 128 * KIB);
    assert_eq!(m.context, 131_072);
    assert_eq!(m.kv_cache_bytes, 16 * GIB);
    assert_eq!(m.kv_dtype, "bf16");
}

#[test]
fn gpt_oss_sliding_layers_stop_growing_at_their_window() {
    let at = |context: u64| memory_of("openai/gpt-oss-20b", &format!(r#"{{"context": {context}}}"#));
    let (m128, m129, m1000) = (at(128), at(129), at(1000));
    // Below the window both kinds grow; past it only the 12 full layers do.
    let cache = |m: &preflight_plan::ArtifactMemory| m.model_cache_bytes();
    assert_eq!(cache(&m129) - cache(&m128), 24_576);
    assert_eq!(cache(&m1000) - cache(&m129), 24_576 * 871);
    assert_eq!(cache(&at(2)) - cache(&at(1)), 2 * 24_576);
    let sliding = m1000
        .kv_cache
        .iter()
        .find(|g| g.kind == CacheKind::Sliding)
        .expect("sliding group");
    assert_eq!((sliding.layers, sliding.window), (12, Some(128)));
    // vLLM keeps `window − 1 + max_num_batched_tokens` of a request, in whole pages plus one:
    // ⌈min(127 + 8,192, 1,000) / 16⌉ + 1 = 64 pages of 16 tokens.
    assert_eq!(sliding.tokens_per_sequence, Some(1_024));
}

#[test]
fn deepseek_v3_mla_caches_the_latent_whole_on_every_rank() {
    let m = memory_of("deepseek-ai/DeepSeek-V3", r#"{"context": 4096, "tensor_parallel": 8}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 70_272);
    assert_eq!(m.kv_cache[0].kind, CacheKind::Mla);
    let rank = m.per_rank.clone().expect("128 heads split 8 ways");
    assert_eq!(
        rank.kv_cache_bytes,
        m.model_cache_bytes(),
        "MLA's latent is not split by heads"
    );
    assert_eq!(
        m.kv_cache_bytes,
        8 * rank.kv_cache_bytes,
        "every rank holds the whole latent"
    );
}

#[test]
fn gqa_kv_splits_by_kv_heads_and_replicates_below_one_head_a_rank() {
    let at = |tp: u64| {
        memory_of(
            "meta-llama/Llama-3.1-8B",
            &format!(r#"{{"context": 1024, "tensor_parallel": {tp}}}"#),
        )
    };
    let whole = at(1).kv_cache_bytes;
    assert_eq!(at(2).per_rank.expect("tp 2").kv_cache_bytes, whole / 2);
    assert_eq!(at(8).per_rank.expect("tp 8").kv_cache_bytes, whole / 8);
    // 8 KV heads over 16 ranks: each rank still holds one head (vLLM replicates).
    assert_eq!(at(16).per_rank.expect("tp 16").kv_cache_bytes, whole / 8);
}

#[test]
fn kv_dtype_and_sequences_scale_the_cache() {
    let base = memory_of("Qwen/Qwen3-8B", r#"{"context": 4096}"#);
    let fp8 = memory_of("Qwen/Qwen3-8B", r#"{"context": 4096, "kv_dtype": "fp8"}"#);
    // q8_0 is a llama.cpp cache type (vLLM refuses it).
    let q8 = memory_of(
        "Qwen/Qwen3-8B",
        r#"{"context": 4096, "kv_dtype": "q8_0", "engine": "llama.cpp"}"#,
    );
    let four = memory_of("Qwen/Qwen3-8B", r#"{"context": 4096, "sequences": 4}"#);
    assert_eq!(fp8.kv_cache_bytes * 2, base.kv_cache_bytes);
    // q8_0: 1024 elements a head row set = 32 blocks × 34 bytes, against 2048 bytes in bf16.
    assert_eq!(q8.kv_cache_bytes, base.kv_cache_bytes / 2048 * 32 * 34);
    assert_eq!(four.kv_cache_bytes, 4 * base.kv_cache_bytes);
    assert_eq!(fp8.kv_dtype, "fp8");
}

#[test]
fn the_model_dtype_is_inferred_when_the_config_declares_none() {
    // gpt-oss-20b's config has no torch_dtype; its unquantized tensors are BF16.
    let v = plan_with(&["openai/gpt-oss-20b"], r#"{"sequences": 1}"#);
    assert!(codes(&v, 0).contains(&"memory.dtype_inferred".to_owned()));
    assert_eq!(v.artifacts[0].memory.as_ref().expect("memory").kv_dtype, "bf16");
    assert!(v.admissible, "an inferred dtype is information, not a defect");
}
