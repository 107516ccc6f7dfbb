//! Memory fails closed: what the planner cannot size gets a finding, never a number, and a
//! system with a gap has no system figures. Hostile option values neither panic nor wrap.

use preflight_formats::facts::Content;
use preflight_formats::gguf::Value;
use preflight_plan::{PlanOptions, plan};
use serde_json::json;

use crate::support::{codes, hub, options};

fn has(v: &preflight_plan::Verdict, artifact: usize, code: &str) -> bool {
    codes(v, artifact).iter().any(|c| c == code)
}

#[test]
fn a_layer_kind_the_planner_does_not_model_gets_no_number() {
    // Linear attention (as in Qwen3-Next) keeps a constant state, not a growing cache; the
    // planner has no model of its size, so it refuses rather than count it as full attention.
    let mut facts = hub("Qwen/Qwen3-0.6B");
    let config = facts.config.as_mut().expect("config");
    let mut kinds = vec![json!("full_attention"); 28];
    kinds[1] = json!("linear_attention");
    config.raw.insert("layer_types".into(), kinds.into());
    let v = plan(&[facts, hub("Qwen/Qwen3-8B")], &options(r#"{"devices": "h100-80gb"}"#)).expect("valid options");
    assert!(has(&v, 0, "config.unsupported_value"));
    assert!(has(&v, 0, "memory.unavailable"));
    let refused = v.artifacts[0]
        .memory
        .as_ref()
        .expect("the stored weights, a lower bound");
    assert!(refused.lower_bound && refused.kv_cache.is_empty());
    assert_eq!(refused.weights_bytes, v.artifacts[0].weights_bytes);
    assert!(
        v.artifacts[1].memory.as_ref().is_some_and(|m| !m.lower_bound),
        "the other artifact is still sized"
    );
    let system = v.memory.as_ref().expect("system block");
    assert_eq!(system.fits, None, "a lower bound that fits proves nothing");
    assert_eq!(system.max_context_that_fits, None);
    assert!(!v.admissible);
}

/// A refused architecture whose stored weights alone exceed the devices does not fit,
/// whatever else is unknown about it.
#[test]
fn refused_weights_that_exceed_the_devices_do_not_fit() {
    let mut facts = hub("Qwen/Qwen3-8B");
    facts
        .config
        .as_mut()
        .expect("config")
        .raw
        .insert("model_type".into(), json!("qwen9"));
    let v = plan(&[facts], &options(r#"{"devices": "24GB"}"#)).expect("valid options");
    assert!(has(&v, 0, "architecture.unknown"));
    assert!(!has(&v, 0, "memory.weights_exceed_devices"), "16.4 GB fits in 24 GB");
    assert_eq!(v.memory.as_ref().and_then(|m| m.fits), None);
    let mut facts = hub("Qwen/Qwen3-8B");
    facts
        .config
        .as_mut()
        .expect("config")
        .raw
        .insert("model_type".into(), json!("qwen9"));
    let v = plan(&[facts], &options(r#"{"devices": "8GB"}"#)).expect("valid options");
    assert!(has(&v, 0, "memory.weights_exceed_devices"));
    assert_eq!(v.memory.as_ref().and_then(|m| m.fits), Some(false));
    assert!(v.memory.as_ref().is_some_and(|m| m.per_device.iter().all(|d| !d.fits)));
}

#[test]
fn no_architecture_means_no_memory() {
    let mut facts = hub("Qwen/Qwen3-0.6B");
    facts.config = None;
    let v = plan(&[facts], &options(r#"{"sequences": 1}"#)).expect("valid options");
    assert!(has(&v, 0, "config.missing") && has(&v, 0, "memory.unavailable"));
    let memory = v.artifacts[0].memory.as_ref().expect("weights as stored");
    assert!(memory.lower_bound && memory.kv_cache.is_empty() && memory.kv_cache_bytes == 0);
    assert_eq!(v.memory.as_ref().and_then(|m| m.fits), None);
}

#[test]
fn a_gguf_layer_without_kv_heads_gets_no_number() {
    let mut facts = hub("Qwen/Qwen3-8B-GGUF");
    let Content::Gguf { parts, .. } = &mut facts.content else {
        panic!("gguf")
    };
    let mut heads = vec![Value::UInt(8); 36];
    heads[5] = Value::UInt(0);
    parts[0]
        .header
        .kv
        .insert("qwen3.attention.head_count_kv".into(), Value::Array(heads));
    let v = plan(&[facts], &options(r#"{"sequences": 1}"#)).expect("valid options");
    assert!(has(&v, 0, "memory.unavailable"), "{:?}", codes(&v, 0));
    assert!(v.artifacts[0].memory.is_none());
}

#[test]
fn per_layer_kv_heads_from_gguf_are_honoured() {
    let mut facts = hub("Qwen/Qwen3-8B-GGUF");
    let Content::Gguf { parts, .. } = &mut facts.content else {
        panic!("gguf")
    };
    // Half the layers with 4 KV heads, half with 8.
    let heads = (0..36).map(|l| Value::UInt(if l % 2 == 0 { 4 } else { 8 })).collect();
    parts[0]
        .header
        .kv
        .insert("qwen3.attention.head_count_kv".into(), Value::Array(heads));
    let v = plan(&[facts], &options(r#"{"context": 1}"#)).expect("valid options");
    let m = v.artifacts[0].memory.as_ref().expect("memory");
    assert_eq!(m.kv_cache_bytes_per_token, 18 * 2 * 4 * 128 * 2 + 18 * 2 * 8 * 128 * 2);
    let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
    assert_eq!(arch.kv_heads, 8);
    assert_eq!(arch.kv_heads_per_layer.as_ref().map(Vec::len), Some(36));
}

#[test]
fn hostile_option_values_saturate_instead_of_wrapping() {
    let extreme = options(&format!(
        r#"{{"context": {}, "sequences": {}, "devices": "mi325x:{}", "tensor_parallel": 1, "gpu_utilization": 0.000001}}"#,
        preflight_plan::options::MAX_CONTEXT,
        preflight_plan::options::MAX_SEQUENCES,
        preflight_plan::options::MAX_DEVICES / 2,
    ));
    for repo in ["deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "Qwen/Qwen3-8B-GGUF"] {
        let v = plan(&[hub(repo)], &extreme).expect("valid options");
        let m = v.memory.expect("memory");
        assert_eq!(m.kv_cache_bytes, u64::MAX, "{repo}: saturated, not wrapped");
        assert_eq!(m.fits, Some(false));
        assert!(m.total_bytes >= m.weights_bytes);
    }
    // Options a caller never validated are refused by the planner too, never planned.
    let unvalidated = PlanOptions {
        context: Some(0),
        tensor_parallel: Some(0),
        ..PlanOptions::default()
    };
    let refused = plan(&[hub("Qwen/Qwen3-0.6B")], &unvalidated).expect_err("invalid options");
    assert_eq!(refused, unvalidated.validate().expect_err("invalid"));
}

/// A degree the model cannot be split over is the caller's mistake (exit 2, HTTP 400) with
/// the degrees that work — never a finding that makes the checkpoint inadmissible.
#[test]
fn a_tensor_parallel_degree_the_model_cannot_split_is_refused_with_the_ones_that_do() {
    // Llama-3.1-8B: 32 heads, 8 KV heads, MLP 14,336 — 3 divides none of them.
    let refused = plan(
        &[hub("meta-llama/Llama-3.1-8B")],
        &options(r#"{"devices": "h100-80gb:3", "tensor_parallel": 3}"#),
    )
    .expect_err("3 does not split it");
    assert_eq!(refused.option, "tensor_parallel");
    assert!(
        refused
            .message
            .ends_with("degrees that split it and divide the 3 devices: 1"),
        "{}",
        refused.message
    );
    let refused = plan(&[hub("meta-llama/Llama-3.1-8B")], &options(r#"{"tensor_parallel": 3}"#)).expect_err("3");
    assert!(
        refused.message.ends_with("degrees that split it: 1, 2, 4, 8, 16"),
        "{}",
        refused.message
    );
    // A degree that splits it plans as before.
    let v = plan(
        &[hub("meta-llama/Llama-3.1-8B")],
        &options(r#"{"devices": "h100-80gb:4", "tensor_parallel": 4}"#),
    )
    .expect("4 splits it");
    assert!(v.admissible);
    assert_eq!(v.memory.as_ref().map(|m| m.tensor_parallel), Some(4));
}
