//! Config keys a family has no rule for, graded by what the reference implementations read
//! (`data/config_keys.json`), GGUF keys by what llama.cpp's loader reads
//! (`data/llamacpp_keys.json`), and ModelOpt's algorithms from its own list — on the bundled
//! checkpoints and the release-day ones (ground truth: `packed/expected-release-day.json`).

use std::collections::BTreeMap;

use preflight_formats::gguf::Value as GgufValue;
use preflight_plan::{Attention, PlanOptions, Severity, Verdict, plan};
use serde_json::{Value, json};

use crate::support::{codes, hub, release_day_row, with_kv};

/// `repo` planned with `keys` set at the top of its config (`null` removes nothing: it is a
/// value).
fn with_keys(repo: &str, keys: &[(&str, Value)]) -> Verdict {
    let mut facts = hub(repo);
    let config = facts.config.as_mut().expect("config");
    for (key, value) in keys {
        config.raw.insert((*key).to_owned(), value.clone());
    }
    plan(&[facts], &PlanOptions::default()).expect("valid options")
}

/// The finding about `subject`: its code and severity.
fn graded(v: &Verdict, subject: &str) -> Option<(String, Severity)> {
    v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.subject == subject)
        .map(|f| (f.code.as_str().to_owned(), f.severity))
}

fn info(code: &str) -> Option<(String, Severity)> {
    Some((code.to_owned(), Severity::Info))
}

fn blocking() -> Option<(String, Severity)> {
    Some(("config.unknown_key".to_owned(), Severity::Blocking))
}

const LLAMA: &str = "meta-llama/Llama-3.1-8B";

#[test]
fn a_key_no_reference_reads_is_info() {
    let v = with_keys(LLAMA, &[("foo_bar_baz", json!(3))]);
    assert_eq!(graded(&v, "config.foo_bar_baz"), info("config.ignored_key"));
    assert!(v.admissible, "{:?}", codes(&v, 0));
}

/// `partial_rotary_factor` is read (transformers' config class folds it into the rotary
/// parameters; vLLM's `get_rope` reads it), and llama's reading does not model it: a half-rotary
/// head changes what the model computes. Its identity value changes nothing.
#[test]
fn partial_rotary_factor_is_blocking_unless_it_is_the_identity() {
    let v = with_keys(LLAMA, &[("partial_rotary_factor", json!(0.5))]);
    assert_eq!(graded(&v, "config.partial_rotary_factor"), blocking());
    assert!(!v.admissible);
    let v = with_keys(LLAMA, &[("partial_rotary_factor", json!(1.0))]);
    assert_eq!(graded(&v, "config.partial_rotary_factor"), info("config.default_value"));
    assert!(v.admissible, "{:?}", codes(&v, 0));
}

/// A key read by the references with a value other than the config class's default is
/// blocking; with the default (or `null` for an option that defaults to none), info.
#[test]
fn a_read_key_is_blocking_unless_it_holds_the_default() {
    let v = with_keys(LLAMA, &[("attention_chunk_size", json!(8192))]);
    assert_eq!(graded(&v, "config.attention_chunk_size"), blocking());
    let v = with_keys(LLAMA, &[("attention_chunk_size", Value::Null)]);
    assert_eq!(graded(&v, "config.attention_chunk_size"), info("config.default_value"));
    assert!(v.admissible, "{:?}", codes(&v, 0));
}

/// `norm_eps` is read by neither transformers' `nemotron_h` nor vLLM's `NemotronHForCausalLM`.
#[test]
fn norm_eps_on_nemotron_h_is_ignored() {
    let v = with_keys(
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        &[("norm_eps", json!(1e-5))],
    );
    assert_eq!(graded(&v, "config.norm_eps"), info("config.ignored_key"));
}

fn elements(value: &Value, field: &str) -> BTreeMap<String, u64> {
    value[field]
        .as_object()
        .expect(field)
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("count")))
        .collect()
}

fn kind(a: &Attention) -> &'static str {
    match a {
        Attention::Full => "full",
        Attention::LinearAttention { .. } => "linear_attention",
        _ => "other",
    }
}

fn kinds(v: &Verdict) -> Vec<&'static str> {
    v.artifacts[0]
        .architecture
        .as_ref()
        .expect("architecture")
        .attention
        .iter()
        .map(kind)
        .collect()
}

fn expected_kinds(expected: &Value) -> Vec<String> {
    expected["layer_kinds"]
        .as_array()
        .expect("layer_kinds")
        .iter()
        .map(|k| k.as_str().expect("kind").to_owned())
        .collect()
}

/// ModelOpt `MIXED_PRECISION`: FP8 attention and DeltaNet projections, weight-only NVFP4
/// (`W4A16_NVFP4`, an unused `input_scale` beside each) MLPs and lm_head, per
/// `quantized_layers`.
#[test]
fn modelopt_mixed_precision_plans_exactly() {
    let repo = "nvidia/Qwen3.6-27B-NVFP4";
    let expected = release_day_row(repo);
    let v = plan(&[hub(repo)], &PlanOptions::default()).expect("valid options");
    assert!(v.admissible, "{:#?}", v.artifacts[0].findings);
    let a = &v.artifacts[0];
    assert_eq!(a.tensor_elements_by_dtype, elements(&expected, "elements_by_dtype"));
    assert_eq!(
        a.parameters.total,
        expected["logical_parameters"].as_u64().expect("total")
    );
    let q = a
        .architecture
        .as_ref()
        .and_then(|a| a.quantization.as_ref())
        .expect("quantization");
    assert_eq!(q.method, "modelopt");
    assert!(q.layout.starts_with("ModelOpt MIXED_PRECISION: FP8"), "{}", q.layout);
    assert!(q.layout.contains("W4A16_NVFP4"), "{}", q.layout);
    assert_eq!(kinds(&v), expected_kinds(&expected));
}

