//! Hostile key/values and configs from the second attack run: a count that sizes a loop or
//! an allocation is checked where it is read, and a key that understates the tensors it
//! sizes is a shape mismatch — never an abort, never a plan that "fits" on a lie. Each test
//! is named after the attack it pins; each failed before the fix (aborted, or planned
//! admissible).

use preflight_formats::facts::{ArtifactFacts, Content};
use preflight_formats::gguf::Value;
use preflight_plan::{Verdict, plan};
use serde_json::json;

use super::support::{codes, fixtures, hub, options};

/// The Qwen3-30B-A3B Q4_K_M-like header llama.cpp loaded for the oracle (128 experts, top-8).
fn qwen3moe_gguf() -> ArtifactFacts {
    let dir = fixtures().join("oracles/llamacpp");
    let name = "Qwen3-30B-A3B-Q4_K_M-like.gguf";
    let size: u64 = std::fs::read_to_string(dir.join(format!("{name}.size")))
        .expect("size")
        .trim()
        .parse()
        .expect("a size");
    preflight_testhub::facts::gguf_stub(&dir.join(format!("{name}.stub.gz")), size)
}

/// `facts` with GGUF key `key` set to `value`.
fn with_kv(mut facts: ArtifactFacts, key: &str, value: Value) -> ArtifactFacts {
    let Content::Gguf { parts, .. } = &mut facts.content else {
        panic!("a GGUF")
    };
    parts[0].header.kv.insert(key.to_owned(), value);
    facts
}

/// `facts` with config.json key `key` set to `value`.
fn with_config(mut facts: ArtifactFacts, key: &str, value: serde_json::Value) -> ArtifactFacts {
    facts
        .config
        .as_mut()
        .expect("a config")
        .raw
        .insert(key.to_owned(), value);
    facts
}

