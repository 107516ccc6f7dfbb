//! llama.cpp's hybrid GGUFs as its loader reads them (llama-cpp-python 0.3.36): Nemotron-H
//! (`nemotron_h`, `nemotron_h_moe`), Qwen3.5-MoE (`qwen35moe`, with the converter's
//! `attention.recurrent_layers`), and a current Gemma 3 GGUF carrying `rope.freq_base_swa`.
//! Ground truth: `packed/expected-release-day.json` (the header-only fixtures
//! `fixtures/tools/mkgguf_release.py` writes); recurrent state hand-worked from llama.cpp's
//! formulas. A key that disagrees with the tensors, or that llama.cpp reads and the planner
//! does not model, is refused with a finding, never planned into a number.

use preflight_formats::facts::Content;
use preflight_formats::gguf::Value as GgufValue;
use preflight_plan::{Attention, CacheKind, Component, PlanOptions, plan};

use crate::support::{blocking, hub, options, plans_exactly, release_day_row, with_kv};

const NANO: &str = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-GGUF";
const NANO_FILE: &str = "NVIDIA-Nemotron-3-Nano-30B-A3B-Q8_0.gguf";
const H56: &str = "nvidia/Nemotron-H-56B-Base-8K-GGUF";
const H56_FILE: &str = "Nemotron-H-56B-Base-8K-Q8_0.gguf";
const QWEN35MOE: &str = "Qwen/Qwen3.5-35B-A3B-GGUF";
const QWEN35MOE_FILE: &str = "Qwen3.5-35B-A3B-Q8_0.gguf";
const GEMMA3: &str = "google/gemma-3-1b-it-GGUF";
const GEMMA3_FILE: &str = "gemma-3-1b-it-Q8_0.gguf";

/// The per-block array `key` of `repo`'s header, as unsigned integers.
fn array(repo: &str, key: &str) -> Vec<u64> {
    let facts = hub(repo);
    let Content::Gguf { parts, .. } = &facts.content else {
        panic!("{repo}: not a GGUF")
    };
    match &parts[0].header.kv[key] {
        GgufValue::Array(values) => values
            .iter()
            .map(|v| match v {
                GgufValue::UInt(n) => *n,
                GgufValue::Int(n) => u64::try_from(*n).expect("unsigned"),
                other => panic!("{key}: {other:?}"),
            })
            .collect(),
        other => panic!("{key}: {other:?}"),
    }
}

fn uints(values: &[u64]) -> GgufValue {
    GgufValue::Array(values.iter().map(|n| GgufValue::UInt(*n)).collect())
}

