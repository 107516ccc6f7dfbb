//! Speculative decoding in memory (docs/memory.md § Speculative decoding): the drafter's
//! weights, KV cache layers, lookahead and profile-run terms, hand-worked from the engines'
//! source on the two worked examples — Llama-3.1-8B with the EAGLE-3 head
//! yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, DeepSeek-V3 with its own MTP layer — and the option's
//! validation.

use std::collections::BTreeMap;

use preflight_formats::facts::ArtifactFacts;
use preflight_plan::{ArtifactMemory, CacheKind, Memory, PlanOptions, SpeculativeMemory, Verdict, plan};

use crate::support::{codes, fixtures, hub, options};

const LLAMA: &str = "meta-llama/Llama-3.1-8B";
const EAGLE3: &str = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B";
const DEEPSEEK: &str = "deepseek-ai/DeepSeek-V3";

/// The EAGLE-3 head's header-only tree (`fixtures/drafts/`: not a Hub fixture, since the Hub
/// repo ships a pickle; see `fixtures/tools/mkhub_eagle3.py`).
fn draft(repo: &str) -> ArtifactFacts {
    preflight_testhub::facts::from_tree(&fixtures().join("drafts").join(repo), repo)
}

fn eagle(json: &str) -> Verdict {
    plan(&[hub(LLAMA), draft(EAGLE3)], &options(json)).expect("valid options")
}

fn mtp(json: &str) -> Verdict {
    plan(&[hub(DEEPSEEK)], &options(json)).expect("valid options")
}

fn target(v: &Verdict) -> (&ArtifactMemory, &SpeculativeMemory) {
    let m = v.artifacts[0].memory.as_ref().expect("target memory");
    (m, m.speculative.as_ref().expect("speculative terms"))
}

fn system(v: &Verdict) -> &Memory {
    v.memory.as_ref().expect("system memory")
}

const H100_USABLE: u64 = 76_526_653_537; // ⌊0.9 × 85,029,615,042⌋ (what CUDA shows of an H100 80GB)

// Llama-3.1-8B, vocab 128,256, hidden 4,096, 32 layers of 8 KV heads × 128; bf16.
const LLAMA_WEIGHTS: u64 = 16_060_522_496;
const LLAMA_ROPE: u64 = 131_072 * 128 * 2;
// The head as vLLM holds it: every F16 tensor (2 bytes, cast to the target's bf16) — q/k/v
// from 2 × 4,096 (8,192 × (4,096 + 1,024 + 1,024)), o_proj, the 14,336-wide MLP, four norms,
// fc (4,096 × 12,288), lm_head (32,000 × 4,096) — plus `d2t` (32,000 int64); not `t2d`.
const HEAD_F16: u64 = 424_689_664 * 2;
const D2T: u64 = 32_000 * 8;
const T2D: u64 = 128_256;

#[test]
fn the_eagle3_head_is_read_as_a_draft_and_holds_no_memory_of_its_own() {
    let v = eagle(r#"{"speculative": "eagle3:3", "devices": "h100-80gb:1", "context": 8192, "sequences": 16}"#);
    assert!(v.admissible, "{:#?}", v.artifacts[1].findings);
    let head = &v.artifacts[1];
    let stored: BTreeMap<String, u64> = [("F16", 424_689_664), ("I64", 32_000), ("BOOL", 128_256)]
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n))
        .collect();
    assert_eq!(head.tensor_elements_by_dtype, stored);
    assert_eq!(head.weights_bytes, HEAD_F16 + D2T + T2D);
    let arch = head.architecture.as_ref().expect("architecture");
    assert_eq!((arch.family.as_str(), arch.layers, arch.context), ("eagle3", 1, 2048));
    assert!(head.memory.is_none(), "its memory is in the target's");
    let note = head
        .findings
        .iter()
        .find(|f| f.code.as_str() == "memory.speculative_draft")
        .expect("draft note");
    assert!(note.detail.contains("2,048 positions"), "{}", note.detail);
    // Alone, the head is no servable model: its tensors are no llama's.
    let alone = plan(&[draft(EAGLE3)], &PlanOptions::default()).expect("plan");
    assert!(!alone.admissible);
}

