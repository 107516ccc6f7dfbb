//! Weights as the engine holds them: as stored (scales included, tied weights once, MTP
//! excluded unless asked), under a what-if dtype, and per tensor-parallel rank.

use preflight_formats::facts::Content;
use preflight_formats::safetensors::TensorInfo;
use preflight_plan::plan;

use crate::support::{codes, hub, memory_of, options, plan_with};

/// Stored bytes of the tensors whose name passes `keep`.
fn stored_bytes(repo: &str, keep: impl Fn(&str) -> bool) -> u64 {
    let Content::Safetensors { files, .. } = hub(repo).content else {
        panic!("{repo} is not safetensors")
    };
    files
        .iter()
        .flat_map(|f| &f.header.tensors)
        .filter(|t| keep(&t.name))
        .map(|t| t.data_offsets[1] - t.data_offsets[0])
        .sum()
}

fn params(repo: &str, components: &[&str]) -> u64 {
    let v = plan_with(&[repo], r#"{"sequences": 1}"#);
    components
        .iter()
        .map(|c| {
            let component = v.artifacts[0]
                .parameters
                .by_component
                .iter()
                .find(|(k, _)| k.as_str() == *c);
            component.map_or(0, |(_, n)| *n)
        })
        .sum()
}

#[test]
fn weights_as_stored_are_the_data_bytes() {
    for repo in [
        "meta-llama/Llama-3.1-8B",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-30B-A3B",
        "openai/gpt-oss-20b",
        "google/gemma-3-1b-it",
    ] {
        let m = memory_of(repo, r#"{"sequences": 1}"#);
        assert_eq!(m.weights_bytes, stored_bytes(repo, |_| true), "{repo}");
        assert_eq!(m.weights_dtype, "as_stored");
    }
}

#[test]
fn deepseek_mtp_layers_are_excluded_unless_asked() {
    let repo = "deepseek-ai/DeepSeek-V3";
    let all = stored_bytes(repo, |_| true);
    // Layer 61 is the MTP layer; its e_score_correction_bias is a buffer, loaded either way.
    let mtp = stored_bytes(repo, |n| {
        n.starts_with("model.layers.61.") && !n.ends_with("e_score_correction_bias")
    });
    let without = memory_of(repo, r#"{"context": 1}"#);
    let with = memory_of(repo, r#"{"context": 1, "include_mtp": true}"#);
    assert_eq!(without.weights_bytes, all - mtp);
    assert_eq!(with.weights_bytes, all);
    // The MTP layer is one more MLA layer's cache.
    assert_eq!(with.kv_cache_bytes_per_token, 62 * 576 * 2);
}

#[test]
fn a_stored_copy_of_tied_embeddings_is_loaded_once() {
    let mut facts = hub("Qwen/Qwen3-0.6B");
    let Content::Safetensors { files, .. } = &mut facts.content else {
        panic!("safetensors")
    };
    let header = &mut files[0].header;
    let end = header.tensors.iter().map(|t| t.data_offsets[1]).max().expect("tensors");
    let embed = header
        .tensors
        .iter()
        .find(|t| t.name == "model.embed_tokens.weight")
        .expect("embedding")
        .clone();
    let size = embed.data_offsets[1] - embed.data_offsets[0];
    header.tensors.push(TensorInfo {
        name: "lm_head.weight".into(),
        data_offsets: [end, end + size],
        ..embed
    });
    files[0].size = files[0].size.map(|s| s + size);
    let v = plan(&[facts], &options(r#"{"sequences": 1}"#)).expect("valid options");
    assert!(codes(&v, 0).contains(&"weights.tied_stored".to_owned()));
    let a = &v.artifacts[0];
    assert_eq!(a.weights_bytes, stored_bytes("Qwen/Qwen3-0.6B", |_| true) + size);
    assert_eq!(
        a.memory.as_ref().expect("memory").weights_bytes,
        stored_bytes("Qwen/Qwen3-0.6B", |_| true)
    );
}

#[test]
fn what_if_quantizes_linear_layers_and_casts_for_float_types() {
    let repo = "meta-llama/Llama-3.1-8B";
    let linear = [params(repo, &["attention"]), params(repo, &["mlp"])];
    let rest_bf16 = 2 * params(repo, &["embedding", "lm_head", "norm"]);
    let total = params(repo, &["attention", "mlp", "embedding", "lm_head", "norm"]);
    let at = |dtype: &str| memory_of(repo, &format!(r#"{{"context": 1, "weights_dtype": "{dtype}"}}"#)).weights_bytes;
    assert_eq!(at("fp8"), linear[0] + linear[1] + rest_bf16);
    // int4: 133 bytes every 256 parameters (a 128-group's nibbles, f16 scale, 4-bit zero).
    let int4: u64 = linear.iter().map(|p| (p * 133).div_ceil(256)).sum();
    assert_eq!(at("int4"), int4 + rest_bf16);
    assert_eq!(at("f32"), 4 * total);
    assert_eq!(at("bf16"), 2 * total);
    assert_eq!(memory_of(repo, r#"{"weights_dtype": "fp8"}"#).weights_dtype, "fp8");
    // A quantized checkpoint planned as bf16: every logical parameter at two bytes.
    let gpt_oss = memory_of("openai/gpt-oss-20b", r#"{"context": 1, "weights_dtype": "bf16"}"#);
    assert_eq!(gpt_oss.weights_bytes, 2 * 20_914_757_184);
}

#[test]
fn tensor_parallel_shards_weights_and_replicates_norms() {
    let repo = "meta-llama/Llama-3.1-8B";
    let total = stored_bytes(repo, |_| true);
    let norms = 2 * params(repo, &["norm"]);
    let rank = |tp: u64| {
        memory_of(repo, &format!(r#"{{"context": 1, "tensor_parallel": {tp}}}"#))
            .per_rank
            .expect("valid split")
            .weights_bytes
    };
    assert_eq!(rank(2), (total - norms) / 2 + norms);
    assert_eq!(rank(8), (total - norms) / 8 + norms);
    // 8 KV heads over 16 ranks: each rank keeps one head's K and V rows, not half of one:
    // 32 layers × 2 (K, V) × 64 extra rows × 4096 × 2 bytes.
    assert_eq!(rank(16), (total - norms) / 16 + norms + 32 * 2 * 64 * 4096 * 2);
}

#[test]
fn deepseek_latent_down_projections_are_replicated() {
    let repo = "deepseek-ai/DeepSeek-V3";
    let main = |n: &str| {
        !n.starts_with("model.layers.61.") || n.ends_with("e_score_correction_bias") // a buffer: loaded either way
    };
    let replicated = |n: &str| {
        [
            "q_a_proj.",
            "kv_a_proj_with_mqa.",
            "layernorm.",
            "mlp.gate.weight",
            "e_score_correction_bias",
        ]
        .iter()
        .any(|p| n.contains(p))
            || n == "model.norm.weight"
    };
    let whole = stored_bytes(repo, |n| main(n) && replicated(n));
    let split = stored_bytes(repo, |n| main(n) && !replicated(n));
    let m = memory_of(repo, r#"{"context": 1, "tensor_parallel": 8}"#);
    let rank = m.per_rank.expect("valid split").weights_bytes;
    // Each sharded slice is rounded up on its own: a few bytes of slack at most.
    assert!(rank >= whole + split / 8 && rank <= whole + split / 8 + 64, "{rank}");
    assert!(
        whole > 900_000_000,
        "the replicated latent projections are most of a GB: {whole}"
    );
}

/// V3.2's indexer builds its three projections as ReplicatedLinear in both engines (vLLM 0.19
/// `deepseek_v2.py` `Indexer`; SGLang 0.5.23 `dsa_indexer.py`): whole on every rank.
#[test]
fn deepseek_v32_indexer_projections_are_replicated() {
    let repo = "nvidia/DeepSeek-V3.2-NVFP4";
    let main = |n: &str| !n.starts_with("model.layers.61.") || n.ends_with("e_score_correction_bias");
    let indexer = |n: &str| n.contains(".indexer.") && !n.contains("k_norm");
    let replicated = |n: &str| {
        [
            "q_a_proj.",
            "kv_a_proj_with_mqa.",
            "layernorm.",
            "k_norm.",
            "mlp.gate.weight",
            "e_score_correction_bias",
        ]
        .iter()
        .any(|p| n.contains(p))
            || indexer(n)
            || n == "model.norm.weight"
    };
    let whole = stored_bytes(repo, |n| main(n) && replicated(n));
    let split = stored_bytes(repo, |n| main(n) && !replicated(n));
    let rank = memory_of(repo, r#"{"context": 1, "tensor_parallel": 8}"#)
        .per_rank
        .expect("valid split")
        .weights_bytes;
    assert!(rank >= whole + split / 8 && rank <= whole + split / 8 + 64, "{rank}");
    assert!(stored_bytes(repo, |n| main(n) && indexer(n)) > 500_000_000);
}

/// A DeepSeek-V3 config that leaves `n_shared_experts` out gets the config class's default,
/// one shared expert, as transformers builds it (the checkpoint stores one).
#[test]
fn deepseek_shared_experts_default_to_the_config_class_default() {
    let mut facts = hub("deepseek-ai/DeepSeek-V3");
    facts.config.as_mut().expect("config").raw.remove("n_shared_experts");
    let v = plan(&[facts], &preflight_plan::PlanOptions::default()).expect("valid options");
    assert!(v.admissible, "{:#?}", v.artifacts[0].findings);
    let moe = v.artifacts[0]
        .architecture
        .as_ref()
        .and_then(|a| a.moe.as_ref())
        .expect("moe");
    assert_eq!(moe.shared, 1);
}
