//! llama.cpp's `deepseek2` (DeepSeek-V3, multi-head latent attention) and `phi3` (Phi-3-mini)
//! GGUFs as its loader reads them (llama-cpp-python 0.3.36), written as the converter writes
//! them today: DeepSeek's `kv_b_proj` split into `attn_k_b` / `attn_v_b` with
//! `attention.key_length_mla` / `value_length_mla`, no MTP block; Phi-3's fused `attn_qkv`
//! and `ffn_up` (gate and up). Ground truth: `packed/expected-release-day.json` (the
//! header-only fixtures `fixtures/tools/mkgguf_release.py` writes); the KV cache hand-worked
//! from llama.cpp's formulas.

use preflight_formats::facts::Content;
use preflight_formats::gguf::{TensorInfo, Value as GgufValue};
use preflight_plan::{Attention, CacheKind, Component, Verdict, plan};
use serde_json::Value;

use crate::support::{blocking, edited, fixtures, hub, options, release_day_row, with_kv};

/// [`crate::support::plans_exactly`], under llama.cpp.
fn plans_exactly(repo: &str, file: &str, json: &str) -> Verdict {
    let v = crate::support::plans_exactly(repo, file, json);
    assert_eq!(
        v.memory.as_ref().expect("memory").engine,
        preflight_plan::Engine::LlamaCpp,
        "{repo}"
    );
    v
}

const DEEPSEEK: &str = "deepseek-ai/DeepSeek-V3-GGUF";
const DEEPSEEK_FILE: &str = "DeepSeek-V3-Q8_0.gguf";
const PHI3: &str = "microsoft/Phi-3-mini-4k-instruct-GGUF";
const PHI3_FILE: &str = "Phi-3-mini-4k-instruct-Q8_0.gguf";

/// Refused with `config.unsupported_value` on `key`, and not planned at all.
fn refused_on(v: &Verdict, key: &str) {
    assert!(!v.admissible, "{key}");
    assert!(
        blocking(v)
            .iter()
            .any(|(code, subject, _)| code == "config.unsupported_value" && subject == key),
        "{key}: {:#?}",
        blocking(v)
    );
    assert!(v.artifacts[0].architecture.is_none(), "{key}: refused, not planned");
}

/// ggml's type ids (ggml.h `enum ggml_type`).
const GGML_F32: u32 = 0;
const GGML_Q8_0: u32 = 8;

