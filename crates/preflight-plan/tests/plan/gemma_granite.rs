//! Gemma (1), Granite 3.x and the multimodal profile term, worked by hand on the bundled
//! google/gemma-7b, ibm-granite/granite-3.1-{2b,8b}-instruct and google/gemma-3-{4b,12b}-it
//! (the vLLM 0.19 startup-log records 9, 11-14 hold them to the logs: `vllm_oracle.rs`).

use preflight_plan::{RankMemory, plan};

use crate::support::{blocking, hub, kinds, options, plan_with};

/// vLLM on one H100-80GB at its defaults there: 8,192 batched tokens, 1,024 sequences.
const H100: &str = r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 8192}"#;

/// `_dummy_sampler_run` on `rows` requests: logits in bf16, their f32 copy, softmax and the
/// exponential draw (f32 each), the Triton kernel's 132 scratch rows, and the forward pass's
/// 8,192 hidden states still held (`docs/memory.md`, "activation_peak").
fn sampler(vocab: u64, hidden: u64) -> u64 {
    1024 * vocab * (2 + 12) + 132 * vocab * 4 + 8192 * hidden * 2
}

fn rank_of(repo: &str, json: &str) -> RankMemory {
    let verdict = plan_with(&[repo], json);
    assert!(blocking(&verdict).is_empty(), "{repo}: {:#?}", blocking(&verdict));
    verdict.memory.expect("memory").per_rank.expect("placed")
}

#[test]
fn gemma_7b_is_gemma_1_every_layer_full_with_a_query_wider_than_the_hidden() {
    let verdict = plan_with(&["google/gemma-7b"], H100);
    let architecture = verdict.artifacts[0].architecture.clone().expect("understood");
    assert_eq!(
        (architecture.model_type.as_str(), architecture.family.as_str()),
        ("gemma", "gemma")
    );
    assert_eq!((architecture.layers, architecture.hidden_size), (28, 3072));
    // 16 heads × 256 = 4,096 ≠ 3,072: head_dim is read, not hidden ÷ heads.
    assert_eq!(
        (architecture.heads, architecture.kv_heads, architecture.head_dim),
        (16, 16, 256)
    );
    assert_eq!(kinds(&verdict), vec!["full".to_owned(); 28]);
    // Tied: no lm_head; 8,537,680,896 BF16 parameters (Keras' gemma_7b_en count).
    assert_eq!(verdict.artifacts[0].weights_bytes, 8_537_680_896 * 2);
    let rank = rank_of("google/gemma-7b", H100);
    // One table of 8,192 positions × 256 rotated channels in bf16.
    assert_eq!(rank.buffers_bytes, 8192 * 256 * 2);
    // The sampler over all 256,000 rows (tied or not) outweighs the forward pass
    // (8,192 × 2 × (2 × 3,072 + 3 × 24,576) = 1.22 GiB).
    assert_eq!(rank.activation_bytes, sampler(256_000, 3072));
    assert!(8192 * 2 * (2 * 3072 + 3 * 24_576) < sampler(256_000, 3072));
}

#[test]
fn gemma_1_with_a_sliding_window_is_refused() {
    // A window is not Gemma 1's: a config carrying one is not a plain gemma.
    let mut facts = hub("google/gemma-7b");
    let config = facts.config.as_mut().expect("config");
    config.raw.insert("sliding_window".into(), 4096.into());
    let verdict = plan(&[facts], &options(H100)).expect("valid options");
    assert!(
        blocking(&verdict)
            .iter()
            .any(|(code, subject, _)| code == "config.unsupported_value" && subject == "config.sliding_window"),
        "{:#?}",
        verdict.artifacts[0].findings
    );
}

#[test]
fn granite_3_1_is_llama_shaped_with_multipliers_that_change_no_memory() {
    for (repo, hidden, kv_width, intermediate, params) in [
        (
            "ibm-granite/granite-3.1-2b-instruct",
            2048,
            8 * 64,
            8192,
            2_533_531_648_u64,
        ),
        (
            "ibm-granite/granite-3.1-8b-instruct",
            4096,
            8 * 128,
            12_800,
            8_170_848_256,
        ),
    ] {
        let verdict = plan_with(&[repo], H100);
        let architecture = verdict.artifacts[0].architecture.clone().expect("understood");
        assert_eq!(architecture.family, "granite", "{repo}");
        assert_eq!(kinds(&verdict), vec!["full".to_owned(); 40], "{repo}");
        // Tied embeddings (the file says so; GraniteConfig's default is untied).
        assert_eq!(verdict.artifacts[0].weights_bytes, params * 2, "{repo}");
        let rank = rank_of(repo, H100);
        // 131,072 positions × head_dim in bf16.
        assert_eq!(rank.buffers_bytes, 131_072 * (hidden / 32) * 2, "{repo}");
        // 49,155 rows: the sampler still outweighs the widest layer.
        let forward = 8192 * 2 * (2 * hidden + (2 * hidden + 2 * kv_width).max(3 * intermediate));
        assert!(forward < sampler(49_155, hidden), "{repo}");
        assert_eq!(rank.activation_bytes, sampler(49_155, hidden), "{repo}");
    }
}

#[test]
fn gemma_3_holds_its_dummy_images_and_their_embeddings_through_the_profile_run() {
    // 8,192 batched tokens ÷ 256 embeddings an image = 32 images of 3 × 896 × 896 bf16
    // pixels, and 32 × 256 embeddings of the text width, on top of the sampler.
    for (repo, hidden) in [("google/gemma-3-4b-it", 2560), ("google/gemma-3-12b-it", 3840)] {
        let held = 32 * (3 * 896 * 896 + 256 * hidden) * 2;
        let rank = rank_of(repo, H100);
        assert_eq!(rank.activation_bytes, sampler(262_208, hidden) + held, "{repo}");
    }
    // The encoder budget is the batched tokens: 2,048 of them is 8 images.
    let json = r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 8192, "max_num_batched_tokens": 2048}"#;
    let rank = rank_of("google/gemma-3-4b-it", json);
    // Sampler rows: min(max_num_seqs 1,024, max_num_batched_tokens 2,048).
    let rows = 1024;
    let sampler = rows * 262_208 * 14 + 132 * 262_208 * 4 + 2048 * 2560 * 2;
    assert_eq!(rank.activation_bytes, sampler + 8 * (3 * 896 * 896 + 256 * 2560) * 2);
    // …and at most max_num_seqs prompts of max_model_len ÷ 256 images: one sequence of 1,024
    // tokens takes 4. With one sequence the sampler is small and the forward pass's widest
    // layer (8,192 tokens × (2 × 2,560 + 3 × 10,240) in bf16) is the peak under them.
    let json = r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 1024, "max_num_seqs": 1}"#;
    let rank = rank_of("google/gemma-3-4b-it", json);
    let forward = 8192 * 2 * (2 * 2560 + 3 * 10_240);
    assert!(forward > 262_208 * 18 + 8192 * 2560 * 2);
    assert_eq!(rank.activation_bytes, forward + 4 * (3 * 896 * 896 + 256 * 2560) * 2);
}

#[test]
fn a_text_model_holds_no_encoder_term() {
    // gemma-2-27b-it: the sampler alone, 46 layers alternating sliding (4,096) and full.
    let verdict = plan_with(&["google/gemma-2-27b-it"], H100);
    let kinds = kinds(&verdict);
    assert_eq!(kinds.iter().filter(|k| *k == "full").count(), 23);
    assert_eq!(kinds.len(), 46);
    assert_eq!(
        rank_of("google/gemma-2-27b-it", H100).activation_bytes,
        sampler(256_000, 4608)
    );
}
