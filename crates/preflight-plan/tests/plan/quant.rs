//! Quantization schemes, each on a small synthetic llama whose linear layers are stored as
//! the scheme stores them: the logical parameter count must equal the unquantized model's
//! (packed 4-bit counted unpacked, scales and zero points excluded), the scheme named, and
//! nothing left unplaced.

use preflight_plan::{Code, Engine, PlanOptions, Support, Verdict, plan};
use serde_json::{Value, json};

const HIDDEN: u64 = 64;
const FFN: u64 = 128;
const VOCAB: u64 = 256;
const LAYERS: u64 = 2;

type Spec = (String, &'static str, Vec<u64>);

fn config(quantization: Option<Value>) -> Value {
    let mut c = json!({
        "model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": LAYERS, "vocab_size": VOCAB, "max_position_embeddings": 4096,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16"
    });
    if let Some(q) = quantization {
        c["quantization_config"] = q;
    }
    c
}

/// (name stem, rows, cols) of every linear layer a quantization scheme rewrites.
fn linears() -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}.");
        out.extend([
            (format!("{p}self_attn.q_proj"), 64, HIDDEN),
            (format!("{p}self_attn.k_proj"), 32, HIDDEN),
            (format!("{p}self_attn.v_proj"), 32, HIDDEN),
            (format!("{p}self_attn.o_proj"), HIDDEN, 64),
            (format!("{p}mlp.gate_proj"), FFN, HIDDEN),
            (format!("{p}mlp.up_proj"), FFN, HIDDEN),
            (format!("{p}mlp.down_proj"), HIDDEN, FFN),
        ]);
    }
    out
}

/// Embedding, norms and lm_head: left in BF16 by every scheme here.
fn unquantized() -> Vec<Spec> {
    let mut t = vec![
        ("model.embed_tokens.weight".to_owned(), "BF16", vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_owned(), "BF16", vec![HIDDEN]),
        ("lm_head.weight".to_owned(), "BF16", vec![VOCAB, HIDDEN]),
    ];
    for l in 0..LAYERS {
        t.push((format!("model.layers.{l}.input_layernorm.weight"), "BF16", vec![HIDDEN]));
        t.push((
            format!("model.layers.{l}.post_attention_layernorm.weight"),
            "BF16",
            vec![HIDDEN],
        ));
    }
    t
}

fn logical_total() -> u64 {
    let linear: u64 = linears().iter().map(|(_, r, c)| r * c).sum();
    let rest: u64 = unquantized().iter().map(|(_, _, s)| s.iter().product::<u64>()).sum();
    linear + rest
}

/// Plan a checkpoint whose linear layers are `per_linear(stem, rows, cols)`.
fn plan_scheme(
    quantization: Option<Value>,
    quant_config: Option<Value>,
    per_linear: impl Fn(&str, u64, u64) -> Vec<Spec>,
) -> Verdict {
    plan_on(None, quantization, quant_config, per_linear)
}

/// The same, placed on `devices` (which also judges each engine's kernels there).
fn plan_on(
    devices: Option<&str>,
    quantization: Option<Value>,
    quant_config: Option<Value>,
    per_linear: impl Fn(&str, u64, u64) -> Vec<Spec>,
) -> Verdict {
    let mut tensors = unquantized();
    for (stem, rows, cols) in linears() {
        tensors.extend(per_linear(&stem, rows, cols));
    }
    let header = preflight_testhub::facts::header(tensors);
    let mut config = config(quantization);
    config["architectures"] = json!(["LlamaForCausalLM"]);
    let facts = preflight_testhub::facts::single_file(Some(&config), header, quant_config.as_ref());
    let options = PlanOptions {
        devices: devices.map(|d| d.parse().expect("devices")),
        ..PlanOptions::default()
    };
    plan(&[facts], &options).expect("valid options")
}

fn assert_exact(v: &Verdict, method: &str, logical_dtype: &str) {
    let a = &v.artifacts[0];
    assert!(v.admissible, "{method}: {:#?}", a.findings);
    assert_eq!(a.parameters.total, logical_total(), "{method}: logical parameters");
    let q = a
        .architecture
        .as_ref()
        .and_then(|x| x.quantization.as_ref())
        .expect("quantization");
    assert_eq!(q.method, method);
    let linear: u64 = linears().iter().map(|(_, r, c)| r * c).sum();
    assert_eq!(
        a.parameters.by_dtype.get(logical_dtype),
        Some(&linear),
        "{method}: {:?}",
        a.parameters.by_dtype
    );
}

