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
            dtype: dtype.into(),
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
                "1125899906842624:2",
                "rtx-4090=24GiB,mi300x",
                "a100-80gb:2,80GiB",
            ][..],
        )),
        prop::option::of(extreme()),
        any::<bool>(),
        prop::option::of(prop::sample::select(&["vllm", "sglang", "llama.cpp"][..])),
        (prop::option::of(extreme()), prop::option::of(extreme())),
        (
            prop::option::of(prop::sample::select(&Engine::ALL[..])),
            prop::option::of(prop::sample::select(&["mtp:1", "mtp:3", "eagle3:2"][..])),
        ),
    )
        .prop_map(
            |(
                context,
                sequences,
                kv,
                weights,
                devices,
                tp,
                include_mtp,
                engine,
                (batched, seqs),
                (require_engine, speculative),
            )| {
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
                    speculative: speculative.map(|s| s.parse().expect("speculative")),
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
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plan_never_panics(config in proptest::option::of(config()), tensors in prop::collection::vec(tensor(), 0..40)) {
        let verdict = plan(&[facts(config, tensors)], &PlanOptions::default()).expect("valid options");
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
        // Options no plan can honour (a bad value, a degree the model does not split) are an
        // error, not a verdict.
        let Ok(verdict) = plan(&[facts(config, tensors)], &options) else {
            return Ok(());
        };
        prop_assert_eq!(verdict.admissible, verdict.summary.blocking == 0);
        if let Some(m) = &verdict.memory {
            prop_assert!(options.validate().is_ok());
            // A refused architecture's figures are lower bounds, and figures beside a blocking
            // finding about the checkpoint may rest on a header that lies: either can prove a
            // plan does not fit, never that it does.
            let lower_bound = verdict.artifacts.iter().any(|a| a.memory.as_ref().is_some_and(|m| m.lower_bound));
            let blocked = verdict.artifacts.iter().any(|a| {
                a.findings.iter().any(|f| {
                    f.severity == preflight_plan::Severity::Blocking && !f.code.as_str().starts_with("memory.")
                })
            });
            if lower_bound {
                prop_assert_ne!(m.fits, Some(true));
                prop_assert!(m.per_device.iter().all(|d| !d.fits));
            } else if blocked {
                prop_assert_ne!(m.fits, Some(true));
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
    )
    .expect("valid options");
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
            let verdict = plan(&[facts(Some(config.clone()), vec![])], &options).expect("valid options");
            assert!(!verdict.admissible, "{key} = {value} on {devices}");
        }
    }
}

/// The fuzz targets (`preflight_plan::fuzz`) on the stable toolchain: the kept corpus
/// (`fuzz/corpus/<target>/`, every crash ever found kept there as a regression case)
/// replayed, then mutated at random for `PREFLIGHT_FUZZ_SECS` seconds a target (CI: 60;
/// a plain `cargo test`: 1). A panic saves its input under `target/fuzz-crashes/` and fails.
mod fuzz {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use preflight_plan::fuzz::{Seeds, TARGETS, Target};

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn seeds() -> Seeds {
        let dir = repo().join("fixtures/local/tiny-llama");
        let config = std::fs::read(dir.join("config.json")).expect("config");
        let weights = std::fs::read(dir.join("model.safetensors")).expect("weights");
        Seeds::new(&config, &weights)
    }

    fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = repo().join("fuzz/corpus").join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).expect("corpus file");
                (p, bytes)
            })
            .collect()
    }

    /// Run `target` on `input`; a panic keeps the input and fails the test naming it.
    fn run(name: &str, target: Target, input: &[u8], seeds: &Seeds) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(input, seeds)));
        if outcome.is_err() {
            let dir = repo().join("target/fuzz-crashes");
            std::fs::create_dir_all(&dir).expect("crash dir");
            let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
            });
            let path = dir.join(format!("{name}-{hash:016x}"));
            std::fs::write(&path, input).expect("keep the crash");
            panic!(
                "fuzz target {name} panicked; input kept at {} (add it to fuzz/corpus/{name}/)",
                path.display()
            );
        }
    }

    #[test]
    fn the_kept_corpus_replays_without_a_panic() {
        let seeds = seeds();
        for (name, target) in TARGETS {
            let inputs = corpus(name);
            assert!(!inputs.is_empty(), "fuzz/corpus/{name} is empty");
            for (_, input) in inputs {
                run(name, *target, &input, &seeds);
            }
        }
    }

    /// xorshift64*: reproducible mutations from a seed, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Values that sit on the edges readers and the planner must hold: zero, one, powers of
    /// two, all ones, as the integers GGUF and safetensors headers store.
    const INTERESTING: &[u64] = &[
        0,
        1,
        2,
        255,
        256,
        4096,
        1 << 31,
        1 << 32,
        1 << 40,
        1 << 62,
        1 << 63,
        u64::MAX,
    ];

    fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[(PathBuf, Vec<u8>)]) {
        for _ in 0..=rng.below(4) {
            let at = rng.below(input.len());
            match rng.below(7) {
                0 if !input.is_empty() => input[at] ^= 1 << rng.below(8),
                1 if !input.is_empty() => input[at] = rng.next() as u8,
                2 if input.len() >= 8 => {
                    let at = at.min(input.len() - 8);
                    let value = INTERESTING[rng.below(INTERESTING.len())];
                    let width = [1usize, 2, 4, 8][rng.below(4)];
                    input[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
                }
                3 if !input.is_empty() => {
                    let len = rng.below(64).min(input.len() - at);
                    input.drain(at..at + len);
                }
                4 => {
                    let (_, other) = &pool[rng.below(pool.len())];
                    if !other.is_empty() {
                        let from = rng.below(other.len());
                        let len = rng.below(256).min(other.len() - from);
                        let chunk = other[from..from + len].to_vec();
                        input.splice(at..at, chunk);
                    }
                }
                5 => {
                    // A decimal number in text formats (JSON): digits swapped for an edge.
                    let digits = INTERESTING[rng.below(INTERESTING.len())].to_string();
                    input.splice(at..at, digits.bytes());
                }
                _ => input.truncate(at),
            }
        }
    }

    #[test]
    fn random_inputs_from_the_corpus_never_panic() {
        let seconds: u64 = std::env::var("PREFLIGHT_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        let seeds = seeds();
        let mut runs = 0u64;
        for (index, (name, target)) in TARGETS.iter().enumerate() {
            let pool = corpus(name);
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1));
            let until = Instant::now() + Duration::from_secs(seconds);
            while Instant::now() < until {
                let mut input = pool[rng.below(pool.len())].1.clone();
                mutate(&mut rng, &mut input, &pool);
                run(name, *target, &input, &seeds);
                runs += 1;
            }
        }
        assert!(runs > 0, "no input was tried");
    }
}