/// ModelOpt FP8 declared inside config.json (`quantization_config` with `quant_algo: FP8` and
/// ModelOpt as its producer), static per-tensor scales.
#[test]
fn modelopt_fp8_in_config_json_plans_exactly() {
    let repo = "Qwen/Qwen3-32B-FP8-Static-PerTensor";
    let expected = release_day_row(repo);
    let v = plan(&[hub(repo)], &PlanOptions::default()).expect("valid options");
    assert!(v.admissible, "{:?}", codes(&v, 0));
    let a = &v.artifacts[0];
    assert_eq!(a.tensor_elements_by_dtype, elements(&expected, "elements_by_dtype"));
    assert_eq!(
        a.parameters.total,
        expected["logical_parameters"].as_u64().expect("total")
    );
    let q = a
        .architecture
        .as_ref()
        .and_then(|a| a.quantization.as_ref())
        .expect("quantization");
    assert!(q.layout.starts_with("ModelOpt FP8"), "{}", q.layout);
    assert_eq!(kinds(&v), expected_kinds(&expected));
}

/// Every `quant_algo` ModelOpt 0.47 writes is known: planned where the layout is, else
/// `quantization.unsupported` naming it; a string ModelOpt never writes is unknown.
#[test]
fn modelopt_algorithms_come_from_its_own_list() {
    let with_algo = |algo: &str| {
        let mut facts = hub("Qwen/Qwen3-32B-FP8-Static-PerTensor");
        let config = facts.config.as_mut().expect("config");
        config.raw["quantization_config"]["quant_algo"] = json!(algo);
        plan(&[facts], &PlanOptions::default()).expect("valid options")
    };
    for (algo, code) in [
        ("NVFP4_AWQ", "quantization.unsupported"),
        ("W4A8_MXFP4_FP8", "quantization.unsupported"),
        ("W9A9", "quantization.unknown"),
    ] {
        let v = with_algo(algo);
        let f = v.artifacts[0]
            .findings
            .iter()
            .find(|f| f.code.as_str() == code)
            .unwrap_or_else(|| panic!("{algo}: {:?}", codes(&v, 0)));
        assert_eq!(f.observed, Some(json!(algo)));
        assert!(!v.admissible);
    }
    for algo in ["FP8_PER_CHANNEL_PER_TOKEN", "MXFP8"] {
        let v = with_algo(algo);
        assert!(
            !codes(&v, 0)
                .iter()
                .any(|c| c.starts_with("quantization.unknown") || c == "quantization.unsupported"),
            "{algo}: {:?}",
            codes(&v, 0)
        );
    }
}

const QWEN35_GGUF: &str = "Qwen/Qwen3.5-0.8B-GGUF";

/// llama.cpp's `qwen35`: gated DeltaNet with every fourth layer gated attention, read from its
/// loader's keys.
#[test]
fn qwen35_gguf_plans_exactly() {
    let expected = release_day_row("Qwen/Qwen3.5-0.8B-GGUF/Qwen3.5-0.8B-Q8_0.gguf");
    let v = plan(&[hub(QWEN35_GGUF)], &PlanOptions::default()).expect("valid options");
    assert!(v.admissible, "{:?}", v.artifacts[0].findings);
    let a = &v.artifacts[0];
    assert_eq!(a.tensor_elements_by_dtype, elements(&expected, "elements_by_type"));
    assert_eq!(
        a.parameters.total,
        expected["transformers_num_parameters"].as_u64().expect("total")
    );
    assert_eq!(kinds(&v), expected_kinds(&expected));
    let linear = a.architecture.as_ref().expect("architecture").attention[0];
    assert_eq!(
        linear,
        Attention::LinearAttention {
            heads: 16,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4
        }
    );
}

/// A key under `<arch>.` llama.cpp never reads for that architecture is info; one it reads and
/// the planner does not model stays blocking.
#[test]
fn gguf_keys_are_graded_by_llama_cpps_loader() {
    let v = with_kv(QWEN35_GGUF, &[("qwen35.frobnicate", Some(GgufValue::UInt(3)))], "{}");
    assert_eq!(graded(&v, "qwen35.frobnicate"), info("gguf.ignored_key"));
    assert!(v.admissible, "{:?}", codes(&v, 0));
    let v = with_kv(
        QWEN35_GGUF,
        &[("qwen35.attention.key_length_swa", Some(GgufValue::UInt(64)))],
        "{}",
    );
    assert_eq!(
        graded(&v, "qwen35.attention.key_length_swa"),
        Some(("gguf.unknown_key".to_owned(), Severity::Blocking))
    );
}