/// vLLM 0.19.0, Llama-3.1-8B + EAGLE-3 (3 tokens) on one H100, 16 × 8,192 tokens.
#[test]
fn vllm_eagle3_terms_are_worked_from_its_source() {
    let v = eagle(r#"{"speculative": "eagle3:3", "devices": "h100-80gb:1", "context": 8192, "sequences": 16}"#);
    let (m, s) = target(&v);
    // Weights: the head's own tensors, its embedding shared (it ships none), t2d not loaded.
    assert_eq!(s.draft_weights_bytes, HEAD_F16 + D2T);
    assert_eq!(s.draft_weights_bytes, 849_635_328);
    assert_eq!(m.weights_bytes, LLAMA_WEIGHTS + 849_635_328);
    // Its rope (default, 2,048 positions × 128, bf16) is not the target's llama3 table.
    assert_eq!(s.draft_buffers_bytes, 2048 * 128 * 2);
    assert_eq!(m.buffers_bytes, LLAMA_ROPE + 524_288);
    // KV: one more full-attention layer of the target's spec, in the target's one group.
    assert_eq!(m.kv_cache.len(), 1);
    let g = &m.kv_cache[0];
    assert_eq!((g.kind, g.layers, g.draft_layers), (CacheKind::Full, 33, 1));
    assert_eq!(s.draft_kv_layers, 1);
    assert_eq!(s.draft_kv_cache_bytes_per_token, 2 * 8 * 128 * 2);
    assert_eq!(m.kv_cache_bytes_per_token, 33 * 4096);
    assert_eq!(m.kv_cache_bytes, 33 * 4096 * 8192 * 16);
    assert_eq!(s.draft_kv_cache_bytes, 4096 * 8192 * 16);
    // Lookahead: 3 slots a request, capped at max_model_len — nothing at the planned context.
    assert_eq!((s.lookahead_tokens, s.lookahead_kv_cache_bytes), (3, 0));
    // Activations: the rejection sampler's warm-up on [2 × 1,024, 128,256] logits,
    // 1,024 × 128,256 × (2 × 2 + 24) + the held 8,192 × 4,096 bf16 hidden states…
    let rejection = 1024 * 128_256 * 28 + 8192 * 4096 * 2;
    assert_eq!(m.activation_bytes, rejection);
    assert_eq!(rejection, 3_744_464_896);
    // …over the sampler's 1,024 × 128,256 × 14 + 132 × 128,256 × 4 + the same hidden states.
    let sampler = 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2;
    assert_eq!(s.activation_bytes, rejection - sampler);
    assert_eq!(s.activation_bytes, 1_770_958_848);
    // The pool: what the budget leaves, in blocks of 16 tokens × 33 layers × 4 KiB.
    let sys = system(&v);
    let non_kv = LLAMA_WEIGHTS + 849_635_328 + LLAMA_ROPE + 524_288 + rejection + (1 << 28);
    assert_eq!(sys.kv_pool_bytes, Some(H100_USABLE - non_kv));
    let blocks = (H100_USABLE - non_kv) / (16 * 4096 * 33);
    assert_eq!(blocks, 25_694);
    assert_eq!(sys.kv_pool_tokens, Some(blocks * 16));
    assert_eq!(sys.max_concurrency, Some(blocks as f64 / 512.0));
    assert_eq!(sys.fits, Some(true));
    // The system holds the target and its head once: the head's artifact adds nothing.
    assert_eq!(sys.total_bytes, m.total_bytes);
}

/// Without the option the same target plans as before; with it, only the drafter's terms move.
#[test]
fn eagle3_adds_exactly_its_terms() {
    let base = r#""devices": "h100-80gb:1", "context": 8192, "sequences": 16"#;
    let plain = plan(&[hub(LLAMA)], &options(&format!("{{{base}}}"))).expect("plan");
    let with = eagle(&format!(r#"{{"speculative": "eagle3:3", {base}}}"#));
    let before = plain.artifacts[0].memory.as_ref().expect("memory");
    let (after, s) = target(&with);
    assert!(before.speculative.is_none());
    assert_eq!(after.weights_bytes - before.weights_bytes, s.draft_weights_bytes);
    assert_eq!(after.buffers_bytes - before.buffers_bytes, s.draft_buffers_bytes);
    assert_eq!(
        after.kv_cache_bytes - before.kv_cache_bytes,
        s.draft_kv_cache_bytes + s.lookahead_kv_cache_bytes
    );
    assert_eq!(after.activation_bytes - before.activation_bytes, s.activation_bytes);
    assert_eq!(after.non_torch_bytes, before.non_torch_bytes);
}

// DeepSeek-V3's MTP layer (model.layers.61), from the fixture's headers: replicated on every
// rank — q_a_proj and kv_a_proj_with_mqa with their FP8 scales (15,142,624), eh_proj, a plain
// nn.Linear in bf16 (7,168 × 14,336 × 2 = 205,520,896), the router (7,340,032) and seven norms
// (5 × 14,336 + 1,024 + 3,072) — 228,079,328 bytes; sharded over the ranks — the 256 FP8
// experts (11,277,041,664), the shared expert (44,050,944), kv_b_proj (16,781,312), o_proj
// (117,469,184) and q_b_proj (37,757,952), scales beside them — 11,493,101,056 bytes; and its
// own copies of the embedding and head (2 × 129,280 × 7,168 × 2 = 3,706,716,160), which vLLM
// shares with the target and SGLang loads.
const MTP_REPLICATED: u64 = 228_079_328;
const MTP_SHARDED: u64 = 11_493_101_056;
const MTP_COPIES: u64 = 2 * 129_280 * 7168 * 2;

/// vLLM 0.19.0, DeepSeek-V3 with MTP (3 tokens) on eight H200s, 16 × 8,192 tokens.
#[test]
fn vllm_mtp_terms_are_worked_from_its_source() {
    let without = mtp(r#"{"devices": "h200:8", "context": 8192, "sequences": 16}"#);
    let v = mtp(r#"{"speculative": "mtp:3", "devices": "h200:8", "context": 8192, "sequences": 16}"#);
    assert!(v.admissible);
    let (m, s) = target(&v);
    let before = without.artifacts[0].memory.as_ref().expect("memory");
    let rank = MTP_REPLICATED + MTP_SHARDED / 8;
    assert_eq!(rank, 1_664_716_960);
    assert_eq!(s.draft_weights_bytes, 8 * rank);
    let (r, r0) = (
        m.per_rank.as_ref().expect("rank"),
        before.per_rank.as_ref().expect("rank"),
    );
    assert_eq!(r.weights_bytes - r0.weights_bytes, rank);
    assert_eq!(s.draft, DEEPSEEK);
    // The MTP block is built from the target's config: the rope table is the target's.
    assert_eq!(s.draft_buffers_bytes, 0);
    // KV: one more MLA latent (512 + 64) × 2 bytes, in the one MLA group, on every rank.
    let g = &m.kv_cache[0];
    assert_eq!((g.kind, g.layers, g.draft_layers), (CacheKind::Mla, 62, 1));
    assert_eq!(s.draft_kv_cache_bytes_per_token, 1152);
    assert_eq!(r.kv_cache_bytes, 62 * 1152 * 8192 * 16);
    assert_eq!(s.draft_kv_cache_bytes, 8 * 1152 * 8192 * 16);
    assert_eq!((s.lookahead_tokens, s.lookahead_kv_cache_bytes), (3, 0));
    // The rejection sampler over 1,024 rows of the 129,280 vocabulary, hidden 7,168.
    let rejection = 1024 * 129_280 * 28 + 8192 * 7168 * 2;
    assert_eq!(r.activation_bytes, rejection);
    assert_eq!(r.activation_bytes - r0.activation_bytes, s.activation_bytes / 8);
    assert_eq!(system(&v).fits, Some(true));
}

/// SGLang 0.5.23: the head's weights as allocated when the target's pool is sized — its own
/// VocabParallelEmbedding included, d2t still on the host — the pool counted in the target's
/// cell plus the head's share of it, and a decode reserve of 2 × (3 + 1) tokens a request.
#[test]
fn sglang_eagle3_terms_are_worked_from_its_source() {
    let v = eagle(
        r#"{"engine": "sglang", "speculative": "eagle3:3", "devices": "h100-80gb:1", "context": 8192, "sequences": 16}"#,
    );
    let (m, s) = target(&v);
    let embedding = 128_256 * 4096 * 2;
    assert_eq!(s.draft_weights_bytes, HEAD_F16 + embedding);
    assert_eq!(s.draft_weights_bytes, 1_900_052_480);
    assert_eq!(s.lookahead_tokens, 8);
    assert_eq!(m.kv_cache_bytes, 33 * 4096 * (8192 + 8) * 16);
    assert_eq!(s.lookahead_kv_cache_bytes, 33 * 4096 * 8 * 16);
    assert_eq!((m.activation_bytes, s.activation_bytes), (0, 0));
    let sys = system(&v);
    let pool = sys.kv_pool_bytes.expect("pool");
    // cell = 32 × 4,096 + 32 × 4,096 × 1 / 32.
    assert_eq!(sys.kv_pool_tokens, Some(pool / (33 * 4096)));
    // The default mem_fraction_static is resolved before the speculative hook runs: unchanged.
    let plain = plan(
        &[hub(LLAMA)],
        &options(r#"{"engine": "sglang", "devices": "h100-80gb:1", "context": 8192, "sequences": 16}"#),
    )
    .expect("plan");
    assert_eq!(sys.gpu_utilization, system(&plain).gpu_utilization);
}

/// SGLang's NEXTN model allocates and loads the MTP layer's embedding and head copies.
#[test]
fn sglang_mtp_charges_the_mtp_layers_own_embedding_and_head() {
    let v =
        mtp(r#"{"engine": "sglang", "speculative": "mtp:3", "devices": "h200:8", "context": 8192, "sequences": 16}"#);
    let (_, s) = target(&v);
    assert_eq!(
        s.draft_weights_bytes,
        8 * (MTP_REPLICATED + (MTP_SHARDED + MTP_COPIES) / 8)
    );
    assert_eq!(s.lookahead_tokens, 8);
    assert_eq!(s.lookahead_kv_cache_bytes, 8 * 62 * 1152 * 8 * 16);
}

fn refused(facts: &[ArtifactFacts], json: &str) -> String {
    let options: PlanOptions = serde_json::from_str(json).expect("options parse");
    match plan(facts, &options) {
        Err(e) => {
            assert_eq!(e.option, "speculative", "{e}");
            e.message
        }
        Ok(v) => panic!("{json}: planned: {:?}", codes(&v, 0)),
    }
}

#[test]
fn the_option_is_refused_where_the_sources_cannot_draft() {
    // MTP needs MTP layers.
    let why = refused(&[hub(LLAMA)], r#"{"speculative": "mtp:3"}"#);
    assert!(why.contains("declares none"), "{why}");
    // One source for MTP, target and head for EAGLE-3.
    let why = refused(&[hub(DEEPSEEK), hub(LLAMA)], r#"{"speculative": "mtp:1"}"#);
    assert!(why.contains("one source"), "{why}");
    let why = refused(&[hub(LLAMA)], r#"{"speculative": "eagle3:3"}"#);
    assert!(why.contains("two sources"), "{why}");
    // vLLM feeds EAGLE-3 heads from the targets it captures auxiliary hidden states of.
    let why = refused(
        &[hub("google/gemma-3-1b-it"), draft(EAGLE3)],
        r#"{"speculative": "eagle3:3"}"#,
    );
    assert!(why.contains("gemma3_text"), "{why}");
    // llama.cpp's draft models are not modelled: named, or chosen by the GGUF format.
    let why = refused(&[hub("Qwen/Qwen3-8B-GGUF")], r#"{"speculative": "mtp:3"}"#);
    assert!(why.contains("llama.cpp"), "{why}");
    for bad in [
        r#"{"speculative": "eagle3:0"}"#,
        r#"{"speculative": "eagle3:129"}"#,
        r#"{"speculative": "medusa:3"}"#,
        r#"{"speculative": 3}"#,
    ] {
        assert!(serde_json::from_str::<PlanOptions>(bad).is_err(), "{bad}");
    }
    for (json, option) in [
        (r#"{"speculative": "mtp:3", "include_mtp": true}"#, "include_mtp"),
        (r#"{"speculative": "eagle3:3", "ubatch": 512}"#, "speculative"),
    ] {
        let o: PlanOptions = serde_json::from_str(json).expect("parse");
        assert_eq!(o.validate().map_err(|e| e.option), Err(option), "{json}");
    }
}

#[test]
fn the_option_serialises_canonically_and_asks_for_memory() {
    let o: PlanOptions = serde_json::from_str(r#"{"speculative": " EAGLE3:3"}"#).expect("parse");
    assert!(o.asks_for_memory());
    assert_eq!(
        serde_json::to_string(&o).expect("json"),
        r#"{"speculative":"eagle3:3"}"#
    );
}

/// A second source that is no EAGLE-3 head is refused as one: its reading says why, and the
/// target's memory is unknown rather than guessed.
#[test]
fn a_second_source_that_is_no_eagle3_head_leaves_memory_unknown() {
    let v = plan(
        &[hub(LLAMA), hub("Qwen/Qwen3-8B")],
        &options(r#"{"speculative": "eagle3:3", "devices": "h100-80gb:1", "context": 8192}"#),
    )
    .expect("valid options");
    assert!(
        codes(&v, 1).contains(&"architecture.unknown".to_owned()),
        "{:?}",
        codes(&v, 1)
    );
    assert!(
        codes(&v, 0).contains(&"memory.unavailable".to_owned()),
        "{:?}",
        codes(&v, 0)
    );
    assert!(v.memory.is_none());
}

/// Placement sizes the target with its head: `--devices l4` (no count) picks the count at which
/// both fit, never the target's alone. Llama-3.1-8B at 40,960 tokens fits one L4 with under
/// 1 GiB to spare; the head's weights, KV layer and rejection-sampler warm-up do not.
#[test]
fn placement_counts_the_drafter() {
    let alone = plan(&[hub(LLAMA)], &options(r#"{"devices": "l4", "context": 40960}"#)).expect("plan");
    let with = eagle(r#"{"speculative": "eagle3:3", "devices": "l4", "context": 40960}"#);
    let count = |v: &Verdict| system(v).per_device.len();
    assert_eq!((count(&alone), count(&with)), (1, 2));
    assert_eq!(system(&with).fits, Some(true));
    let one = eagle(r#"{"speculative": "eagle3:3", "devices": "l4:1", "context": 40960}"#);
    assert_eq!(system(&one).fits, Some(false));
}

/// The MTP component keeps its experts with its other tensors, so how expert or data
/// parallelism spreads them is not established: unknown, not guessed.
#[test]
fn mtp_under_expert_or_data_parallelism_is_unknown() {
    for json in [
        r#"{"speculative": "mtp:1", "devices": "h200:8", "expert_parallel": true}"#,
        r#"{"speculative": "mtp:1", "devices": "h200:16", "tensor_parallel": 8, "data_parallel": 2}"#,
    ] {
        let v = mtp(json);
        assert!(
            codes(&v, 0).contains(&"memory.unavailable".to_owned()),
            "{json}: {:?}",
            codes(&v, 0)
        );
        assert!(v.memory.is_none(), "{json}");
    }
}