/// DeepSeek-V3 as the current converter writes it (`deepseek2`, MLA): 61 latent-attention
/// blocks, 3 dense then 58 MoE (256 routed, 8 active, 1 shared), no MTP block (the converter
/// drops layer 61). The stored elements less the 58 × 256 `exp_probs_b.bias` router biases
/// (buffers) are the safetensors checkpoint's transformers count, exactly: `kv_b_proj` split
/// into `attn_k_b` + `attn_v_b` keeps its 128 × 256 × 512 elements.
///
/// The cache, from llama.cpp's own formulas (llama-cpp-python 0.3.36, `src/`):
/// - `is_mla()`: `key_length_mla` 192 and `value_length_mla` 128 both set
///   (llama-hparams.cpp:298-303), so the cache holds K only: `has_v = !is_mla`
///   (llama-kv-cache.cpp:231).
/// - K's row is `n_embd_k_gqa(il)` = `n_embd_head_k` × `n_head_kv` (llama-hparams.cpp:156-160,
///   llama-kv-cache.cpp:209, 233) = `key_length` 576 × `head_count_kv` 1: the converter writes
///   kv_lora_rank + qk_rope_head_dim = 512 + 64 and one head (conversion/deepseek.py:326,
///   349-353), the latent and rope key the graph writes (`Kcur`, models/deepseek2.cpp:572-576).
///   `n_embd_v_gqa` (value_length 512 × 1) sizes nothing: V is a view of K's latent.
/// - f16: 576 × 2 B = 1,152 B a token a block; × 61 blocks = 70,272 B a token.
/// - 4,096 tokens, one sequence: 4,096 cells (already a multiple of 256) × 1 stream ×
///   70,272 B = 287,834,112 B; two sequences of 8,192: 8,192 × 2 streams × 70,272 =
///   1,151,336,448 B.
#[test]
fn deepseek2_gguf_plans_exactly_with_the_latent_cache() {
    let want = release_day_row(&format!("{DEEPSEEK}/{DEEPSEEK_FILE}"));
    let v = plans_exactly(DEEPSEEK, DEEPSEEK_FILE, r#"{"context": 4096}"#);
    let a = &v.artifacts[0];
    // The count the bundled safetensors checkpoint has (fixtures/expected.json).
    let path = fixtures().join("expected.json");
    let st: Value = serde_json::from_slice(&std::fs::read(path).expect("expected.json")).expect("json");
    assert_eq!(
        want["transformers_num_parameters"],
        st["deepseek-ai/DeepSeek-V3"]["transformers_num_parameters"]
    );
    assert_eq!(a.parameters.total, 671_026_404_352);
    assert_eq!(
        want["tensor_elements"].as_u64(),
        Some(671_026_404_352 + 58 * 256),
        "the stored router biases"
    );
    assert_eq!(a.parameters.by_component.get(&Component::Mtp), None);
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!(
        (arch.family.as_str(), arch.model_type.as_str()),
        ("deepseek", "deepseek_v3")
    );
    assert_eq!((arch.layers, arch.mtp_layers, arch.heads), (61, 0, 128));
    assert!(arch.attention.iter().all(|k| *k
        == Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64
        }));
    let moe = arch.moe.as_ref().expect("moe");
    assert_eq!((moe.experts, moe.active, moe.shared), (256, 8, 1));
    assert_eq!(moe.dense_layers, [0, 1, 2]);
    assert_eq!(moe.expert_intermediate_size, Some(2048));
    assert_eq!(arch.intermediate_size, Some(18_432));
    let m = a.memory.as_ref().expect("memory");
    assert_eq!(m.kv_dtype, "f16");
    assert_eq!(m.kv_cache_bytes_per_token, 70_272);
    let groups: Vec<(CacheKind, u64, Option<u64>)> = m
        .kv_cache
        .iter()
        .map(|g| (g.kind, g.layers, g.bytes_per_token_per_layer))
        .collect();
    assert_eq!(groups, [(CacheKind::Mla, 61, Some(1_152))]);
    assert_eq!(m.kv_cache_bytes, 287_834_112);
    let two = plan(&[hub(DEEPSEEK)], &options(r#"{"context": 8192, "sequences": 2}"#)).expect("valid options");
    assert_eq!(two.memory.as_ref().expect("memory").kv_cache_bytes, 1_151_336_448);
}

/// A `deepseek2` file from before the converter split `kv_b_proj` (one `attn_kv_b` a block, no
/// `key_length_mla` / `value_length_mla`) declares `kv_lora_rank` too, but llama.cpp runs it
/// without MLA (`is_mla()` false, llama-hparams.cpp:298-303; `wkv_b` loaded,
/// models/deepseek2.cpp:114-120): K and V of the decompressed heads, `key_length` ×
/// `head_count_kv` and `value_length` × `head_count_kv` a token (llama-kv-cache.cpp:209-210,
/// 233-234). The reader once took `kv_lora_rank` alone for MLA and planned this cache at the
/// latent's 1,152 B a block. Here, the fixture rewritten to that form: 128 KV heads of 192
/// (K) and 128 (V): 128 × (192 + 128) × 2 B = 81,920 B a token a block, × 61 = 4,997,120 B.
#[test]
fn a_pre_split_deepseek2_gguf_caches_full_k_and_v_as_llama_cpp_runs_it() {
    let facts = edited(
        DEEPSEEK,
        &[
            ("deepseek2.attention.key_length_mla", None),
            ("deepseek2.attention.value_length_mla", None),
            ("deepseek2.attention.head_count_kv", Some(GgufValue::UInt(128))),
            ("deepseek2.attention.key_length", Some(GgufValue::UInt(192))),
            ("deepseek2.attention.value_length", Some(GgufValue::UInt(128))),
        ],
        |tensors| {
            tensors.retain(|t| !t.name.ends_with(".attn_v_b.weight"));
            for t in tensors.iter_mut().filter(|t| t.name.ends_with(".attn_k_b.weight")) {
                // `attn_kv_b` [kv_lora_rank, n_head × (qk_nope + v_head_dim)].
                t.name = t.name.replace("attn_k_b", "attn_kv_b");
                t.dims = vec![512, 128 * 256];
                assert_eq!(t.ggml_type, GGML_Q8_0);
            }
        },
    );
    let v = plan(&[facts], &options(r#"{"context": 4096}"#)).expect("valid options");
    assert!(v.admissible, "{:#?}", blocking(&v));
    let a = &v.artifacts[0];
    assert_eq!(a.parameters.total, 671_026_404_352, "the same elements, unsplit");
    let arch = a.architecture.as_ref().expect("architecture");
    assert!(arch.attention.iter().all(|k| *k == Attention::Full));
    assert_eq!((arch.kv_heads, arch.head_dim, arch.v_head_dim), (128, 192, Some(128)));
    let m = a.memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 4_997_120);
    assert_eq!(m.kv_cache[0].bytes_per_token_per_layer, Some(81_920));
}

/// MLA keys llama.cpp cannot run, or whose cache the planner would not size as llama.cpp
/// does, are refused with the key named: one of the two `*_mla` keys without the other
/// (`is_mla()` wants both), a `key_length` that is not the latent + rope (the K row llama.cpp
/// allocates would not be what its graph writes), more than one KV head (the cache is sized
/// by `head_count_kv`, the graph writes one latent head), and a rope as wide as the head
/// (models/deepseek2.cpp:75-77 asserts a non-rope part).
#[test]
fn mla_keys_llama_cpp_cannot_run_are_refused() {
    // (key edited, its new value, the key the refusal names), all under `deepseek2.attention.`.
    let cases: [(&str, Option<u64>, &str); 5] = [
        ("value_length_mla", None, "key_length_mla"),
        ("key_length_mla", None, "value_length_mla"),
        ("key_length", Some(192), "key_length"),
        ("head_count_kv", Some(128), "head_count_kv"),
        ("key_length_mla", Some(64), "key_length_mla"),
    ];
    for (key, value, subject) in cases {
        let key = format!("deepseek2.attention.{key}");
        let v = with_kv(DEEPSEEK, &[(&key, value.map(GgufValue::UInt))], "{}");
        let subject = format!("deepseek2.attention.{subject}");
        refused_on(&v, &subject);
    }
}

/// `block_count` counts the nextn (MTP) blocks the converter appends (GLM-4.7-Flash's
/// `deepseek2` files): llama.cpp's main stack is `block_count − nextn_predict_layers`
/// (llama-hparams.cpp:348-350). Declaring one makes block 60 the MTP block: 60 latent-attention
/// blocks cached, block 60's weights counted as MTP. A file of nothing but nextn blocks (the
/// converter's `--mtp` draft head) is refused.
#[test]
fn deepseek2_nextn_blocks_are_counted_in_block_count() {
    let key = "deepseek2.nextn_predict_layers";
    let v = with_kv(DEEPSEEK, &[(key, Some(GgufValue::UInt(1)))], r#"{"context": 4096}"#);
    assert!(v.admissible, "{:#?}", blocking(&v));
    let a = &v.artifacts[0];
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!((arch.layers, arch.mtp_layers), (60, 1));
    let facts = hub(DEEPSEEK);
    let Content::Gguf { parts, .. } = &facts.content else {
        panic!("gguf")
    };
    let block_60: u64 = parts[0]
        .header
        .tensors
        .iter()
        .filter(|t| t.name.starts_with("blk.60.") && t.name != "blk.60.exp_probs_b.bias")
        .map(|t| t.dims.iter().product::<u64>())
        .sum();
    assert_eq!(a.parameters.by_component.get(&Component::Mtp), Some(&block_60));
    assert_eq!(a.parameters.total, 671_026_404_352);
    let m = a.memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 60 * 1_152);
    let v = with_kv(DEEPSEEK, &[(key, Some(GgufValue::UInt(61)))], "{}");
    refused_on(&v, key);
}

/// Phi-3-mini-4k as `phi3`: 32 blocks of full attention (32 KV heads of 96), the fused
/// `attn_qkv` and `ffn_up`; the stored elements are the safetensors checkpoint's count, exactly.
///
/// The converter writes the config's `sliding_window` (2047), and llama.cpp's loader turns it
/// off (`swa_type = LLAMA_SWA_TYPE_NONE`, `n_swa = 0`, models/phi3.cpp:13-24): every block
/// caches the whole context. K and V: `n_embd_k_gqa` = `n_embd_v_gqa` = 96 × 32 = 3,072
/// (llama-hparams.cpp:156-166), f16: 2 × 3,072 × 2 B = 12,288 B a token a block, × 32 =
/// 393,216 B a token; 4,096 tokens: 4,096 cells × 393,216 = 1,610,612,736 B. Read as a
/// 2,047-token window (as it once was), the cache would have been 2,560 cells
/// (pad(2,047 + 512), llama-kv-cache-iswa.cpp:73) — 1,006,632,960 B, 37.5% short.
#[test]
fn phi3_gguf_plans_exactly_with_full_attention() {
    let facts = hub(PHI3);
    let Content::Gguf { parts, .. } = &facts.content else {
        panic!("gguf")
    };
    assert_eq!(
        parts[0].header.kv.get("phi3.attention.sliding_window"),
        Some(&GgufValue::UInt(2047))
    );
    let v = plans_exactly(PHI3, PHI3_FILE, r#"{"context": 4096}"#);
    let a = &v.artifacts[0];
    assert_eq!(a.parameters.total, 3_821_079_552);
    assert!(
        !a.findings.iter().any(|f| f.subject.contains("sliding_window")),
        "{:#?}",
        a.findings
    );
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!((arch.family.as_str(), arch.model_type.as_str()), ("phi3", "phi3"));
    assert_eq!(
        (arch.layers, arch.heads, arch.kv_heads, arch.head_dim),
        (32, 32, 32, 96)
    );
    assert_eq!(arch.intermediate_size, Some(8192));
    let m = a.memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 393_216);
    let groups: Vec<(CacheKind, u64, Option<u64>)> = m
        .kv_cache
        .iter()
        .map(|g| (g.kind, g.layers, g.tokens_per_sequence))
        .collect();
    assert_eq!(groups, [(CacheKind::Full, 32, Some(4096))]);
    assert_eq!(m.kv_cache_bytes, 1_610_612_736);
}

/// Phi-3's fused `ffn_up` is sized by twice `feed_forward_length`: a width that disagrees is
/// refused with the tensor named; K and V widths that differ (the graph asserts they do not)
/// are refused with the key named.
#[test]
fn phi3_values_llama_cpp_would_not_load_are_refused() {
    let v = with_kv(
        PHI3,
        &[("phi3.feed_forward_length", Some(GgufValue::UInt(16_384)))],
        "{}",
    );
    assert!(!v.admissible);
    let found = blocking(&v);
    assert!(
        found
            .iter()
            .any(|(code, subject, detail)| code == "config.shape_mismatch"
                && subject == "blk.0.ffn_up.weight"
                && detail.contains("2 × feed_forward_length")),
        "{found:#?}"
    );
    let v = with_kv(
        PHI3,
        &[("phi3.attention.value_length", Some(GgufValue::UInt(64)))],
        "{}",
    );
    refused_on(&v, "phi3.attention.value_length");
}

/// Phi-3-128k and Phi-3.5 files carry LongRoPE tables (`rope_factors_long` / `_short`, n_rot/2
/// F32 each, models/phi3.cpp:54-55): placed as buffers, not parameters, not a reason to refuse
/// (unplaced, they refused the file).
#[test]
fn phi3_longrope_tables_are_buffers() {
    let facts = edited(PHI3, &[], |tensors| {
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            tensors.push(TensorInfo {
                name: name.to_owned(),
                dims: vec![48],
                ggml_type: GGML_F32,
                offset: 0,
            });
        }
    });
    let v = plan(&[facts], &options(r#"{"context": 4096}"#)).expect("valid options");
    assert!(v.admissible, "{:#?}", blocking(&v));
    let a = &v.artifacts[0];
    assert_eq!(a.parameters.total, 3_821_079_552);
    assert_eq!(a.tensor_elements_by_dtype["F32"], 199_680 + 96);
    // llama.cpp loads them with the weights: 96 F32 values more than the file without them.
    let plain = plan(&[hub(PHI3)], &options(r#"{"context": 4096}"#)).expect("valid options");
    assert_eq!(a.weights_bytes, plain.artifacts[0].weights_bytes + 96 * 4);
}