fn spec(name: String, dtype: &'static str, shape: Vec<u64>) -> Spec {
    (name, dtype, shape)
}

#[test]
fn compressed_tensors_fp8_static_and_dynamic() {
    for dynamic in [false, true] {
        let q = json!({
            "quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {
                "weights": {"num_bits": 8, "type": "float", "strategy": if dynamic { "channel" } else { "tensor" }},
                "input_activations": {"num_bits": 8, "type": "float", "dynamic": dynamic}
            }}
        });
        let v = plan_scheme(Some(q), None, |stem, rows, cols| {
            let mut t = vec![spec(format!("{stem}.weight"), "F8_E4M3", vec![rows, cols])];
            if dynamic {
                t.push(spec(format!("{stem}.weight_scale"), "BF16", vec![rows, 1]));
            } else {
                t.push(spec(format!("{stem}.weight_scale"), "F32", vec![1]));
                t.push(spec(format!("{stem}.input_scale"), "F32", vec![1]));
            }
            t
        });
        assert_exact(&v, "compressed-tensors", "F8_E4M3");
    }
}

#[test]
fn compressed_tensors_w8a8_int8() {
    let q = json!({
        "quant_method": "compressed-tensors", "format": "int-quantized",
        "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "int", "dynamic": true}
        }}
    });
    let v = plan_scheme(Some(q), None, |stem, rows, cols| {
        vec![
            spec(format!("{stem}.weight"), "I8", vec![rows, cols]),
            spec(format!("{stem}.weight_scale"), "BF16", vec![rows, 1]),
        ]
    });
    assert_exact(&v, "compressed-tensors", "I8");
}

#[test]
fn compressed_tensors_w4a16_packs_eight_values_an_i32() {
    let q = json!({
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}
        }}
    });
    let v = plan_scheme(Some(q), None, |stem, rows, cols| {
        vec![
            spec(format!("{stem}.weight_packed"), "I32", vec![rows, cols / 8]),
            spec(format!("{stem}.weight_scale"), "BF16", vec![rows, cols / 32]),
            spec(format!("{stem}.weight_shape"), "I64", vec![2]),
        ]
    });
    assert_exact(&v, "compressed-tensors", "INT4");
}

#[test]
fn fp8_static_per_tensor() {
    let q = json!({"quant_method": "fp8", "activation_scheme": "static"});
    let v = plan_scheme(Some(q), None, |stem, rows, cols| {
        vec![
            spec(format!("{stem}.weight"), "F8_E4M3", vec![rows, cols]),
            spec(format!("{stem}.weight_scale"), "F32", vec![]),
            spec(format!("{stem}.input_scale"), "F32", vec![]),
        ]
    });
    assert_exact(&v, "fp8", "F8_E4M3");
}

/// ModelOpt declares itself in `hf_quant_config.json`, beside a config.json without
/// `quantization_config`.
#[test]
fn modelopt_fp8_per_tensor_from_hf_quant_config() {
    let record = json!({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}});
    let v = plan_scheme(None, Some(record), |stem, rows, cols| {
        vec![
            spec(format!("{stem}.weight"), "F8_E4M3", vec![rows, cols]),
            spec(format!("{stem}.weight_scale"), "F32", vec![]),
            spec(format!("{stem}.input_scale"), "F32", vec![]),
        ]
    });
    assert_exact(&v, "modelopt", "F8_E4M3");
}

/// NVFP4: two E2M1 values a U8 byte, an F8_E4M3 scale per 16, a per-tensor F32 scale.
fn nvfp4_linear(stem: &str, rows: u64, cols: u64) -> Vec<Spec> {
    vec![
        spec(format!("{stem}.weight"), "U8", vec![rows, cols / 2]),
        spec(format!("{stem}.weight_scale"), "F8_E4M3", vec![rows, cols / 16]),
        spec(format!("{stem}.weight_scale_2"), "F32", vec![]),
        spec(format!("{stem}.input_scale"), "F32", vec![]),
    ]
}

#[test]
fn modelopt_nvfp4_counts_two_values_a_byte() {
    let record = json!({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}});
    let v = plan_scheme(None, Some(record), nvfp4_linear);
    assert_exact(&v, "modelopt", "NVFP4");
}

/// Later ModelOpt exports declare the same record in config.json's `quantization_config`
/// (`quant_method: modelopt`), with no hf_quant_config.json beside it.
#[test]
fn modelopt_nvfp4_declared_in_config_json() {
    let q = json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "producer": {"name": "modelopt", "version": "0.37.0"}, "ignore": ["lm_head"]});
    let v = plan_scheme(Some(q), None, nvfp4_linear);
    assert_exact(&v, "modelopt", "NVFP4");
}

