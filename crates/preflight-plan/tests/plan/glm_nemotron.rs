//! Hand-worked cache figures for the Mamba2 hybrid (Nemotron-H), the DSA-indexed MLA stack
//! (GLM-5.2) and the GQA MoE stacks with MTP layers (GLM-4.5-Air, MiniMax-M2.7), from each
//! packed fixture's real config.

use preflight_plan::{ArtifactMemory, CacheKind, KvCacheGroup, plan};
use serde_json::json;

use crate::support::{codes, hub, memory_of, options, plan_with};

fn group(m: &ArtifactMemory, kind: CacheKind) -> &KvCacheGroup {
    m.kv_cache
        .iter()
        .find(|g| g.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} group in {:#?}", m.kv_cache))
}

const NEMOTRON: &str = "nvidia/Nemotron-H-56B-Base-8K";

// Nemotron-H-56B-Base-8K, from its config.json: mamba_num_heads 256, mamba_head_dim 64,
// ssm_state_size 256, n_groups 8, conv_kernel 4, torch_dtype bfloat16, and no
// `mamba_ssm_cache_dtype`.
//
// vLLM 0.19.0 `MambaStateShapeCalculator.mamba2_state_shape` (mamba_utils.py l.127-151):
//   conv_dim        = intermediate (heads × head_dim = 16,384) + 2 × n_groups × state (4,096)
//                   = 20,480
//   conv state      = (conv_kernel − 1) × conv_dim = 3 × 20,480 = 61,440 elements
//   temporal state  = heads × head_dim × state = 256 × 64 × 256 = 4,194,304 elements
// Dtypes (`_mamba_state_dtype`, l.55-67): the conv state in the model/KV dtype (bf16, 2
// bytes); the temporal (SSM) state in `mamba_ssm_cache_dtype`, which
// `NemotronHForCausalLMConfig.verify_and_update_config` (models/config.py l.483-500) sets to
// `getattr(hf_config, "mamba_ssm_cache_dtype", "float16")` — float16 here (2 bytes).
//   per layer = 61,440 × 2 + 4,194,304 × 2 = 122,880 + 8,388,608 = 8,511,488 bytes
//   54 Mamba blocks (`M` in hybrid_override_pattern) = 459,620,352 bytes per sequence.
// The 10 attention blocks (`*`): 2 (K, V) × 8 KV heads × 128 head_dim × 2 = 4,096 bytes per
// token each, 40,960 a token in all; the 54 MLP blocks (`-`) cache nothing.
const MAMBA_CONV_BYTES: u64 = 3 * (256 * 64 + 2 * 8 * 256) * 2;
const MAMBA_SSM_ELEMENTS: u64 = 256 * 64 * 256;
const MAMBA_LAYER_BYTES: u64 = 8_511_488;

#[test]
fn nemotron_h_56b_mamba_state_per_sequence_is_hand_worked() {
    assert_eq!(MAMBA_CONV_BYTES + MAMBA_SSM_ELEMENTS * 2, MAMBA_LAYER_BYTES);
    for sequences in [1u64, 3] {
        let m = memory_of(NEMOTRON, &format!(r#"{{"context": 8192, "sequences": {sequences}}}"#));
        let mamba = group(&m, CacheKind::Mamba);
        assert_eq!(mamba.layers, 54);
        assert_eq!(mamba.bytes_per_sequence_per_layer, Some(MAMBA_LAYER_BYTES));
        assert_eq!(mamba.bytes_per_token_per_layer, None, "state does not grow with tokens");
        assert!(
            mamba.bytes >= 54 * MAMBA_LAYER_BYTES * sequences,
            "vLLM pads a state page, never shrinks it"
        );
        assert_eq!(m.state_bytes_per_sequence, 459_620_352);
        assert_eq!(m.state_bytes, 459_620_352 * sequences);
        let full = group(&m, CacheKind::Full);
        assert_eq!(full.layers, 10);
        assert_eq!(full.bytes_per_token_per_layer, Some(2 * 8 * 128 * 2));
        assert_eq!(m.kv_cache_bytes_per_token, 40_960);
        assert_eq!(
            m.model_cache_bytes(),
            (40_960 * 8192 + 459_620_352) * sequences,
            "the KV cache holds the attention K/V and the Mamba state"
        );
        // MLP-only blocks cache nothing: only the 64 mixing layers appear.
        assert_eq!(m.kv_cache.iter().map(|g| g.layers).sum::<u64>(), 64);
    }
    // The state is the same at any context; only the attention layers grow.
    let short = memory_of(NEMOTRON, r#"{"context": 1}"#);
    assert_eq!(short.state_bytes_per_sequence, 459_620_352);
    assert_eq!(short.model_cache_bytes(), 40_960 + 459_620_352);
}

#[test]
fn nemotron_h_ssm_state_dtype_follows_a_pinned_mamba_ssm_cache_dtype() {
    for (dtype, bytes) in [("float32", 4u64), ("bfloat16", 2), ("float16", 2)] {
        let mut facts = hub(NEMOTRON);
        let config = facts.config.as_mut().expect("config");
        config.raw.insert("mamba_ssm_cache_dtype".into(), json!(dtype));
        let v = plan(&[facts], &options(r#"{"context": 8192}"#)).expect("valid options");
        assert!(v.admissible, "{dtype}: {:?}", codes(&v, 0));
        let m = v.artifacts[0].memory.as_ref().expect("memory");
        // The conv state stays in the model dtype; only the SSM state changes width.
        let per_layer = MAMBA_CONV_BYTES + MAMBA_SSM_ELEMENTS * bytes;
        assert_eq!(
            group(m, CacheKind::Mamba).bytes_per_sequence_per_layer,
            Some(per_layer),
            "{dtype}"
        );
        assert_eq!(m.state_bytes_per_sequence, 54 * per_layer, "{dtype}");
    }
    // float32: 122,880 + 16,777,216 = 16,900,096 bytes a layer.
    assert_eq!(MAMBA_CONV_BYTES + MAMBA_SSM_ELEMENTS * 4, 16_900_096);
}

#[test]
fn nemotron_h_layer_kinds_follow_the_block_pattern() {
    let v = plan_with(&[NEMOTRON], r#"{"context": 8192}"#);
    assert!(v.admissible, "{:?}", codes(&v, 0));
    let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!(arch.layers, 118);
    let kinds: Vec<String> = arch
        .attention
        .iter()
        .map(|a| {
            serde_json::to_value(a).expect("json")["kind"]
                .as_str()
                .expect("kind")
                .to_owned()
        })
        .collect();
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!((count("mamba"), count("full"), count("none")), (54, 10, 54));
    // `M-M-M-M*-…`: block 7 is the first attention block.
    assert_eq!(
        kinds[..9],
        [
            "mamba", "none", "mamba", "none", "mamba", "none", "mamba", "full", "none"
        ]
    );
}

// GLM-5.2, from its config.json: kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128,
// 78 layers whose `indexer_types` make 21 `full` (an own indexer) and 57 `shared` (the
// previous full layer's top-k: no indexer, no indexer cache), bf16.
//
// MLA latent per layer and token: (kv_lora_rank + qk_rope_head_dim) × 2 = 576 × 2 = 1,152.
// Indexer key per `full` layer and token, vLLM 0.19.0 deepseek_v2.py
// `DeepseekV32IndexerCache`: `head_dim = index_head_dim + index_head_dim //
// quant_block_size * 4` uint8 (an FP8 key plus one F32 scale per 128 elements)
//   = 128 + 128 / 128 × 4 = 132 bytes.
// Per token: 78 × 1,152 + 21 × 132 = 89,856 + 2,772 = 92,628 bytes.
const GLM5: &str = "zai-org/GLM-5.2";

#[test]
fn glm_5_2_latent_and_indexer_bytes_per_token_are_hand_worked() {
    let m = memory_of(GLM5, r#"{"context": 4096}"#);
    let indexed = group(&m, CacheKind::MlaIndexer);
    assert_eq!(indexed.layers, 21);
    assert_eq!(indexed.bytes_per_token_per_layer, Some(1_152 + 132));
    let shared = group(&m, CacheKind::Mla);
    assert_eq!(shared.layers, 57);
    assert_eq!(shared.bytes_per_token_per_layer, Some(1_152));
    assert_eq!(m.kv_cache_bytes_per_token, 92_628);
    assert_eq!(m.kv_cache_bytes, 92_628 * 4096);
    assert_eq!(m.state_bytes_per_sequence, 0);
    // Serving the MTP layer (layer 78, which ships its own indexer) adds one indexed layer.
    let with_mtp = memory_of(GLM5, r#"{"context": 4096, "include_mtp": true}"#);
    assert_eq!(group(&with_mtp, CacheKind::MlaIndexer).layers, 22);
    assert_eq!(with_mtp.kv_cache_bytes_per_token, 92_628 + 1_284);
}

#[test]
fn glm_5_2_indexer_schedule_derives_from_freq_and_offset_without_indexer_types() {
    // GlmMoeDsaConfig.__post_init__: "full" where max(i − offset + 1, 0) % freq == 0.
    // GLM-5.2 declares index_topk_freq 4 and index_skip_topk_offset 3: the same 21 layers.
    let mut facts = hub(GLM5);
    let config = facts.config.as_mut().expect("config");
    config.raw.remove("indexer_types");
    let v = plan(&[facts], &options(r#"{"context": 4096}"#)).expect("valid options");
    assert!(v.admissible, "{:?}", codes(&v, 0));
    let m = v.artifacts[0].memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 92_628);
}

#[test]
fn glm_4_5_air_and_minimax_m2_7_cache_as_gqa() {
    // GLM-4.5-Air: 46 layers × 2 × 8 KV heads × 128 × 2 = 188,416; its MTP layer (46) is one
    // more such layer when served.
    let m = memory_of("zai-org/GLM-4.5-Air", r#"{"context": 4096}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 46 * 2 * 8 * 128 * 2);
    let m = memory_of("zai-org/GLM-4.5-Air", r#"{"context": 4096, "include_mtp": true}"#);
    assert_eq!(m.kv_cache_bytes_per_token, 47 * 2 * 8 * 128 * 2);
    // MiniMax-M2.7: 62 × 2 × 8 × 128 × 2 = 253,952, in bf16 (the config's dtype) although the
    // weights are FP8.
    let m = memory_of("MiniMaxAI/MiniMax-M2.7", r#"{"context": 4096}"#);
    assert_eq!(m.kv_dtype, "bf16");
    assert_eq!(m.kv_cache_bytes_per_token, 62 * 2 * 8 * 128 * 2);
}

#[test]
fn minimax_m2_7_declared_mtp_modules_absent_is_a_warning_not_a_refusal() {
    let v = plan_with(&["MiniMaxAI/MiniMax-M2.7"], r#"{"context": 4096}"#);
    assert!(v.admissible, "{:?}", codes(&v, 0));
    let absent = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code.as_str() == "mtp.declared_absent")
        .expect("mtp.declared_absent");
    assert_eq!(absent.severity, preflight_plan::Severity::Warning);
    assert_eq!(absent.declared, Some(json!(3)));
}

/// A small `glm4moe` GGUF as llama.cpp's converter lays one out: `block_count` 3 = 2 decoder
/// layers + 1 nextn layer (`blk.2.*`, with its `nextn.*` tensors), layer 0 dense, layers 1-2
/// with 4 routed experts and a shared expert, q/k/v biases.
fn glm4moe_gguf() -> preflight_formats::facts::ArtifactFacts {
    use preflight_formats::facts::Content;
    use preflight_formats::gguf::{TensorInfo, Value};
    let mut facts = hub("Qwen/Qwen3-8B-GGUF");
    let Content::Gguf { parts, .. } = &mut facts.content else {
        panic!("gguf")
    };
    let header = &mut parts[0].header;
    header
        .kv
        .retain(|k, _| k.starts_with("general.") || k.starts_with("tokenizer."));
    header
        .kv
        .insert("general.architecture".into(), Value::String("glm4moe".into()));
    for (key, value) in [
        ("block_count", 3u64),
        ("context_length", 4096),
        ("embedding_length", 64),
        ("feed_forward_length", 128),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
        ("attention.key_length", 16),
        ("attention.value_length", 16),
        ("rope.dimension_count", 8),
        ("expert_count", 4),
        ("expert_used_count", 2),
        ("expert_shared_count", 1),
        ("expert_feed_forward_length", 32),
        ("leading_dense_block_count", 1),
        ("nextn_predict_layers", 1),
        ("vocab_size", 100),
    ] {
        header.kv.insert(format!("glm4moe.{key}"), Value::UInt(value));
    }
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![64, 100]),
        ("output_norm.weight".into(), vec![64]),
        ("output.weight".into(), vec![64, 100]),
    ];
    for l in 0..3 {
        let mut t = |name: &str, dims: &[u64]| tensors.push((format!("blk.{l}.{name}"), dims.to_vec()));
        t("attn_norm.weight", &[64]);
        t("post_attention_norm.weight", &[64]);
        t("attn_q.weight", &[64, 64]);
        t("attn_k.weight", &[64, 32]);
        t("attn_v.weight", &[64, 32]);
        t("attn_q.bias", &[64]);
        t("attn_k.bias", &[32]);
        t("attn_v.bias", &[32]);
        t("attn_output.weight", &[64, 64]);
        if l == 0 {
            t("ffn_gate.weight", &[64, 128]);
            t("ffn_up.weight", &[64, 128]);
            t("ffn_down.weight", &[128, 64]);
        } else {
            t("ffn_gate_inp.weight", &[64, 4]);
            t("exp_probs_b.bias", &[4]);
            t("ffn_gate_exps.weight", &[64, 32, 4]);
            t("ffn_up_exps.weight", &[64, 32, 4]);
            t("ffn_down_exps.weight", &[32, 64, 4]);
            t("ffn_gate_shexp.weight", &[64, 32]);
            t("ffn_up_shexp.weight", &[64, 32]);
            t("ffn_down_shexp.weight", &[32, 64]);
        }
        if l == 2 {
            t("nextn.eh_proj.weight", &[128, 64]);
            t("nextn.enorm.weight", &[64]);
            t("nextn.hnorm.weight", &[64]);
            t("nextn.shared_head_norm.weight", &[64]);
        }
    }
    let mut offset = 0u64;
    header.tensors = tensors
        .into_iter()
        .map(|(name, dims)| {
            let info = TensorInfo {
                name,
                ggml_type: 1, // F16
                offset,
                dims: dims.clone(),
            };
            offset += (dims.iter().product::<u64>() * 2).div_ceil(32) * 32;
            info
        })
        .collect();
    parts[0].size = Some(header.data_offset + offset);
    facts
}

#[test]
fn a_glm4moe_gguf_counts_its_nextn_block_as_mtp_and_caches_the_main_stack_only() {
    let v = plan(&[glm4moe_gguf()], &options(r#"{"context": 4096}"#)).expect("valid options");
    let a = &v.artifacts[0];
    assert!(v.admissible, "{:#?}", a.findings);
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!((arch.layers, arch.mtp_layers), (2, 1));
    assert_eq!(arch.moe.as_ref().map(|m| m.dense_layers.clone()), Some(vec![0]));
    // Layer 2 without its exp_probs_b buffer: attention 64·64·2 + 64·32·2 + 64+32+32 biases,
    // 2 norms, router 256, experts 3·2048·4, shared 3·2048, nextn 8192 + 3·64.
    let attention = 64 * 64 * 2 + 64 * 32 * 2 + 64 + 32 + 32;
    let mtp = attention + 2 * 64 + 256 + 3 * 2048 * 4 + 3 * 2048 + 8192 + 3 * 64;
    assert_eq!(
        a.parameters.by_component.get(&preflight_plan::Component::Mtp),
        Some(&mtp)
    );
    // llama.cpp caches K and V (f16) for the 2 main layers only (n_layer_kv_from_start):
    // 2 × (2 kv heads × 16 + 2 × 16) × 2 bytes = 256 bytes a token.
    let m = a.memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 2 * (2 * 16 + 2 * 16) * 2);
}
