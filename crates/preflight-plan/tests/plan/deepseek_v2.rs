//! DeepSeek-V2-Lite (`deepseek_v2`): MLA without a query down-projection (`q_lora_rank` null),
//! 64 routed experts top-6 plus 2 shared after one dense layer, yarn rope — planned from the
//! bundled header-only checkpoint and held against figures worked by hand from its config
//! and vLLM 0.19.0's source.

use crate::support::{blocking, kinds, memory_of, plan_with, system_of};

const REPO: &str = "deepseek-ai/DeepSeek-V2-Lite-Chat";

/// 27 layers × one latent of kv_lora_rank 512 + qk_rope_head_dim 64, in bf16.
const LATENT_BYTES_PER_TOKEN: u64 = 27 * (512 + 64) * 2;

#[test]
fn deepseek_v2_lite_plans_as_mla_with_moe() {
    let verdict = plan_with(&[REPO], r#"{"context": 8192}"#);
    assert_eq!(blocking(&verdict), vec![], "{:#?}", verdict.artifacts[0].findings);
    assert_eq!(kinds(&verdict), vec!["mla".to_owned(); 27]);
    let m = memory_of(REPO, r#"{"context": 8192}"#);
    // Every tensor as stored: 15,706,484,224 BF16 elements.
    assert_eq!(m.weights_bytes, 31_412_968_448);
    // One deepseek_yarn table: original 4,096 × factor 40 rows of qk_rope_head_dim 64, bf16.
    assert_eq!(m.buffers_bytes, 4096 * 40 * 64 * 2);
    assert_eq!(m.kv_cache_bytes_per_token, LATENT_BYTES_PER_TOKEN);
    assert_eq!(m.kv_cache_bytes, 8192 * LATENT_BYTES_PER_TOKEN);
}

/// vLLM 0.19 pages MLA by the selected backend's block: FlashAttention MLA on 9.x (16),
/// FlashInfer MLA on 10.x (32); "GPU KV cache size" is whole blocks × that block.
#[test]
fn mla_pages_are_the_backends_blocks() {
    for (devices, block) in [("h100-80gb:1", 16u64), ("b200:1", 32)] {
        let options = format!(r#"{{"context": 8192, "devices": "{devices}"}}"#);
        let system = system_of(&[REPO], &options);
        let pool = system.kv_pool_bytes.expect("pool");
        let page = LATENT_BYTES_PER_TOKEN * block;
        assert_eq!(system.kv_pool_tokens, Some(pool / page * block), "{devices}");
    }
}

/// The profile run's peak: the sampler warm-up over 1,024 requests of a 102,400 vocabulary
/// (bf16 logits, three f32 arrays, 132 Triton scratch rows) and the 8,192 hidden states,
/// on top of the Triton fused-MoE workspaces the forward pass left in the workspace manager:
/// 8,192 tokens × top-6 × (max(1,408, 2,048) + max(2,816, 2,048)) bf16 elements.
#[test]
fn the_moe_workspaces_stay_under_the_sampler_warm_up() {
    let m = memory_of(REPO, r#"{"context": 8192, "devices": "h100-80gb:1"}"#);
    let sampler = 1024 * 102_400 * (2 + 12) + 132 * 102_400 * 4 + 8192 * 2048 * 2;
    let workspace = 8192 * 6 * (2048 + 2816) * 2;
    assert_eq!(workspace, 478_150_656);
    assert_eq!(m.per_rank.expect("placed").activation_bytes, sampler + workspace);
}
