//! Every engine places every bundled architecture: a per-rank figure and a KV pool, never a
//! silent gap — hybrids (DeltaNet, Mamba), windows (sliding, chunked) and MLA with its
//! indexer included — and vLLM's pool counts what its code reports.

use preflight_plan::Engine;

use crate::support::{GIB, plan_with, system_of};

const REPOS: &[&str] = &[
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3.5-35B-A3B",
    "nvidia/Nemotron-H-56B-Base-8K",
    "google/gemma-3-1b-it",
    "openai/gpt-oss-20b",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "nvidia/DeepSeek-V3.2-NVFP4",
    "google/gemma-4-31B-it",
    "MiniMaxAI/MiniMax-M2.7",
    "deepseek-ai/DeepSeek-V3",
];

#[test]
fn every_engine_places_every_architecture() {
    for repo in REPOS {
        for engine in ["vllm", "sglang"] {
            let m = system_of(
                &[repo],
                &format!(r#"{{"engine": "{engine}", "devices": "h200:8", "context": 8192}}"#),
            );
            assert_eq!(m.engine.key(), engine);
            let rank = m
                .per_rank
                .as_ref()
                .unwrap_or_else(|| panic!("{repo} on {engine}: no rank"));
            assert!(rank.kv_cache_bytes > 0, "{repo} on {engine}");
            let pool = m.kv_pool_bytes.expect("devices named");
            assert_eq!(m.fits, Some(rank.total_bytes <= m.per_device[0].usable_bytes));
            if pool > 0 {
                assert!(m.kv_pool_tokens.is_some_and(|t| t > 0), "{repo} on {engine}");
                assert!(m.max_concurrency.is_some_and(|c| c > 0.0), "{repo} on {engine}");
            }
        }
    }
}

/// vLLM pages a sliding layer for its window plus a batch (`SlidingWindowSpec`); SGLang keeps
/// gemma-3's sliding layers whole in its one pool (gemma-3 is not among its hybrid SWA
/// architectures: `is_hybrid_swa_model`), so a request holds every layer's every token.
#[test]
fn vllm_pages_a_window_plus_a_batch() {
    let at = |engine: &str| {
        system_of(
            &["google/gemma-3-1b-it"],
            &format!(r#"{{"engine": "{engine}", "devices": "h100-80gb:1", "context": 8192}}"#),
        )
        .per_rank
        .expect("rank")
        .kv_cache_bytes
    };
    // gemma-3-1b: 26 layers, 4 full and 22 sliding (window 512), 1 KV head of 256, bf16:
    // 1,024 bytes a token a layer. SGLang's cells: 26 × 8,192 tokens.
    assert_eq!(at("sglang"), 1_024 * 26 * 8_192);
    // vLLM: one page size for both kinds, and a sliding layer keeps min(511 + 8,192, 8,192)
    // tokens plus one block — more than its window, and here a block past the whole context.
    assert!(at("vllm") > at("sglang"));
}

/// The pool's size in tokens follows `_report_kv_cache_config`: blocks per group times the
/// block size. For a full-attention model that is pool ÷ bytes per token, to the block.
#[test]
fn a_uniform_pool_reports_whole_blocks_of_tokens() {
    let m = system_of(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"devices": "h100-80gb:1", "context": 8192, "block_size": 32}"#,
    );
    // 32 layers × 2 × 8 KV heads × 128 × 2 bytes = 131,072 bytes a token; blocks of 32.
    let pool = m.kv_pool_bytes.expect("pool");
    let blocks = pool / (131_072 * 32);
    assert_eq!(m.kv_pool_tokens, Some(blocks * 32));
    assert!(pool > 50 * GIB);
    let concurrency = m.max_concurrency.expect("concurrency");
    assert_eq!(concurrency, blocks as f64 / (8_192 / 32) as f64);
}

/// One version per engine per answer: memory and runtime verdicts come from the same
/// release, and the verdict names it once (`engines.<name>.version`).
#[test]
fn the_engine_is_named_once_with_its_one_version() {
    let gguf = plan_with(&["Qwen/Qwen3-8B-GGUF"], r#"{"context": 4096}"#);
    assert_eq!(gguf.memory.as_ref().expect("memory").engine, Engine::LlamaCpp);
    let st = plan_with(&["Qwen/Qwen3-8B"], r#"{"context": 4096}"#);
    assert_eq!(st.memory.as_ref().expect("memory").engine, Engine::Vllm);
    assert_eq!(st.engines.vllm.version, "0.19.0");
    let json = serde_json::to_value(&st).expect("json");
    assert_eq!(json["memory"]["engine"], "vllm");
    assert_eq!(json["engines"]["vllm"]["version"], "0.19.0");
    assert!(
        json["artifacts"][0]["runtimes"]["vllm"].get("version").is_none(),
        "named once"
    );
    let implied = plan_with(&["Qwen/Qwen3-8B"], r#"{"mem_fraction_static": 0.8}"#);
    assert_eq!(implied.memory.expect("memory").engine, Engine::Sglang);
}

/// `ENGINE@VERSION` picks a modelled release; one whose memory rules are not read is refused
/// as bad usage, never planned with another release's rules.
#[test]
fn an_engine_release_is_chosen_only_among_those_modelled() {
    let pinned = plan_with(&["Qwen/Qwen3-8B"], r#"{"engine": "vllm@0.19.0", "context": 4096}"#);
    let plain = plan_with(&["Qwen/Qwen3-8B"], r#"{"engine": "vllm", "context": 4096}"#);
    assert_eq!(pinned.memory, plain.memory);
    let refused = serde_json::from_str::<preflight_plan::PlanOptions>(r#"{"engine": "vllm@0.33.0"}"#)
        .expect_err("0.33.0 is read and not offered");
    // Read from its wheel, and refused with the reason: its budget charges a measured graph estimate.
    assert!(refused.to_string().contains("vLLM 0.33.0 is not offered"), "{refused}");
    assert!(refused.to_string().contains("CUDA-graph"), "{refused}");
    let unread = serde_json::from_str::<preflight_plan::PlanOptions>(r#"{"engine": "vllm@0.20.0"}"#)
        .expect_err("0.20.0 was never read");
    assert!(unread.to_string().contains("vLLM 0.20.0 is not modelled"), "{unread}");
    assert!("llama.cpp@0.3.36".parse::<preflight_plan::MemoryEngine>().is_ok());
    assert!("sglang@0.4.0".parse::<preflight_plan::MemoryEngine>().is_err());
}

/// Under llama.cpp every architecture gets a compute buffer — replayed through its graph
/// where the family names one, estimated by stages otherwise — and either way it holds at
/// least the micro-batch's f32 logits, the floor both share.
#[test]
fn llama_cpp_sizes_a_compute_buffer_for_every_architecture() {
    for repo in REPOS {
        let verdict = plan_with(&[repo], r#"{"engine": "llama.cpp", "context": 8192}"#);
        let vocab = verdict.artifacts[0]
            .architecture
            .as_ref()
            .unwrap_or_else(|| panic!("{repo}: no architecture"))
            .vocab_size;
        let memory = verdict.artifacts[0].memory.as_ref().expect("memory");
        // The CPU backend: compute + output, with one sequence's f32 logits row as output.
        let logits = vocab * 512 * 4;
        assert!(
            memory.activation_bytes >= logits + vocab * 4,
            "{repo}: {} bytes for {logits} of logits",
            memory.activation_bytes
        );
    }
}

/// The memory block follows one engine; when that engine cannot load the checkpoint, the
/// plan does not run there — never FITS beside an engine line that says no.
#[test]
fn an_engine_that_cannot_load_the_checkpoint_never_fits() {
    let cases = [
        // llama.cpp loads GGUF only.
        (
            "meta-llama/Llama-3.1-8B",
            "llama.cpp",
            "h100-80gb:1",
            "runtime.format_unsupported",
        ),
        // vLLM 0.19's sparse MLA has no kernel below compute capability 9.0; the deciding
        // finding comes before the NVFP4 fallback warning beside it.
        (
            "nvidia/DeepSeek-V3.2-NVFP4",
            "vllm",
            "a100-80gb:8",
            "runtime.attention_unsupported",
        ),
    ];
    for (source, engine, devices, code) in cases {
        let v = plan_with(
            &[source],
            &format!(r#"{{"engine": "{engine}", "devices": "{devices}", "context": 4096}}"#),
        );
        let m = v.memory.as_ref().expect("memory");
        // The figures alone would fit.
        assert!(m.per_device.iter().all(|d| d.fits), "{source} on {engine}");
        let refused = m
            .does_not_run
            .as_ref()
            .unwrap_or_else(|| panic!("{source} on {engine}"));
        assert_eq!(refused.finding.code, code, "{source} on {engine}");
        assert_eq!(
            v.artifacts[0].runtimes.get(m.engine).supported,
            preflight_plan::Support::No
        );
        assert_eq!(m.fits, Some(false), "{source} on {engine}");
        assert_eq!(m.max_context_that_fits, None);
    }
    // The engine that loads it: no refusal, and the figures decide.
    let m = system_of(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 4096}"#,
    );
    assert_eq!((m.does_not_run.is_none(), m.fits), (true, Some(true)));
}

/// The KV cache's dtype is not the model's: an FP8 or F16 cache leaves vLLM's activation peak
/// and the RoPE tables where the model's BF16 puts them, and only the cache changes.
#[test]
fn the_kv_dtype_never_changes_the_compute_dtype() {
    let at = |kv: &str| {
        system_of(
            &["meta-llama/Llama-3.1-8B"],
            &format!(r#"{{"engine": "vllm", "devices": "h100-80gb:1", "context": 4096, "kv_dtype": "{kv}"}}"#),
        )
    };
    let (bf16, f16, fp8) = (at("bf16"), at("f16"), at("fp8"));
    for other in [&f16, &fp8] {
        assert_eq!(other.activation_bytes, bf16.activation_bytes);
        assert_eq!(other.buffers_bytes, bf16.buffers_bytes);
    }
    assert_eq!(f16.kv_cache_bytes, bf16.kv_cache_bytes);
    assert_eq!(2 * fp8.kv_cache_bytes, bf16.kv_cache_bytes);
}

/// A KV dtype the engine's own `--kv-cache-dtype` would refuse is bad usage, whichever way
/// the engine was chosen (named, or by the artifacts' format): vLLM and SGLang keep no f32
/// or llama.cpp-quantized cache, llama.cpp no FP8 one.
#[test]
fn a_kv_dtype_the_engine_has_no_cache_for_is_refused() {
    let try_plan = |source: &str, options: &str| {
        preflight_plan::plan(&[crate::support::hub(source)], &crate::support::options(options))
    };
    for (source, options, refused_by) in [
        (
            "meta-llama/Llama-3.1-8B",
            r#"{"kv_dtype": "q4_0", "devices": "h100-80gb:1"}"#,
            "vLLM 0.19.0",
        ),
        (
            "meta-llama/Llama-3.1-8B",
            r#"{"kv_dtype": "f32", "engine": "vllm"}"#,
            "vLLM 0.19.0",
        ),
        (
            "meta-llama/Llama-3.1-8B",
            r#"{"kv_dtype": "q8_0", "engine": "sglang"}"#,
            "SGLang 0.5.23",
        ),
        (
            "Qwen/Qwen3-8B-GGUF",
            r#"{"kv_dtype": "fp8", "context": 4096}"#,
            "llama.cpp 0.3.36",
        ),
    ] {
        let e = try_plan(source, options).expect_err(options);
        assert_eq!(e.option, "kv_dtype");
        assert!(e.message.starts_with(refused_by), "{options}: {}", e.message);
        assert!(e.message.contains("its choices are"), "{}", e.message);
    }
    for (source, options) in [
        ("meta-llama/Llama-3.1-8B", r#"{"kv_dtype": "fp8", "engine": "sglang"}"#),
        ("Qwen/Qwen3-8B-GGUF", r#"{"kv_dtype": "q4_0", "context": 4096}"#),
        ("meta-llama/Llama-3.1-8B", r#"{"kv_dtype": "f16"}"#),
    ] {
        assert!(try_plan(source, options).is_ok(), "{options}");
    }
}

/// llama.cpp has no KV pool: it allocates `n_ctx × n_seq` cells up front, which is the memory
/// block's KV cache. No pool, pool tokens or concurrency is made up for it.
#[test]
fn llama_cpp_reports_no_pool() {
    let m = system_of(
        &["Qwen/Qwen3-8B-GGUF"],
        r#"{"devices": "h100-80gb:1", "context": 4096, "sequences": 2}"#,
    );
    assert_eq!(m.engine, Engine::LlamaCpp);
    assert_eq!(
        (m.kv_pool_bytes, m.kv_pool_tokens, m.max_concurrency),
        (None, None, None)
    );
    assert!(m.kv_cache_bytes > 0 && m.fits == Some(true));
}

/// One plan's figures agree with each other wherever a person reads them: the memory block's
/// total is what its devices hold between them, each device row is one rank, the per-rank
/// total is the sum of its terms, and the KV the requests take is one figure everywhere —
/// apart from the pool the engine allocates. Gemma-4 (sliding + full) on one H100 was
/// 65.87 GiB in the block beside a 72.13 GiB device row; Llama-3.1-70B on four was 145.45 GiB
/// in all beside four ranks of 39.39.
#[test]
fn the_memory_block_is_its_ranks_times_the_ranks() {
    for (repo, devices) in [
        ("google/gemma-4-31B-it", "h100-80gb:1"),
        ("meta-llama/Llama-3.1-70B", "h100-80gb:4"),
        ("Qwen/Qwen3.5-35B-A3B", "h100-80gb:2"),
        ("openai/gpt-oss-20b", "a100-80gb:1"),
        ("deepseek-ai/DeepSeek-V3", "h200:8"),
    ] {
        for engine in ["vllm", "sglang"] {
            let verdict = plan_with(
                &[repo],
                &format!(r#"{{"engine": "{engine}", "devices": "{devices}", "context": 32768}}"#),
            );
            let m = verdict.memory.expect("memory");
            let artifact = verdict.artifacts[0].memory.as_ref().expect("artifact memory");
            let rank = m.per_rank.as_ref().expect("placed");
            let ranks = rank.tensor_parallel;
            let what = format!("{repo} on {devices} under {engine}");
            assert_eq!(
                rank.total_bytes,
                rank.weights_bytes
                    + rank.buffers_bytes
                    + rank.kv_cache_bytes
                    + rank.activation_bytes
                    + rank.non_torch_bytes,
                "{what}: the per-rank line adds up"
            );
            for (whole, one) in [
                (m.total_bytes, rank.total_bytes),
                (m.weights_bytes, rank.weights_bytes),
                (m.buffers_bytes, rank.buffers_bytes),
                (m.kv_cache_bytes, rank.kv_cache_bytes),
                (m.activation_bytes, rank.activation_bytes),
                (m.non_torch_bytes, rank.non_torch_bytes),
            ] {
                assert_eq!(whole, one * ranks, "{what}: the block is its ranks times {ranks}");
            }
            assert_eq!(m.total_bytes, artifact.total_bytes, "{what}");
            let groups: u64 = artifact.kv_cache.iter().map(|g| g.bytes).sum();
            assert_eq!(
                groups, m.kv_cache_bytes,
                "{what}: the KV working adds up to the KV figure"
            );
            for device in &m.per_device {
                assert_eq!(device.total_bytes, rank.total_bytes, "{what}: a device holds one rank");
                assert_eq!(device.kv_cache_bytes, rank.kv_cache_bytes, "{what}");
            }
            // The pool is what the engine gives the cache, not what these requests take.
            let pool = m.kv_pool_bytes.expect("pool");
            let usable = m.per_device[0].usable_bytes;
            assert_eq!(
                pool,
                usable.saturating_sub(rank.total_bytes - rank.kv_cache_bytes),
                "{what}"
            );
        }
    }
}

/// How many requests the pool holds and the longest context that fits are one rule: the
/// requests asked for fit the pool at the longest context, a page more does not — for hybrids
/// (DeltaNet state + full attention) and for sliding windows, whose pool in tokens as vLLM
/// logs it counts blocks per cache group, not tokens a request can hold.
#[test]
fn concurrency_and_the_longest_context_agree() {
    for (repo, devices, sequences) in [
        ("Qwen/Qwen3.5-35B-A3B", "h100-80gb:1", 1),
        ("google/gemma-4-31B-it", "h100-80gb:1", 1),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h100-80gb:1", 64),
    ] {
        let at = |context: u64| {
            system_of(
                &[repo],
                &format!(
                    r#"{{"engine": "vllm", "devices": "{devices}", "context": {context}, "sequences": {sequences}}}"#
                ),
            )
        };
        let first = at(4096);
        let longest = first.max_context_that_fits.expect("devices named");
        assert!(longest > 0, "{repo}");
        assert_eq!(
            first.max_context_limited_by,
            Some(preflight_plan::LimitedBy::Memory),
            "{repo}: chosen to run out of memory"
        );
        let fits = at(longest);
        let requests = sequences as f64;
        assert!(
            fits.max_concurrency.expect("concurrency") >= requests,
            "{repo} at {longest}"
        );
        assert_eq!(fits.fits, Some(true), "{repo} at {longest}");
        // Past it by more than any group's block: fewer requests than asked for.
        let past = at(longest + 2048);
        assert!(
            past.max_concurrency.expect("concurrency") < requests,
            "{repo} past {longest}"
        );
        assert_eq!(past.fits, Some(false), "{repo} past {longest}");
    }
}

/// vLLM's Triton fused-MoE kernel takes its workspace from a manager that only grows, so the
/// profile run's peak holds it under the sampler's. Qwen3-30B-A3B (BF16, hidden 2,048, 128
/// experts top-8 of width 768) on an H100 (8,192 batched tokens, 1,024 sequences):
///   sampler = 1,024 × 151,936 × (2 + 12) + 132 × 151,936 × 4 + 8,192 × 2,048 × 2
///           = 2,291,931,136
///   workspace13 = 8,192 × 8 × max(768, 2,048) × 2 = 268,435,456
///   workspace2  = 8,192 × 8 × max(1,536, 2,048) × 2 = 268,435,456
/// The issue measured the pool 3.6% high without it (0.5 GiB of a ~15.5 GiB pool).
#[test]
fn vllm_keeps_the_triton_moe_workspace_under_the_sampler_peak() {
    for tp in [1, 2] {
        let m = system_of(
            &["Qwen/Qwen3-30B-A3B"],
            &format!(r#"{{"engine": "vllm", "devices": "h100-80gb:{tp}", "context": 8192}}"#),
        );
        // At TP 2 the width halves (384), but the hidden size still sets both workspaces.
        assert_eq!(
            m.per_rank.expect("placed").activation_bytes,
            2_291_931_136 + 2 * 268_435_456,
            "TP {tp}"
        );
    }
    // No experts, no workspace: a dense model's peak is the sampler's.
    let dense = system_of(
        &["meta-llama/Llama-3.1-8B"],
        r#"{"engine": "vllm", "devices": "h100-80gb:1", "context": 8192}"#,
    );
    assert_eq!(
        dense.per_rank.expect("placed").activation_bytes,
        1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2,
        "a dense model's peak is the sampler's"
    );
}
