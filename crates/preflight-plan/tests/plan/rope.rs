//! The RoPE cos/sin tables vLLM and SGLang keep beside the weights: one per distinct rope,
//! sized by the rope type's rule (`memory/buffers.rs` `rope_table_bytes`; SGLang's in FP32).
//! Each expected figure is worked by hand from the fixture's config.json: rows × rotated
//! channels × bytes.

use crate::support::{memory_of, system_of};

const MIB: u64 = 1 << 20;

fn tables(repo: &str, options: &str) -> u64 {
    memory_of(repo, options).buffers_bytes
}

const VLLM: &str = r#"{"engine": "vllm"}"#;

#[test]
fn one_table_of_max_position_rows_by_default() {
    // llama3 scaling reshapes the frequencies, not the rows: 131,072 × 128 × bf16.
    assert_eq!(tables("meta-llama/Llama-3.1-8B", VLLM), 131_072 * 128 * 2);
    assert_eq!(tables("meta-llama/Llama-3.1-8B", VLLM), 32 * MIB);
    // Phi-3-mini-4k: 4,096 positions × 96 channels.
    assert_eq!(tables("microsoft/Phi-3-mini-4k-instruct", VLLM), 4096 * 96 * 2);
    // Llama 4 Scout declares 10,485,760 positions: 2.5 GiB on every rank.
    assert_eq!(
        tables("meta-llama/Llama-4-Scout-17B-16E-Instruct", VLLM),
        10_485_760 * 128 * 2
    );
}

#[test]
fn linear_scaling_multiplies_the_rows_and_gemma_3_adds_a_local_table() {
    // gemma-3-4b-it (transformers-4 config): the global rope is linear × 8 over 131,072
    // positions; the sliding layers build a default one at rope_local_base_freq.
    assert_eq!(
        tables("google/gemma-3-4b-it", VLLM),
        8 * 131_072 * 256 * 2 + 131_072 * 256 * 2
    );
    // gemma-3-1b-it keys its ropes by layer type: two default tables (their thetas differ).
    assert_eq!(tables("google/gemma-3-1b-it", VLLM), 2 * 32_768 * 256 * 2);
}

#[test]
fn yarn_stretches_the_original_context() {
    // gpt-oss-20b: 4,096 × 32 rows of 64 channels, which vLLM keeps in f32.
    assert_eq!(tables("openai/gpt-oss-20b", VLLM), 4096 * 32 * 64 * 4);
    // DeepSeek-V3: 4,096 × 40 rows of the 64 rope channels of the MLA head.
    assert_eq!(tables("deepseek-ai/DeepSeek-V3", VLLM), 4096 * 40 * 64 * 2);
}

#[test]
fn partial_rotary_and_multimodal_rope_size_their_own_tables() {
    // Qwen3.5: a quarter of the 256-wide head, with room for 4 × 262,144 positions.
    assert_eq!(tables("Qwen/Qwen3.5-0.8B", VLLM), 4 * 262_144 * 64 * 2);
    // GLM-4.5-Air: partial_rotary_factor 0.5 of 128.
    assert_eq!(tables("zai-org/GLM-4.5-Air", VLLM), 131_072 * 64 * 2);
    // MiniMax-M2.7: `rotary_dim` 64 stands for the factor.
    assert_eq!(tables("MiniMaxAI/MiniMax-M2.7", VLLM), 204_800 * 64 * 2);
    // Gemma 4: the proportional global rope tables its whole 512-wide head, the sliding
    // layers' default rope their 256.
    assert_eq!(
        tables("google/gemma-4-31B-it", VLLM),
        262_144 * 512 * 2 + 262_144 * 256 * 2
    );
}

#[test]
fn models_without_rope_and_llama_cpp_keep_no_table() {
    assert_eq!(tables("nvidia/Nemotron-H-56B-Base-8K", VLLM), 0);
    assert_eq!(tables("meta-llama/Llama-3.1-8B", r#"{"engine": "llama.cpp"}"#), 0);
    assert_eq!(tables("Qwen/Qwen3-8B-GGUF", r#"{"engine": "llama.cpp"}"#), 0);
    // SGLang's rotary embedding is adapted from vLLM's: the same rows, but kept in FP32 on
    // CUDA and ROCm (`layers/rotary_embedding/base.py` l.116-120): 131,072 × 128 × 4.
    assert_eq!(tables("meta-llama/Llama-3.1-8B", r#"{"engine": "sglang"}"#), 64 * MIB);
}

#[test]
fn every_rank_holds_the_whole_table_and_the_pool_gives_it_up() {
    let one = system_of(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 8192}"#,
    );
    let four = system_of(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"engine": "vllm", "devices": "h100-80gb:4", "context": 8192}"#,
    );
    for m in [&one, &four] {
        let rank = m.per_rank.as_ref().expect("placed");
        assert_eq!(rank.buffers_bytes, 32 * MIB, "TP {}", rank.tensor_parallel);
        let device = &m.per_device[0];
        assert_eq!(device.buffers_bytes, rank.buffers_bytes);
        // The engine's budget less everything but the pool is the pool.
        let usable = device.usable_bytes;
        assert_eq!(m.kv_pool_bytes, Some(usable - (rank.total_bytes - rank.kv_cache_bytes)),);
        assert_eq!(
            rank.total_bytes,
            rank.weights_bytes
                + rank.buffers_bytes
                + rank.kv_cache_bytes
                + rank.activation_bytes
                + rank.non_torch_bytes
        );
    }
}
