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
    // SGLang's data-parallel attention is planned (below); llama.cpp has none, and SGLang's
    // drafting under it is not modelled.
    let e = refused(
        r#"{"engine": "llama.cpp", "devices": "h100-80gb:2", "data_parallel": 2}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "data_parallel");
    let e = refused(
        r#"{"engine": "sglang", "devices": "h100-80gb:8", "data_parallel": 2, "speculative": "mtp:1"}"#,
        "Qwen/Qwen3-30B-A3B",
    );
    assert_eq!(e.option, "data_parallel");
    let dp: PlanOptions =
        serde_json::from_str(r#"{"engine": "sglang", "devices": "h100-80gb:8", "data_parallel": 2}"#).expect("json");
    assert!(dp.validate().is_ok());
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

/// SGLang 0.5.23's data-parallel attention, `--tensor-parallel 2 --data-parallel 4` =
/// `--tp-size 8 --attn-dp-size 4` (the deprecated `--tp-size 8 --dp-size 4
/// --enable-dp-attention`, `arg_groups/parallel_hook.py:39-61`), Qwen3-30B-A3B (BF16; hidden
/// 2,048, 32 heads, 4 KV heads of 128, vocab 151,936, 48 layers of 128 experts 768 wide,
/// untied). `attn_tp_size = tp_size // attn_dp_size = 2` (`runtime_context.py:73-76`). One
/// rank holds, by hand:
/// - QKV/O over attn_tp 2 (`parallel_group="attn_tp"`, `models/qwen3_moe.py:525-543`): 48 ×
///   (2,048 × 4,096 + 2 × 2,048 × 512 + 4,096 × 2,048) × 2 B = 1,811,939,328 / 2 = 905,969,664;
/// - the embedding over attn_tp 2 (`use_attn_tp_group=is_dp_attention_enabled()`,
///   `models/qwen2_moe.py:1115-1120`): 151,936 × 2,048 × 2 = 622,329,856 / 2 = 311,164,928;
/// - the LM head over the TP group of 8 (`use_attn_tp_group=enable_dp_lm_head`, off by
///   default, `models/qwen3_moe.py:1017-1023`): 622,329,856 / 8 = 77,791,232;
/// - the experts sliced over the TP group (`moe_tp_size = tp_size // ep_size // moe_dp_size`,
///   `runtime_context.py:154`): 57,982,058,496 / 8 = 7,247,757,312;
/// - routers and norms whole: 48 × 128 × 2,048 × 2 = 25,165,824 and (48 × (2 × 2,048 + 2 ×
///   128) + 2,048) × 2 = 421,888.
///
/// Total 8,568,270,848. The KV pool's heads split over attn_tp (`get_num_kv_heads(attn_tp_size)`,
/// `model_executor/pool_configurator.py:356,492`, `configs/model_config.py:1700-1711`): 4 / 2
/// = 2 heads × 128 × (K + V) × 2 B × 48 layers = 49,152 bytes a token, 402,653,184 at 8,192.
#[test]
fn sglang_data_parallel_attention_splits_attention_over_its_group_only() {
    let json =
        r#"{"engine": "sglang", "devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 4, "context": 8192}"#;
    let m = system_of(&["Qwen/Qwen3-30B-A3B"], json);
    assert_eq!((m.tensor_parallel, m.data_parallel), (2, 4));
    let rank = m.per_rank.expect("placed");
    let embedding = 151_936 * 2_048 * 2;
    let attention = 48 * (2_048 * 4_096 + 2 * 2_048 * 512 + 4_096 * 2_048) * 2;
    let by_hand = attention / 2
        + embedding / 2
        + embedding / 8
        + QWEN3_MOE_EXPERTS / 8
        + 48 * 128 * 2_048 * 2
        + (48 * (2 * 2_048 + 2 * 128) + 2_048) * 2;
    assert_eq!(by_hand, 8_568_270_848);
    assert_eq!(rank.weights_bytes, by_hand);
    assert_eq!(rank.kv_cache_bytes, 2 * 128 * 2 * 2 * 48 * 8_192);
    assert_eq!(rank.kv_cache_bytes, 402_653_184);
    // Every rank of the TP group of 8 counted once.
    assert_eq!(m.total_bytes, 8 * rank.total_bytes);
    // vLLM at the same degrees splits the LM head by its TP 2 (each DP engine its own head).
    let vllm = system_of(
        &["Qwen/Qwen3-30B-A3B"],
        r#"{"engine": "vllm", "devices": "h100-80gb:8", "tensor_parallel": 2, "data_parallel": 4, "context": 8192}"#,
    )
    .per_rank
    .expect("placed");
    assert_eq!(vllm.weights_bytes - rank.weights_bytes, embedding / 2 - embedding / 8);
    // Plain SGLang TP 8 splits the attention, embedding and KV heads 8 ways, each rank
    // keeping one whole KV head of 4 (`models/qwen3_moe.py:509-517`): its K/V rows, 2 × 128 ×
    // 2,048, where an eighth of the 4 heads' would be half that — 262,144 parameters a layer
    // more, 48 × 262,144 × 2 B = 25,165,824. DP attention holds twice its KV a token.
    let tp8 = system_of(
        &["Qwen/Qwen3-30B-A3B"],
        r#"{"engine": "sglang", "devices": "h100-80gb:8", "context": 8192}"#,
    )
    .per_rank
    .expect("placed");
    assert_eq!(rank.kv_cache_bytes, 2 * tp8.kv_cache_bytes);
    assert_eq!(
        rank.weights_bytes - tp8.weights_bytes,
        attention / 2 - (attention / 8 + 48 * 262_144 * 2) + embedding / 2 - embedding / 8
    );
    // `mem_fraction_static`'s default counts the whole TP group and the DP graphs' padding
    // (`arg_groups/memory_hook.py:295-312,370-378`). On 80 GiB (81,920 MiB), tp_size 8: 512 +
    // 8,192 × 1.5 + 8/8 × 1,024 + 512 × 2 + 58 prefill graphs × 8 = 15,312 MiB (0.813 without
    // DP), plus 512 × 4 × 3 + 512 × 4 × 1.5 (batch 512 > 300) = 24,528 → 0.701.
    assert_eq!(m.gpu_utilization, 0.701);
    let tp8_share = system_of(
        &["Qwen/Qwen3-30B-A3B"],
        r#"{"engine": "sglang", "devices": "h100-80gb:8", "context": 8192}"#,
    )
    .gpu_utilization;
    assert_eq!(tp8_share, 0.813);
}

/// DeepSeek's model class under SGLang's data-parallel attention (`models/deepseek_v2.py`):
/// the MLA projections and the embedding on the attention's ranks, the first dense layer's
/// MLP, the shared experts and the LM head over the whole TP group. DeepSeek-V2-Lite (BF16,
/// no q LoRA) at `--tp-size 4 --attn-dp-size 4`, worked by hand from its config.
#[test]
fn sglang_data_parallel_attention_splits_deepseek_as_its_model_class_does() {
    const REPO: &str = "deepseek-ai/DeepSeek-V2-Lite-Chat";
    let dp = system_of(
        &[REPO],
        r#"{"engine": "sglang", "devices": "h100-80gb:4", "tensor_parallel": 1, "data_parallel": 4, "context": 8192}"#,
    );
    assert_eq!((dp.tensor_parallel, dp.data_parallel), (1, 4));
    let dp_rank = dp.per_rank.expect("placed");
    let (hidden, layers, heads, vocab) = (2_048u64, 27u64, 16u64, 102_400u64);
    // q_proj (192-wide heads), kv_b_proj (128 + 128 per head), o_proj; kv_a_proj_with_mqa is
    // replicated under any split.
    let attention = layers * (hidden * heads * 192 + 512 * heads * 256 + heads * 128 * hidden) * 2;
    let embedding = vocab * hidden * 2;
    let dense_mlp = 3 * hidden * 10_944 * 2;
    let shared_experts = (layers - 1) * 3 * hidden * 2 * 1_408 * 2;
    let experts = (layers - 1) * 64 * 3 * hidden * 1_408 * 2;
    // Replicated on every rank: the latent down-projection, the router, the norms.
    let replicated =
        (layers * hidden * (512 + 64) + (layers - 1) * 64 * hidden + layers * (2 * hidden + 512) + hidden) * 2;
    let by_hand = attention + embedding + (embedding + dense_mlp + shared_experts + experts) / 4 + replicated;
    assert_eq!(dp_rank.weights_bytes, by_hand);
    // Plain TP 4 splits the attention and the embedding four ways too; the rest alike.
    let tp = system_of(
        &[REPO],
        r#"{"engine": "sglang", "devices": "h100-80gb:4", "tensor_parallel": 4, "context": 8192}"#,
    )
    .per_rank
    .expect("placed");
    assert_eq!(
        dp_rank.weights_bytes - tp.weights_bytes,
        (attention + embedding) * 3 / 4
    );
    // The latent is not split by heads: a token costs every rank the same either way,
    // (512 + 64) × 2 bytes a layer.
    assert_eq!(dp_rank.kv_cache_bytes, tp.kv_cache_bytes);
    assert_eq!(dp_rank.kv_cache_bytes, layers * 576 * 2 * 8_192);
    assert_eq!(dp.total_bytes, 4 * dp_rank.total_bytes);
}

/// A model class whose split under SGLang's data-parallel attention is not read is not sized.
#[test]
fn sglang_data_parallel_attention_of_an_unread_model_is_unavailable() {
    let v = plan_with(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"engine": "sglang", "devices": "h100-80gb:4", "tensor_parallel": 2, "data_parallel": 2}"#,
    );
    let finding = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code.as_str() == "memory.unavailable" && f.subject == "data_parallel")
        .expect("unavailable");
    assert!(finding.detail.contains("llama"), "{}", finding.detail);
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