/// Nemotron-3-Nano-30B-A3B as `nemotron_h_moe`: 23 Mamba2 blocks, 6 attention blocks, 23 MoE
/// blocks, each block's kind from the per-block `head_count_kv` / `feed_forward_length`
/// arrays; the stored elements are the safetensors checkpoint's, exactly (31,577,940,288), and
/// the parameters transformers' count (less the 23 × 128 router biases, buffers).
#[test]
fn nemotron_h_moe_gguf_plans_exactly_with_llama_cpps_hybrid_memory() {
    let v = plans_exactly(NANO, NANO_FILE, r#"{"context": 8192, "sequences": 2}"#);
    let a = &v.artifacts[0];
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!(
        arch.attention[0],
        Attention::Mamba {
            heads: 64,
            head_dim: 64,
            state_size: 128,
            conv_kernel: 4
        }
    );
    assert_eq!((arch.kv_heads, arch.head_dim, arch.heads), (2, 128, 32));
    let moe = arch.moe.as_ref().expect("moe");
    assert_eq!((moe.experts, moe.active, moe.shared), (128, 6, 1));
    assert_eq!(moe.expert_intermediate_size, Some(1856));
    assert_eq!(moe.dense_layers.len(), 52 - 23);
    assert_eq!(arch.intermediate_size, None);
    // The converter writes no rope for Nemotron-H, so context_length is its 2^20.
    assert_eq!(arch.context, 1 << 20);
    let m = a.memory.as_ref().expect("memory");
    // llama.cpp's hybrid memory (llama-model.cpp:2691-2697, 2756-2773), 2 sequences of 8,192
    // tokens (n_ctx_seq 8,192 cells, one stream a sequence):
    // - KV, f16, for the 6 attention blocks: K + V = 2 × 2 heads × 128 × 2 B = 1,024 B a token
    //   a block, 6,144 B a token; 6,144 × 8,192 × 2 streams = 100,663,296 B.
    // - r/s state, F32, one row a sequence for each of the 23 Mamba2 blocks (n_embd_r,
    //   n_embd_s, llama-hparams.cpp:229, 257): conv (ssm_d_conv − 1) × (ssm_d_inner + 2 ×
    //   ssm_n_group × ssm_d_state) = 3 × (4,096 + 2 × 8 × 128) = 18,432; SSM ssm_d_state ×
    //   ssm_d_inner = 128 × 4,096 = 524,288; (18,432 + 524,288) × 4 B = 2,170,880 B a block,
    //   49,930,240 B a sequence, 99,860,480 B for two.
    assert_eq!(m.kv_dtype, "f16");
    assert_eq!(m.kv_cache_bytes_per_token, 6_144);
    assert_eq!(m.state_bytes_per_sequence, 49_930_240);
    assert_eq!(m.state_bytes, 99_860_480);
    assert_eq!(m.kv_cache_bytes, 100_663_296 + 99_860_480);
    let groups: Vec<(CacheKind, u64)> = m.kv_cache.iter().map(|g| (g.kind, g.layers)).collect();
    assert_eq!(groups, [(CacheKind::Mamba, 23), (CacheKind::Full, 6)]);
    let mamba = &m.kv_cache[0];
    assert_eq!(mamba.bytes_per_sequence_per_layer, Some(2_170_880));
    assert_eq!(mamba.bytes_per_token_per_layer, None);
}

/// Nemotron-H-56B as `nemotron_h`: 54 Mamba2 blocks, 10 attention blocks, 54 dense relu² MLP
/// blocks (`expert_count` absent), 56,324,350,464 elements as the safetensors checkpoint.
#[test]
fn nemotron_h_dense_gguf_plans_exactly() {
    let v = plans_exactly(H56, H56_FILE, r#"{"context": 8192}"#);
    let a = &v.artifacts[0];
    let arch = a.architecture.as_ref().expect("architecture");
    assert!(arch.moe.is_none());
    assert_eq!(arch.intermediate_size, Some(32_768));
    assert_eq!(
        arch.attention[0],
        Attention::Mamba {
            heads: 256,
            head_dim: 64,
            state_size: 256,
            conv_kernel: 4
        }
    );
    let m = a.memory.as_ref().expect("memory");
    // Conv 3 × (16,384 + 2 × 8 × 256) = 61,440 and SSM 256 × 16,384 = 4,194,304 elements, F32:
    // 17,022,976 B a Mamba2 block, × 54 = 919,240,704 B a sequence. KV: 10 blocks × 2 × 8 ×
    // 128 × 2 B = 40,960 B a token.
    assert_eq!(m.state_bytes_per_sequence, 919_240_704);
    assert_eq!(m.kv_cache_bytes_per_token, 40_960);
    assert_eq!(m.kv_cache_bytes, 40_960 * 8_192 + 919_240_704);
}

/// Qwen3.5-35B-A3B as `qwen35moe`, as the converter writes it by default: the
/// `attention.recurrent_layers` it writes from `layer_types` (30 gated-DeltaNet blocks, 10
/// gated-attention blocks, routed and shared experts) and its MTP block appended (`block_count`
/// 41, `nextn_predict_layers` 1, `blk.40.nextn.*`). The text model's count exactly (the
/// safetensors total less vision and MTP), and the MTP block's exactly the safetensors MTP
/// layer's.
#[test]
fn qwen35moe_gguf_plans_exactly() {
    let want = release_day_row(&format!("{QWEN35MOE}/{QWEN35MOE_FILE}"));
    let v = plans_exactly(QWEN35MOE, QWEN35MOE_FILE, r#"{"context": 4096}"#);
    let a = &v.artifacts[0];
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!((arch.layers, arch.mtp_layers), (40, 1));
    let mtp = a.parameters.by_component.get(&Component::Mtp).copied();
    assert_eq!(mtp, want["mtp_parameters"].as_u64());
    assert_eq!(mtp, Some(844_640_768));
    // llama.cpp loads the MTP block only into an MTP context (`TENSOR_SKIP` otherwise): a
    // device is given its weights only when asked to. On the CPU backend the mapped buffer
    // spans the file from the first loaded tensor to the last (`get_mapping_range`), and the
    // block sits before the output layer: it is mapped either way.
    let weights = |json: &str| {
        let v = plan(&[hub(QWEN35MOE)], &options(json)).expect("valid options");
        v.memory.as_ref().expect("memory").weights_bytes
    };
    let on_cpu = a.memory.as_ref().expect("memory").weights_bytes;
    assert_eq!(on_cpu, weights(r#"{"context": 4096, "include_mtp": true}"#));
    let gpu = r#""engine": "llama.cpp", "context": 4096, "devices": "h200:1""#;
    let without = weights(&format!("{{{gpu}}}"));
    let with = weights(&format!(r#"{{{gpu}, "include_mtp": true}}"#));
    assert!(with > without + 844_640_768, "{with} vs {without}");
    assert!(on_cpu > without, "{on_cpu} vs {without}");
    assert_eq!(
        arch.attention[0],
        Attention::LinearAttention {
            heads: 32,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4
        }
    );
    let moe = arch.moe.as_ref().expect("moe");
    assert_eq!(
        (moe.experts, moe.active, moe.expert_intermediate_size),
        (256, 8, Some(512))
    );
    let m = a.memory.as_ref().expect("memory");
    // r: (ssm_d_conv − 1) × (ssm_d_inner + 2 × ssm_n_group × ssm_d_state) = 3 × (4,096 + 2 ×
    // 16 × 128) = 24,576; s: ssm_d_state × ssm_d_inner = 128 × 4,096 = 524,288; F32:
    // 2,195,456 B a block, × 30 = 65,863,680 B a sequence. KV: 10 × 2 × 2 × 256 × 2 B a token.
    assert_eq!(m.state_bytes_per_sequence, 65_863_680);
    assert_eq!(m.kv_cache_bytes_per_token, 20_480);
}

/// `attention.recurrent_layers` decides before `full_attention_interval`, as llama.cpp's
/// loader reads it: flipping one block makes a layer whose tensors are the other kind's, which
/// is refused; a flags array of the wrong length is refused.
#[test]
fn qwen35moe_recurrent_layers_decide_and_a_contradicting_one_is_refused() {
    let key = "qwen35moe.attention.recurrent_layers";
    // Block 3 is full attention; flagging it recurrent contradicts its attn_q / attn_k tensors.
    // (41 flags: the 40 main blocks and the MTP block.)
    let flags: Vec<GgufValue> = (0..41).map(|i| GgufValue::Bool(i < 40 && i != 7)).collect();
    let v = with_kv(QWEN35MOE, &[(key, Some(GgufValue::Array(flags)))], "{}");
    assert!(!v.admissible);
    let found = blocking(&v);
    assert!(
        found
            .iter()
            .any(|(code, subject, detail)| code == "config.shape_mismatch"
                && subject == "blk.3.attn_q.weight"
                && detail.contains("`linear_attention` layer")),
        "{found:#?}"
    );
    let short: Vec<GgufValue> = (0..40).map(|_| GgufValue::Bool(true)).collect();
    let v = with_kv(QWEN35MOE, &[(key, Some(GgufValue::Array(short)))], "{}");
    assert!(!v.admissible);
    assert!(
        blocking(&v)
            .iter()
            .any(|(code, subject, _)| code == "config.invalid_value" && subject == key),
        "{:#?}",
        blocking(&v)
    );
}

/// A current gemma-3 GGUF carries `gemma3.rope.freq_base_swa` (the converter writes it from
/// `rope_parameters.sliding_attention`): a value of the sliding layers' rope, graded, not
/// blocking; five sliding layers per full one.
#[test]
fn gemma3_gguf_with_freq_base_swa_plans_exactly() {
    let facts = hub(GEMMA3);
    let Content::Gguf { parts, .. } = &facts.content else {
        panic!("gguf")
    };
    assert_eq!(
        parts[0].header.kv.get("gemma3.rope.freq_base_swa"),
        Some(&GgufValue::Float(10_000.0))
    );
    let v = plans_exactly(GEMMA3, GEMMA3_FILE, r#"{"context": 4096}"#);
    let a = &v.artifacts[0];
    assert!(
        !a.findings.iter().any(|f| f.subject.contains("freq_base_swa")),
        "{:#?}",
        a.findings
    );
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!(arch.attention[0], Attention::Sliding { window: 512 });
    assert_eq!(arch.attention[5], Attention::Full);
}

/// `ssm.state_size` understated (64 where the tensors hold 128): the Mamba2 tensors it sizes
/// disagree, and the plan is refused with the tensor named — a state half the size is never
/// planned as if true.
#[test]
fn an_ssm_state_size_the_tensors_contradict_is_refused() {
    let v = with_kv(
        NANO,
        &[("nemotron_h_moe.ssm.state_size", Some(GgufValue::UInt(64)))],
        r#"{"context": 8192, "devices": "h100-80gb:1"}"#,
    );
    assert!(!v.admissible);
    let found = blocking(&v);
    for tensor in ["blk.0.ssm_in.weight", "blk.0.ssm_conv1d.weight"] {
        assert!(
            found
                .iter()
                .any(|(code, subject, detail)| code == "config.shape_mismatch"
                    && subject == tensor
                    && detail.contains("ssm.state_size")),
            "{tensor}: {found:#?}"
        );
    }
    // The figures beside a blocking finding never prove a fit (the true model fits one H100).
    let memory = v.memory.as_ref().expect("memory");
    assert_eq!(memory.fits, None);
    assert_eq!(memory.max_context_that_fits, None);
    let honest = plan(&[hub(NANO)], &options(r#"{"context": 8192, "devices": "h100-80gb:1"}"#)).expect("valid options");
    assert_eq!(honest.memory.as_ref().expect("memory").fits, Some(true));
}

/// A block's kind comes from the per-block arrays: a `head_count_kv` that makes Mamba2 block 0
/// an attention block contradicts its `ssm_*` tensors and its missing `attn_*` ones.
#[test]
fn a_block_whose_keys_name_another_kind_than_its_tensors_is_refused() {
    let key = "nemotron_h_moe.attention.head_count_kv";
    let mut kv_heads = array(NANO, key);
    assert_eq!(kv_heads[0], 0);
    kv_heads[0] = 2;
    let v = with_kv(NANO, &[(key, Some(uints(&kv_heads)))], "{}");
    assert!(!v.admissible);
    let found = blocking(&v);
    assert!(
        found
            .iter()
            .any(|(code, subject, detail)| code == "config.shape_mismatch"
                && subject.starts_with("blk.0.ssm_")
                && detail.contains("`mamba` tensors in a block the key/values make a `full` layer")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|(code, subject, detail)| code == "config.shape_mismatch"
                && subject == "blk.0"
                && detail.contains("`attention`")),
        "{found:#?}"
    );
    // A feed-forward width on an attention block makes it a MoE block without experts.
    let key = "nemotron_h_moe.feed_forward_length";
    let mut ffn = array(NANO, key);
    assert_eq!(ffn[5], 0, "block 5 is attention");
    ffn[5] = 1856;
    let v = with_kv(NANO, &[(key, Some(uints(&ffn)))], "{}");
    assert!(!v.admissible);
    assert!(
        blocking(&v)
            .iter()
            .any(|(_, subject, detail)| subject == "blk.5.attn_q.weight" && detail.contains("`none` layer")),
        "{:#?}",
        blocking(&v)
    );
}

/// Values llama.cpp reads that the planner does not model are refused, not approximated:
/// per-block top-k that differs between MoE blocks (NVIDIA's Puzzle models), an MTP block,
/// a Mamba width that is not a whole number of heads (llama.cpp asserts it), K and V widths
/// that differ (the graph asserts they do not).
#[test]
fn nemotron_h_values_the_planner_does_not_model_are_refused() {
    let blocks = array(NANO, "nemotron_h_moe.feed_forward_length");
    let mut top_k: Vec<u64> = blocks.iter().map(|n| if *n > 0 { 6 } else { 0 }).collect();
    let first_moe = blocks.iter().position(|n| *n > 0).expect("a MoE block");
    top_k[first_moe] = 8;
    let cases = [
        ("nemotron_h_moe.expert_used_count", uints(&top_k)),
        ("nemotron_h_moe.nextn_predict_layers", GgufValue::UInt(1)),
        ("nemotron_h_moe.ssm.time_step_rank", GgufValue::UInt(48)),
        ("nemotron_h_moe.attention.value_length", GgufValue::UInt(64)),
    ];
    for (key, value) in cases {
        let v = with_kv(NANO, &[(key, Some(value))], "{}");
        assert!(!v.admissible, "{key}");
        assert!(
            blocking(&v)
                .iter()
                .any(|(code, subject, _)| code == "config.unsupported_value" && subject == key),
            "{key}: {:#?}",
            blocking(&v)
        );
        assert!(v.artifacts[0].architecture.is_none(), "{key}: refused, not planned");
    }
    // A required Mamba key absent.
    let v = with_kv(NANO, &[("nemotron_h_moe.ssm.group_count", None)], "{}");
    assert!(
        blocking(&v)
            .iter()
            .any(|(code, subject, _)| code == "gguf.missing_key" && subject == "nemotron_h_moe.ssm.group_count"),
        "{:#?}",
        blocking(&v)
    );
}

/// The GGUF architectures map to the family; the plan options' defaults pick llama.cpp.
#[test]
fn nemotron_h_ggufs_plan_under_llama_cpp() {
    for repo in [NANO, H56] {
        let v = plan(&[hub(repo)], &PlanOptions::default()).expect("valid options");
        let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
        assert_eq!(
            (arch.family.as_str(), arch.model_type.as_str()),
            ("nemotron_h", "nemotron_h")
        );
        let v = plan(&[hub(repo)], &options(r#"{"context": 4096}"#)).expect("valid options");
        let memory = v.memory.as_ref().expect("memory");
        assert_eq!(memory.engine, preflight_plan::Engine::LlamaCpp, "{repo}");
    }
}
