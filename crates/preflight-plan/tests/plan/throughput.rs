//! Throughput bounds (docs/throughput.md), hand-worked: decode ≤ bandwidth ÷ bytes a step
//! reads on a rank, prefill ≤ peak dense FLOPs ÷ FLOPs a token.

use preflight_plan::{Component, ThroughputBounds};

use crate::support::{memory_of, plan_with, system_of};

fn bounds(repo: &str, json: &str) -> ThroughputBounds {
    system_of(&[repo], json)
        .throughput_bounds
        .unwrap_or_else(|| panic!("{repo} {json}: no bounds"))
}

#[test]
fn llama_3_1_8b_bf16_decodes_on_one_h100_at_most_its_bandwidth_over_its_weights() {
    let b = bounds("meta-llama/Llama-3.1-8B", r#"{"devices": "h100-80gb:1", "context": 1}"#);
    // 8,030,261,248 parameters × 2 bytes (BF16) = 16.06 GB, all active.
    let weights: u64 = 8_030_261_248 * 2;
    assert_eq!(b.active_weights_bytes_per_rank, weights);
    // One token of KV: 32 layers × 8 KV heads × 128 × (K + V) × 2 bytes.
    let kv: u64 = 32 * 8 * 128 * 2 * 2;
    assert_eq!(b.decode_bytes_per_rank, weights + kv);
    // 3.35 TB/s ÷ 16.06 GB ≈ 208.6 tokens/s, and never more.
    let decode = b.decode_tokens_per_s.expect("H100 bandwidth is known");
    assert!((decode - 3.35e12 / (weights + kv) as f64).abs() < 1e-9, "{decode}");
    assert!((208.5..208.7).contains(&decode), "{decode}");
    // Prefill: 989 dense BF16 TFLOPS ÷ (2 × 8.03 B parameters + attention over one token).
    assert_eq!(b.compute_dtype, "bf16");
    let attention = 32.0 * 2.0 * 32.0 * 256.0 * 0.5;
    assert_eq!(b.prefill_flops_per_token, 2.0 * 8_030_261_248.0 + attention);
    let prefill = b.prefill_tokens_per_s.expect("H100 BF16 peak is known");
    assert!((61_570.0..61_590.0).contains(&prefill), "{prefill}");
}

#[test]
fn the_kv_read_grows_with_the_context_and_tensor_parallelism_splits_the_weights() {
    let short = bounds(
        "meta-llama/Llama-3.1-8B",
        r#"{"devices": "h100-80gb:1", "context": 1024}"#,
    );
    let long = bounds(
        "meta-llama/Llama-3.1-8B",
        r#"{"devices": "h100-80gb:1", "context": 131072}"#,
    );
    assert_eq!(
        long.decode_bytes_per_rank - short.decode_bytes_per_rank,
        130_048 * 131_072
    );
    assert!(long.decode_tokens_per_s < short.decode_tokens_per_s);
    assert!(
        long.prefill_tokens_per_s < short.prefill_tokens_per_s,
        "attention FLOPs grow with context"
    );
    let tp2 = bounds(
        "meta-llama/Llama-3.1-8B",
        r#"{"devices": "h100-80gb:2", "context": 1024}"#,
    );
    assert!(tp2.active_weights_bytes_per_rank < short.active_weights_bytes_per_rank * 6 / 10);
    let ratio = tp2.prefill_tokens_per_s.unwrap() / short.prefill_tokens_per_s.unwrap();
    assert!((ratio - 2.0).abs() < 1e-9, "two ranks share a token's FLOPs: {ratio}");
}

#[test]
fn moe_reads_its_active_experts_not_all_of_them() {
    let repo = "Qwen/Qwen3-30B-A3B";
    let json = r#"{"devices": "h100-80gb:1", "context": 1}"#;
    let b = bounds(repo, json);
    let memory = memory_of(repo, json);
    let verdict = plan_with(&[repo], json);
    let parameters = &verdict.artifacts[0].parameters;
    // BF16 experts: 128 routed, 8 a token; the other 120/128 of their bytes are not read.
    let experts = parameters.by_component[&Component::Experts] * 2;
    assert_eq!(
        b.active_weights_bytes_per_rank,
        memory.weights_bytes - experts / 128 * 120
    );
    assert!(b.active_weights_bytes_per_rank < memory.weights_bytes / 5);
    // And the prefill FLOPs follow the active parameters, not the total.
    let active = parameters.active_per_token.expect("moe") as f64;
    assert!(b.prefill_flops_per_token < 2.0 * active * 1.01);
    assert!(2.0 * active < 0.2 * 2.0 * parameters.total as f64);
}

#[test]
fn fp8_uses_the_fp8_peak_only_where_the_device_has_one_and_unknown_figures_stay_null() {
    let h100 = bounds("deepseek-ai/DeepSeek-V3", r#"{"devices": "h100-80gb:8", "context": 1}"#);
    let a100 = bounds("deepseek-ai/DeepSeek-V3", r#"{"devices": "a100-80gb:8", "context": 1}"#);
    assert_eq!(
        (h100.compute_dtype.as_str(), a100.compute_dtype.as_str()),
        ("fp8", "bf16")
    );
    // An RTX 4090 has NVIDIA's bandwidth but no dense-TFLOPS figure: a decode bound, no
    // prefill bound; an A10G has neither, and a device given by its size none.
    let rtx = bounds("meta-llama/Llama-3.1-8B", r#"{"devices": "rtx-4090", "context": 1}"#);
    assert!(rtx.decode_tokens_per_s.is_some());
    assert_eq!(rtx.prefill_tokens_per_s, None);
    let a10g = bounds("meta-llama/Llama-3.1-8B", r#"{"devices": "a10g=24GiB", "context": 1}"#);
    assert_eq!((a10g.decode_tokens_per_s, a10g.prefill_tokens_per_s), (None, None));
    let sized = bounds("meta-llama/Llama-3.1-8B", r#"{"devices": "80GiB", "context": 1}"#);
    assert_eq!(sized.decode_tokens_per_s, None);
    // No devices, no bounds.
    assert!(
        system_of(&["meta-llama/Llama-3.1-8B"], r#"{"context": 1}"#)
            .throughput_bounds
            .is_none()
    );
}
