//! The planner is total: whatever the facts, it returns a verdict — no panic, no overflow,
//! no allocation sized by a hostile number.

use preflight_formats::config::Config;
use preflight_formats::facts::{ArtifactFacts, Content, SafetensorsFile, SourceRef, StagingStats};
use preflight_formats::safetensors::{Header, TensorInfo};
use preflight_plan::{Engine, PlanOptions, plan};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "mixtral",
    "deepseek_v3",
    "gpt_oss",
    "gemma2",
    "gemma3_text",
    "phi3",
    "bert",
];
const KEYS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "intermediate_size",
    "sliding_window",
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "n_routed_experts",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "num_nextn_predict_layers",
    "tie_word_embeddings",
    "layer_types",
    "use_sliding_window",
    "max_window_layers",
    "sliding_window_pattern",
    "quantization_config",
    "text_config",
];
const SEGMENTS: &[&str] = &[
    "model",
    "layers",
    "0",
    "1",
    "61",
    "self_attn",
    "mlp",
    "experts",
    "q_proj",
    "k_proj",
    "weight",
    "bias",
    "embed_tokens",
    "lm_head",
    "norm",
    "gate",
    "_blocks",
    "weight_scale_inv",
    "qweight",
];

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..300).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,12}".prop_map(Value::from),
        prop::collection::vec(
            prop_oneof![
                Just(json!("full_attention")),
                Just(json!("sliding_attention")),
                Just(json!(3))
            ],
            0..6
        )
        .prop_map(Value::from),
        Just(json!({"quant_method": "fp8", "weight_block_size": [128, 128]})),
        Just(json!({"quant_method": "gptq", "bits": 0})),
    ]
}

/// The real configs of the bundled fixtures: perturbing them reaches deep into each family.
fn real_configs() -> Vec<Map<String, Value>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/configs");
    let mut configs: Vec<Map<String, Value>> = std::fs::read_dir(dir)
        .expect("fixtures/configs")
        .map(|e| serde_json::from_slice(&std::fs::read(e.expect("entry").path()).expect("read")).expect("json"))
        .collect();
    configs.sort_by_key(|c| c["model_type"].to_string());
    configs
}

fn config() -> impl Strategy<Value = Map<String, Value>> {
    let bases = real_configs();
    (
        prop::sample::select(bases),
        prop::option::of(prop::sample::select(MODEL_TYPES)),
        prop::collection::vec((prop::sample::select(KEYS), value()), 0..6),
    )
        .prop_map(|(mut map, model_type, kvs)| {
            if let Some(t) = model_type {
                map.insert("model_type".into(), t.into());
            }
            for (k, v) in kvs {
                map.insert(k.to_owned(), v);
            }
            map
        })
}

fn tensor() -> impl Strategy<Value = TensorInfo> {
    (
        prop::collection::vec(prop::sample::select(SEGMENTS), 1..7),
        prop::sample::select(&["BF16", "F32", "U8", "F8_E4M3", "I32", "X9"][..]),
        prop::collection::vec(prop_oneof![0u64..600, any::<u64>()], 0..4),
        any::<[u64; 2]>(),
    )
        .prop_map(|(segments, dtype, shape, data_offsets)| TensorInfo {
            name: segments.join("."),
            dtype: dtype.to_owned(),
            shape,
            data_offsets,
        })
}

/// Options as a caller might send them, hostile values included (validated or not).
fn options() -> impl Strategy<Value = PlanOptions> {
    let extreme = || prop_oneof![Just(0u64), 1u64..5, 1u64..200_000, Just(1 << 32), any::<u64>()];
    (
        prop::option::of(extreme()),
        prop::option::of(extreme()),
        prop::option::of(prop::sample::select(&["bf16", "fp8", "q4_0", "f32"][..])),
        prop::option::of(prop::sample::select(&["int4", "fp8", "f32", "mxfp4"][..])),
        prop::option::of(prop::sample::select(
            &[
                "h100-80gb:8",
                "l4",
                "1:3",
                "18446744073709551615:2",
                "rtx-4090=24GiB,mi300x",
                "a100-80gb:2,80GiB",
            ][..],
        )),
        prop::option::of(extreme()),
        any::<bool>(),
        prop::option::of(prop::sample::select(&["vllm", "sglang", "llama.cpp"][..])),
        (prop::option::of(extreme()), prop::option::of(extreme())),
        prop::option::of(prop::sample::select(&Engine::ALL[..])),
    )
        .prop_map(
            |(context, sequences, kv, weights, devices, tp, include_mtp, engine, (batched, seqs), require_engine)| {
                PlanOptions {
                    context,
                    sequences,
                    kv_dtype: kv.map(|k| k.parse().expect("kv dtype")),
                    weights_dtype: weights.map(|w| w.parse().expect("weights dtype")),
                    devices: devices.map(|d| d.parse().expect("devices")),
                    tensor_parallel: tp,
                    gpu_utilization: None,
                    include_mtp,
                    engine: engine.map(|e| e.parse().expect("engine")),
                    max_num_batched_tokens: batched,
                    max_num_seqs: seqs,
                    require_engine,
                    ..PlanOptions::default()
                }
            },
        )
}

