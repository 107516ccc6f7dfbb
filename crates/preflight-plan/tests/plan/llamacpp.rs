//! The plan against what llama.cpp itself allocates for `Qwen3-8B-Q4_K_M.gguf`
//! (`fixtures/llamacpp-qwen3-8b-q4km.jsonl`: llama-cpp-python 0.3.36, CPU, mmap, n_batch 512,
//! figures in MiB as llama.cpp logs them, two decimals).

use serde_json::Value;

use crate::support::{MIB, fixtures, memory_of};

const REPO: &str = "Qwen/Qwen3-8B-GGUF";

/// llama.cpp logs MiB with two decimals: a figure is exact if it rounds to the logged one.
const LOGGED_PRECISION_MIB: f64 = 0.005;

fn measurements() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("llamacpp-qwen3-8b-q4km.jsonl")).expect("measurements");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

#[test]
fn kv_cache_equals_llama_cpp_exactly() {
    let rows = measurements();
    assert_eq!(rows.len(), 6);
    for row in rows {
        let context = row["ctx"].as_u64().expect("ctx");
        let m = memory_of(REPO, &format!(r#"{{"context": {context}}}"#));
        // f16 K and V (llama.cpp's default cache types): 36 × 2 × 8 × 128 × 2 bytes a token.
        assert_eq!(m.kv_dtype, "f16");
        assert_eq!(m.kv_cache_bytes_per_token, 147_456);
        let logged = row["kv_mib"].as_f64().expect("kv_mib");
        assert_eq!(m.kv_cache_bytes, (logged * MIB as f64) as u64, "KV at {context}");
    }
}

#[test]
fn weights_equal_the_mapped_model_buffer() {
    // The mapped buffer is the file's data section: every tensor's bytes. Tensors are
    // 32-byte aligned and every Q4_K/Q6_K/F32 tensor here is a multiple of 32 bytes long, so
    // there is no padding between them and no gap to explain: 5,021,827,072 bytes =
    // 4,789.1875 MiB, logged as 4789.19.
    let m = memory_of(REPO, r#"{"context": 4096}"#);
    assert_eq!(m.weights_bytes, 5_021_827_072);
    for row in measurements() {
        let logged = row["model_mapped_mib"].as_f64().expect("mapped");
        assert!((mib(m.weights_bytes) - logged).abs() < LOGGED_PRECISION_MIB);
    }
}

#[test]
fn compute_and_output_buffers_follow_llama_cpp_with_and_without_flash_attention() {
    // With flash attention the KQ scores are never materialised and the buffer is the output
    // stage's (logits of the micro-batch beside two hidden states), flat in the context;
    // without it the f32 scores over every cell grow with it (1,100 MiB at 16k).
    for row in measurements() {
        let context = row["ctx"].as_u64().expect("ctx");
        let flash = row["flash_attn"] == true;
        let m = memory_of(REPO, &format!(r#"{{"context": {context}, "flash_attn": {flash}}}"#));
        let logged = row["compute_mib"].as_f64().expect("compute") + row["output_mib"].as_f64().expect("output");
        // Qwen3's graph is replayed: exact with flash attention and without.
        let tolerance = 2.0 * LOGGED_PRECISION_MIB;
        assert!(
            (mib(m.activation_bytes) - logged).abs() < tolerance,
            "{} MiB vs llama.cpp {logged} MiB at {context}, flash attention {flash}",
            mib(m.activation_bytes)
        );
    }
}

/// With no `context`, llama.cpp's `n_ctx` is the trained context (40,960 here): under its fit a
/// stream of it each sequence, else — unified, or `--fit off` — shared by the sequences.
#[test]
fn an_unset_context_is_what_llama_cpp_gives_each_sequence() {
    let context = |json: &str| memory_of(REPO, json).context;
    assert_eq!(context(r#"{"engine": "llama.cpp", "sequences": 4}"#), 40_960);
    assert_eq!(
        context(r#"{"engine": "llama.cpp", "sequences": 4, "kv_unified": true}"#),
        10_240
    );
    assert_eq!(
        context(r#"{"engine": "llama.cpp", "sequences": 4, "fit": false}"#),
        10_240
    );
    // One sequence holds it all either way; a context given is the context planned.
    assert_eq!(context(r#"{"engine": "llama.cpp", "kv_unified": true}"#), 40_960);
    assert_eq!(
        context(r#"{"engine": "llama.cpp", "sequences": 4, "kv_unified": true, "context": 8192}"#),
        8192
    );
}