#[test]
fn an_unknown_modelopt_algorithm_is_refused() {
    let record = json!({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W9A9"}});
    let v = plan_scheme(None, Some(record), |stem, rows, cols| {
        vec![spec(format!("{stem}.weight"), "BF16", vec![rows, cols])]
    });
    assert!(!v.admissible);
    assert!(v.artifacts[0].findings.iter().any(|f| f.code == "quantization.unknown"));
}

/// `(supported, codes)` of `engine` for a scheme on `devices`.
fn runtime(v: &Verdict, engine: Engine) -> (Support, Vec<Code>) {
    let r = v.artifacts[0].runtimes.get(engine);
    (r.supported, r.findings.iter().map(|f| f.code).collect())
}

/// Each scheme as each engine names and gates it: the method's own minimum capability, then
/// whether the device computes the format natively.
#[test]
fn engines_gate_each_scheme_by_its_own_method_and_the_device() {
    let fp8_static = |stem: &str, rows: u64, cols: u64| {
        vec![
            spec(format!("{stem}.weight"), "F8_E4M3", vec![rows, cols]),
            spec(format!("{stem}.weight_scale"), "F32", vec![]),
            spec(format!("{stem}.input_scale"), "F32", vec![]),
        ]
    };
    let modelopt_fp8 = || Some(json!({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}));
    // ModelOpt FP8 on an A100: vLLM 0.19's `modelopt` (ModelOptFp8Config.get_min_capability,
    // modelopt.py:408) and SGLang's `modelopt_fp8` both need 8.9.
    let a100 = plan_on(Some("a100-80gb"), None, modelopt_fp8(), fp8_static);
    assert_eq!(
        runtime(&a100, Engine::Vllm),
        (Support::No, vec![Code::RuntimeCapabilityTooLow])
    );
    assert_eq!(
        runtime(&a100, Engine::Sglang),
        (Support::No, vec![Code::RuntimeCapabilityTooLow])
    );
    // On an L40S (8.9) both run it natively.
    let l40s = plan_on(Some("l40s"), None, modelopt_fp8(), fp8_static);
    assert_eq!(runtime(&l40s, Engine::Vllm), (Support::Yes, vec![]));
    assert_eq!(runtime(&l40s, Engine::Sglang), (Support::Yes, vec![]));
    // transformers has no ModelOpt quantizer (hf_quant_config.json is not its format).
    assert_eq!(
        runtime(&l40s, Engine::Transformers),
        (Support::No, vec![Code::RuntimeQuantizationUnsupported])
    );

    // compressed-tensors FP8 is FP8 to the kernels too.
    let q = json!({
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": false}}}
    });
    let ct = plan_on(Some("a100-80gb"), Some(q), None, fp8_static);
    assert_eq!(runtime(&ct, Engine::Vllm).0, Support::Fallback);
    assert_eq!(
        runtime(&ct, Engine::Transformers),
        (Support::Fallback, vec![Code::RuntimeFallbackKernel])
    );

    // NVFP4: Marlin on Hopper, native on Blackwell; SGLang too loads it from 8.0.
    let nvfp4 = |devices| {
        let record =
            json!({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}});
        plan_on(Some(devices), None, Some(record), nvfp4_linear)
    };
    let h100 = nvfp4("h100-80gb");
    assert_eq!(
        runtime(&h100, Engine::Vllm),
        (Support::Fallback, vec![Code::RuntimeFallbackKernel])
    );
    assert_eq!(
        runtime(&h100, Engine::Sglang),
        (Support::Fallback, vec![Code::RuntimeFallbackKernel])
    );
    assert_eq!(runtime(&nvfp4("b200"), Engine::Vllm), (Support::Yes, vec![]));
    assert_eq!(runtime(&nvfp4("b200"), Engine::Sglang), (Support::Yes, vec![]));
    // Unquantized BF16 has no kernel gate: yes on any NVIDIA part (an RTX 3090, sized by hand).
    let bf16 = plan_on(Some("rtx-3090=24GiB"), None, None, |stem, rows, cols| {
        vec![spec(format!("{stem}.weight"), "BF16", vec![rows, cols])]
    });
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Transformers] {
        assert_eq!(runtime(&bf16, engine), (Support::Yes, vec![]), "{engine:?}");
    }
}