fn facts(config: Option<Map<String, Value>>, tensors: Vec<TensorInfo>) -> ArtifactFacts {
    ArtifactFacts {
        source: SourceRef {
            spec: "prop".into(),
            ..SourceRef::default()
        },
        config: config.map(|raw| Config { raw }),
        quant_config: None,
        content: Content::Safetensors {
            files: vec![SafetensorsFile {
                name: "model.safetensors".into(),
                size: None,
                header: Header {
                    tensors,
                    metadata: None,
                    json_len: 0,
                    issues: vec![],
                },
            }],
            index: None,
            missing_files: vec![],
        },
        staging: StagingStats::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plan_never_panics(config in proptest::option::of(config()), tensors in prop::collection::vec(tensor(), 0..40)) {
        let verdict = plan(&[facts(config, tensors)], &PlanOptions::default());
        let a = &verdict.artifacts[0];
        prop_assert_eq!(verdict.admissible, verdict.summary.blocking == 0);
        if let Some(active) = a.parameters.active_per_token {
            prop_assert!(active <= a.parameters.total);
        }
    }

    #[test]
    fn memory_planning_never_panics(
        config in proptest::option::of(config()),
        tensors in prop::collection::vec(tensor(), 0..40),
        options in options(),
    ) {
        let verdict = plan(&[facts(config, tensors)], &options);
        prop_assert_eq!(verdict.admissible, verdict.summary.blocking == 0);
        if let Some(m) = &verdict.memory {
            prop_assert!(options.validate().is_ok());
            let refused = verdict.artifacts.iter().any(|a| a.memory.as_ref().is_some_and(|m| m.lower_bound));
            if refused {
                // Lower bounds can prove a plan does not fit, never that it does.
                prop_assert_ne!(m.fits, Some(true));
                prop_assert!(m.per_device.iter().all(|d| !d.fits));
            } else {
                prop_assert_eq!(m.fits, (!m.per_device.is_empty()).then(|| m.per_device.iter().all(|d| d.fits)));
            }
        }
    }
}

/// The config with one key set to `value`, from the real Llama-3.1-8B config.
fn llama_with(key: &str, value: Value) -> Map<String, Value> {
    let mut map = real_configs()
        .into_iter()
        .find(|c| c["model_type"] == "llama" && c["num_hidden_layers"] == 32)
        .expect("the Llama-3.1-8B config");
    map.insert(key.into(), value);
    map
}

/// Found by `memory_planning_never_panics`: a `head_dim` of 2^63 overflowed the prefill
/// bound's attention FLOPs (`head_dim + v_head_dim` in 64 bits).
#[test]
fn a_head_dim_of_two_to_the_63_is_a_verdict_not_an_overflow() {
    let options = PlanOptions {
        max_num_batched_tokens: Some(1),
        ..PlanOptions::default()
    };
    let verdict = plan(
        &[facts(Some(llama_with("head_dim", json!(1u64 << 63))), vec![])],
        &options,
    );
    assert!(!verdict.admissible);
}

/// vLLM's MXFP4 expert padding rounds the widths up to the kernel's tiles: widths near 2^64
/// on a named device must not overflow it.
#[test]
fn mxfp4_expert_padding_of_hostile_widths_is_a_verdict_not_an_overflow() {
    let gpt_oss = real_configs()
        .into_iter()
        .find(|c| c["model_type"] == "gpt_oss")
        .expect("the gpt-oss config");
    for (key, value) in [("hidden_size", u64::MAX), ("intermediate_size", u64::MAX - 1)] {
        let mut config = gpt_oss.clone();
        config.insert(key.into(), json!(value));
        for devices in ["a100-80gb:1", "h100-80gb:1", "b200:1"] {
            let options = PlanOptions {
                devices: Some(devices.parse().expect("devices")),
                ..PlanOptions::default()
            };
            let verdict = plan(&[facts(Some(config.clone()), vec![])], &options);
            assert!(!verdict.admissible, "{key} = {value} on {devices}");
        }
    }
}
