//! How the engine is deployed, beyond the devices: expert and data parallelism (vLLM
//! `--enable-expert-parallel`, `--data-parallel-size`; SGLang `--ep-size`) — what a rank
//! holds when experts are spread whole over the ranks — and `--dtype`; the options a
//! deployment cannot have are refused as usage errors.

use preflight_plan::{PlanOptions, plan};

use crate::support::{hub, options, plan_with, system_of};

/// Qwen3-30B-A3B's routed experts: 48 layers × 128 experts × (gate, up, down) 3 × 2,048 ×
/// 768 parameters × 2 bytes (BF16).
const QWEN3_MOE_EXPERTS: u64 = 48 * 128 * 3 * 2048 * 768 * 2;

fn rank_weights(json: &str) -> u64 {
    system_of(&["Qwen/Qwen3-30B-A3B"], json)
        .per_rank
        .expect("placed")
        .weights_bytes
}

#[test]
fn expert_parallel_ranks_hold_whole_experts_an_even_share() {
    assert_eq!(QWEN3_MOE_EXPERTS, 57_982_058_496);
    // TP 2 alone slices every expert in two; TP 2 × DP 4 with EP gives each of 8 ranks 16
    // whole experts: an eighth of them instead of a half. Attention stays split by TP 2.
    let halves = rank_weights(r#"{"devices": "h100-80gb:2"}"#);
    let spread = rank_weights(
        r#"{"devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 4, "expert_parallel": true}"#,
    );
    assert_eq!(halves - spread, QWEN3_MOE_EXPERTS / 2 - QWEN3_MOE_EXPERTS / 8);
    // Without EP, vLLM slices the experts over all 8 ranks of the DP deployment
    // (`flatten_tp_across_dp_and_pcp`): an eighth each too, as slices.
    let sliced = rank_weights(r#"{"devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 4}"#);
    assert_eq!(sliced, spread);
    // Independent replicas (no data_parallel) keep TP 2's halves.
    assert_eq!(
        rank_weights(r#"{"devices": "h100-80gb:8", "tensor_parallel": 2}"#),
        halves
    );
    // Three ranks: 128 = 43 + 43 + 42, and the busiest rank decides.
    let whole = rank_weights(r#"{"devices": "h100-80gb:1"}"#);
    let third = rank_weights(
        r#"{"devices": "h100-80gb:3", "tensor_parallel": 1, "data_parallel": 3, "expert_parallel": true}"#,
    );
    assert_eq!(
        whole - third,
        QWEN3_MOE_EXPERTS - (QWEN3_MOE_EXPERTS * 43).div_ceil(128)
    );
    // SGLang's --ep-size is the tensor-parallel group: 8 ranks, 16 experts each.
    let sglang = rank_weights(r#"{"engine": "sglang", "devices": "h100-80gb:8", "expert_parallel": true}"#);
    let sglang_sliced = rank_weights(r#"{"engine": "sglang", "devices": "h100-80gb:8"}"#);
    assert_eq!(
        sglang, sglang_sliced,
        "128 experts over 8 ranks: the same bytes, whole or sliced"
    );
}

#[test]
fn the_block_counts_every_rank_of_every_replica() {
    let m = system_of(
        &["Qwen/Qwen3-30B-A3B"],
        r#"{"devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 4, "expert_parallel": true, "context": 8192}"#,
    );
    assert_eq!((m.tensor_parallel, m.data_parallel, m.expert_parallel), (2, 4, Some(8)));
    let rank = m.per_rank.expect("placed");
    assert_eq!(m.total_bytes, 8 * rank.total_bytes);
    assert_eq!(m.per_device.len(), 8);
}

#[test]
fn parallelism_the_devices_cannot_have_is_a_usage_error() {
    let refused = |json: &str, repo: &str| {
        // Parsed but not validated: `plan` validates, and refuses.
        let given: PlanOptions = serde_json::from_str(json).expect("json");
        plan(&[hub(repo)], &given).map(|_| ()).expect_err(json)
    };
    let e = refused(
        r#"{"devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 3}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "data_parallel");
    assert!(e.message.contains("8"), "{}", e.message);
    let e = refused(
        r#"{"devices": "h100-80gb:8", "data_parallel": 3}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "data_parallel");
    // SGLang's data parallelism is attention-only and not modelled: the option is vLLM's.
    let e = refused(
        r#"{"engine": "sglang", "devices": "h100-80gb:8", "data_parallel": 2}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "data_parallel");
    // llama.cpp has no expert parallelism, named or implied by a GGUF.
    let e = refused(
        r#"{"engine": "llama.cpp", "devices": "h100-80gb:1", "expert_parallel": true}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "expert_parallel");
    let e = refused(
        r#"{"devices": "h100-80gb:1", "expert_parallel": true}"#,
        "Qwen/Qwen3-8B-GGUF",
    );
    assert_eq!(e.option, "expert_parallel");
    // Without devices the degrees stand alone.
    let free: PlanOptions = options(r#"{"tensor_parallel": 2, "data_parallel": 4, "expert_parallel": true}"#);
    assert!(free.validate().is_ok());
    assert_eq!(
        plan_with(
            &["Qwen/Qwen3-30B-A3B"],
            r#"{"tensor_parallel": 2, "data_parallel": 4, "expert_parallel": true}"#
        )
        .memory
        .expect("memory")
        .expert_parallel,
        Some(8)
    );
}

/// `--dtype float32` on a BF16 checkpoint: weights load in f32, the model computes in f32,
/// and the `auto` KV cache follows it (vLLM 0.19 logged 29.98 GiB and 262,144 bytes a token
/// for Llama-3.1-8B-Instruct, record 21 of the startup oracle).
#[test]
fn dtype_sets_what_the_model_computes_and_loads_in() {
    let bf16 = crate::support::memory_of("meta-llama/Llama-3.1-8B", r#"{"context": 8192}"#);
    let f32 = crate::support::memory_of("meta-llama/Llama-3.1-8B", r#"{"context": 8192, "dtype": "float32"}"#);
    assert_eq!(f32.kv_dtype, "f32");
    assert_eq!(f32.kv_cache_bytes_per_token, 2 * bf16.kv_cache_bytes_per_token);
    // 8,030,261,248 parameters × 4 bytes; the RoPE table in f32 too (131,072 × 128 × 4).
    assert_eq!(f32.weights_bytes, 8_030_261_248 * 4);
    assert_eq!(f32.buffers_bytes, 131_072 * 128 * 4);
    // A named KV dtype still wins over the compute dtype's.
    let fp8_cache = crate::support::memory_of(
        "meta-llama/Llama-3.1-8B",
        r#"{"context": 8192, "dtype": "float32", "kv_dtype": "fp8"}"#,
    );
    assert_eq!(fp8_cache.kv_dtype, "fp8");
    // llama.cpp computes in the GGUF's types: the option is refused there.
    let given: PlanOptions = serde_json::from_str(r#"{"dtype": "float16", "devices": "h100-80gb:1"}"#).expect("json");
    assert_eq!(
        plan(&[hub("Qwen/Qwen3-8B-GGUF")], &given)
            .map(|_| ())
            .expect_err("refused")
            .option,
        "dtype"
    );
    let bad = serde_json::from_str::<PlanOptions>(r#"{"dtype": "float64"}"#).expect_err("not a dtype");
    assert!(bad.to_string().contains("bfloat16"), "{bad}");
}