fn llama_cpp_plan(facts: ArtifactFacts) -> Verdict {
    plan(
        &[facts],
        &options(r#"{"engine": "llama.cpp", "context": 4096, "devices": "l4:1"}"#),
    )
    .expect("valid options")
}

fn refused_with(verdict: &Verdict, code: &str, subject: &str) {
    assert!(!verdict.admissible, "{:#?}", verdict.artifacts[0].findings);
    assert!(
        verdict.artifacts[0]
            .findings
            .iter()
            .any(|f| f.code == code && f.subject.ends_with(subject)),
        "want {code} on {subject}: {:#?}",
        verdict.artifacts[0].findings
    );
    assert_ne!(
        verdict.memory.as_ref().and_then(|m| m.fits),
        Some(true),
        "a refused model never fits"
    );
}

#[test]
fn a_billion_experts_used_per_token_is_refused_not_replayed() {
    // Replayed as given, llama.cpp's graph asked for 8 GB of nodes and the process aborted.
    for used in [1_000_000_000u64, 1 << 63, 1_000_000, 129] {
        let facts = with_kv(qwen3moe_gguf(), "qwen3moe.expert_used_count", Value::UInt(used));
        let verdict = llama_cpp_plan(facts);
        refused_with(&verdict, "config.invalid_value", "qwen3moe.expert_used_count");
    }
}

#[test]
fn top_k_above_the_expert_count_in_a_config_is_refused_under_every_engine() {
    for engine in ["vllm", "sglang", "llama.cpp"] {
        for top_k in [json!(1e9), json!(1_000_000_000u64), json!(129)] {
            let facts = with_config(hub("Qwen/Qwen3-30B-A3B"), "num_experts_per_tok", top_k.clone());
            let verdict = plan(
                &[facts],
                &options(&format!(
                    r#"{{"engine": "{engine}", "context": 4096, "devices": "h100-80gb:1"}}"#
                )),
            )
            .expect("valid options");
            refused_with(&verdict, "config.invalid_value", "num_experts_per_tok");
        }
    }
}

#[test]
fn kv_heads_that_understate_the_k_projection_are_a_shape_mismatch() {
    // Identical tensors (K/V projections 8 heads × 128); the header claims 1 head of 1.
    let facts = hub("Qwen/Qwen3-8B-GGUF");
    let facts = with_kv(facts, "qwen3.attention.head_count_kv", Value::UInt(1));
    let facts = with_kv(facts, "qwen3.attention.key_length", Value::UInt(1));
    let facts = with_kv(facts, "qwen3.attention.value_length", Value::UInt(1));
    let verdict = llama_cpp_plan(facts);
    refused_with(&verdict, "config.shape_mismatch", "attn_k.weight");
}

#[test]
fn every_gguf_key_that_sizes_a_tensor_is_checked_against_it() {
    let cases: &[(&str, u64, &str)] = &[
        ("qwen3.embedding_length", 1 << 40, "config.invalid_value"),
        ("qwen3.embedding_length", 4096 * 2, "config.shape_mismatch"),
        ("qwen3.attention.head_count", 1 << 32, "config.invalid_value"),
        ("qwen3.attention.head_count", 64, "config.shape_mismatch"),
        ("qwen3.attention.head_count_kv", u64::MAX, "config.invalid_value"),
        ("qwen3.attention.head_count_kv", 4, "config.shape_mismatch"),
        ("qwen3.vocab_size", u64::MAX, "config.invalid_value"),
        ("qwen3.vocab_size", 151_937, "config.shape_mismatch"),
        ("qwen3.feed_forward_length", u64::MAX, "config.invalid_value"),
        ("qwen3.feed_forward_length", 12_289, "config.shape_mismatch"),
        ("qwen3.context_length", 1 << 62, "config.invalid_value"),
    ];
    for (key, value, code) in cases {
        let facts = with_kv(hub("Qwen/Qwen3-8B-GGUF"), key, Value::UInt(*value));
        let verdict = llama_cpp_plan(facts);
        let codes = codes(&verdict, 0);
        assert!(!verdict.admissible, "{key} = {value}: {codes:?}");
        assert!(
            codes.iter().any(|c| c == code),
            "{key} = {value}: want {code}, got {codes:?}"
        );
    }
}

#[test]
fn moe_gguf_keys_are_checked_against_the_expert_tensors() {
    for (key, value, code) in [
        ("qwen3moe.expert_count", 1u64 << 40, "config.invalid_value"),
        ("qwen3moe.expert_count", 256, "config.shape_mismatch"),
        ("qwen3moe.expert_feed_forward_length", 1536, "config.shape_mismatch"),
    ] {
        let verdict = llama_cpp_plan(with_kv(qwen3moe_gguf(), key, Value::UInt(value)));
        let codes = codes(&verdict, 0);
        assert!(
            codes.iter().any(|c| c == code),
            "{key} = {value}: want {code}, got {codes:?}"
        );
    }
}

#[test]
fn a_per_block_array_of_the_wrong_length_is_a_finding_not_dropped() {
    for key in ["qwen3.attention.head_count_kv", "qwen3.feed_forward_length"] {
        let values = vec![Value::UInt(8); 3];
        let verdict = llama_cpp_plan(with_kv(hub("Qwen/Qwen3-8B-GGUF"), key, Value::Array(values)));
        refused_with(&verdict, "config.invalid_value", key);
    }
}

#[test]
fn the_untouched_headers_stay_admissible() {
    // The checks above must not fire on the real layouts they guard.
    for facts in [hub("Qwen/Qwen3-8B-GGUF"), qwen3moe_gguf()] {
        let verdict = llama_cpp_plan(facts);
        assert!(verdict.admissible, "{:#?}", verdict.artifacts[0].findings);
    }
}

#[test]
fn an_open_device_count_replays_the_llama_cpp_graph_once_per_distinct_shape() {
    // Placement tries up to 128 counts; each used to replay the graph ~3 + log2(context)
    // times (4,096 layers at a context of 2^62 ran past a minute). A device count changes how
    // layers are split, never the graph: one replay serves every candidate, and a device on
    // which nothing fits costs one try of the longest-context search, not a search.
    let facts = with_kv(hub("Qwen/Qwen3-8B-GGUF"), "qwen3.context_length", Value::UInt(1 << 32));
    let before = preflight_plan::replays_on_this_thread();
    let verdict = plan(
        &[facts],
        &options(r#"{"engine": "llama.cpp", "context": 32768, "devices": "1KiB"}"#),
    )
    .expect("valid options");
    let replays = preflight_plan::replays_on_this_thread() - before;
    let memory = verdict.memory.as_ref().expect("memory");
    assert_eq!(memory.fits, Some(false), "nothing fits on 1 KiB devices");
    assert_eq!(memory.max_context_that_fits, Some(0));
    assert!(replays <= 3, "{replays} replays for one plan");
}

#[test]
fn a_rope_factor_that_is_not_a_sane_number_is_blocking() {
    // NaN and Infinity arrive as strings (Python's json writes them bare); −8 and 1e308 are
    // numbers no model uses. Each was planned as plain RoPE, or a table of 2^64 − 1 bytes.
    for factor in [json!("NaN"), json!("Infinity"), json!(-8.0), json!(1e308)] {
        let rope = json!({"rope_type": "linear", "factor": factor});
        let facts = with_config(hub("Qwen/Qwen3-8B"), "rope_scaling", rope);
        let verdict =
            plan(&[facts], &options(r#"{"context": 4096, "devices": "h100-80gb:1"}"#)).expect("valid options");
        refused_with(&verdict, "config.unsupported_value", "rope_scaling");
    }
}

#[test]
fn a_context_past_two_to_the_32_is_not_a_real_model() {
    let facts = with_config(hub("Qwen/Qwen3-8B"), "max_position_embeddings", json!(1u64 << 63));
    let verdict = plan(&[facts], &options(r#"{"context": 4096, "devices": "h100-80gb:1"}"#)).expect("valid options");
    refused_with(&verdict, "config.invalid_value", "max_position_embeddings");
    // At the bound itself, the longest context that fits is within it too.
    let facts = with_config(hub("Qwen/Qwen3-8B"), "max_position_embeddings", json!(1u64 << 32));
    let verdict = plan(&[facts], &options(r#"{"context": 4096, "devices": "1024TiB:1"}"#)).expect("valid options");
    let longest = verdict
        .memory
        .as_ref()
        .and_then(|m| m.max_context_that_fits)
        .expect("a longest context");
    assert!(longest <= 1 << 32, "{longest}");
}

#[test]
fn a_device_larger_than_any_device_is_bad_input() {
    for devices in ["18446744073709551615", "2048TiB", "h100-80gb=2048TiB"] {
        let parsed: Result<preflight_plan::PlanOptions, _> =
            serde_json::from_str(&format!(r#"{{"devices": "{devices}"}}"#));
        let refused = match parsed {
            Err(_) => true,
            Ok(options) => options.validate().is_err(),
        };
        assert!(refused, "{devices} accepted");
    }
}
