//! vLLM, at the release whose source its rules follow: names, knobs, memory accounting
//! (`memory.rs`: the budget, the profile run, the paged pool) and runtime support
//! (`runtime.rs`: what its registries load, on which devices).

pub(crate) mod memory;
pub(crate) mod runtime;

use crate::memory::speculative::Terms;
use crate::memory::{DraftRules, ServingEngine, Shape, Sizing, Target, exact_cache_use};
use crate::model::{Model, Rope};
use crate::options::{ComputeDtype, DeviceGroup, MemoryEngine, PlanOptions, Speculative};
use crate::verdict::{CacheKind, Engine};
use crate::workload::Scheduler;

pub(crate) struct Vllm;

/// Releases whose memory rules were read from their source and cannot be planned from a
/// checkpoint's metadata, each with why: asked for, they are refused with that reason rather
/// than planned with another release's rules (docs/memory.md § What changes after 0.19.0).
const NOT_OFFERED: &[(&str, &str)] = &[(
    "0.33.0",
    "its KV budget subtracts a CUDA-graph memory estimate vLLM measures by capturing graphs at startup (v1/worker/gpu/cudagraph_utils.py:922 `profile_cudagraph_memory`, charged by default in gpu_worker.py:707-757), which no checkpoint metadata determines",
)];

/// Model types whose MTP layers vLLM 0.19.0 drafts with: those
/// `SpeculativeConfig.hf_config_override` rewrites into an MTP drafter
/// (`config/speculative.py:227-349`: `deepseek_v3`, `deepseek_v32` and `glm_moe_dsa` into
/// `DeepSeekMTPModel`, `Glm4MoeForCausalLM` into `Glm4MoeMTPModel`, `qwen3_5`/`qwen3_5_moe` into
/// `Qwen3_5MTP`, …).
const MTP_MODEL_TYPES: &[&str] = &[
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "glm4_moe",
    "glm4_moe_lite",
    "mimo",
    "ernie4_5_moe",
    "nemotron_h",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
    "exaone_moe",
    "longcat_flash",
    "step3p5",
    "pangu_ultra_moe",
];

/// Target model types vLLM 0.19.0 can feed an EAGLE-3 head, which reads their auxiliary hidden
/// states (`SpeculativeConfig._verify_args`, `config/speculative.py:795-822`: a substring match
/// on the target's `model_type`).
const EAGLE3_TARGETS: &[&str] = &[
    "llama",
    "qwen",
    "minicpm",
    "gpt_oss",
    "hunyuan_vl",
    "hunyuan_v1_dense",
    "afmoe",
    "nemotron_h",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "kimi_k25",
];

const DRAFTING: DraftRules = DraftRules {
    mtp_model_types: MTP_MODEL_TYPES,
    // `config/speculative.py:562-577`.
    mtp_tokens_multiple_of_layers: true,
    eagle3_targets: Some(EAGLE3_TARGETS),
    // `v1/spec_decode/eagle.py:1322-1459`, the MTP branches.
    mtp_shares_embedding_and_head: true,
    d2t_on_host: false,
    builds_missing_embedding: false,
    // `num_lookahead_tokens` (scheduler.py:213-222).
    lookahead: |spec: Speculative| spec.tokens,
};

/// What pages the cache: MLA's backends choose their own block size.
fn paging(sizing: &Sizing) -> memory::Paging {
    let kind = |k: CacheKind| sizing.caches.iter().any(|c| c.kind == k);
    if kind(CacheKind::MlaIndexer) {
        memory::Paging::SparseMla
    } else if kind(CacheKind::Mla) {
        memory::Paging::Mla
    } else {
        memory::Paging::Standard
    }
}

/// vLLM's knobs on the target device, for the way this artifact's cache is paged.
pub(crate) fn knobs(sizing: &Sizing, target: &Target) -> memory::Knobs {
    memory::Knobs::resolve(
        target.options,
        target.device.map(|d| memory::Part {
            name: d.name.as_str(),
            total: d.capacity_bytes,
            capability: d.device().and_then(|c| c.compute_capability),
        }),
        paging(sizing),
    )
}

/// vLLM's paging of this artifact's caches on one rank.
fn pool(sizing: &Sizing, target: &Target) -> Result<memory::Pool, String> {
    memory::Pool::new(&sizing.caches, &knobs(sizing, target))
}

/// vLLM's profile-run peak with the drafter: the forward pass, the sampler, the rejection
/// sampler's warm-up and the drafter's forward pass, the largest over what both hold.
pub(crate) fn activation(sizing: &Sizing, tp: u64, knobs: &memory::Knobs, context: u64) -> u64 {
    let profile = memory::profile(&sizing.shape, tp, knobs, context);
    let base = profile.forward.max(profile.sampler);
    let peak = match &sizing.speculative {
        Some(terms) => base
            .max(rejection_sampler(&sizing.shape, knobs))
            .max(drafter_forward(terms, tp, knobs)),
        None => base,
    };
    peak.saturating_add(profile.held)
}

/// `_dummy_sampler_run`'s rejection-sampler warm-up (`gpu_model_runner.py:5609-5631`): one
/// dummy draft token a request, so `rows` drafts and `rows` bonus rows, on random logits of
/// `[2 × rows, vocab]` in the model's dtype, held throughout. Then
/// `RejectionSampler.forward` (`v1/sample/rejection_sampler.py`) keeps the bonus sampler's
/// full f32 logprobs (`max_num_logprobs = -1`, `raw_logits`: `Sampler.forward`'s
/// `logits.to(float32)`) in its output, and for the drafts gathers the target rows
/// (`.to(float32)`, then `.clone()`), softmaxes them (`rejection_sample`: `target_probs`) and
/// draws recovered tokens through an f32 `q` and its reciprocal (`sample_recovered_tokens`):
/// six `[rows, vocab]` f32 tensors and the dtype logits at once, with the forward pass's
/// hidden states still held as under the sampler.
fn rejection_sampler(shape: &Shape, knobs: &memory::Knobs) -> u64 {
    let tokens = knobs.max_num_batched_tokens;
    let rows = knobs.max_num_seqs.min(tokens);
    let e = shape.element_bytes;
    rows.saturating_mul(shape.vocab)
        .saturating_mul(e.saturating_mul(2).saturating_add(24))
        .saturating_add(tokens.saturating_mul(shape.hidden).saturating_mul(e))
}

/// The drafter's dummy run (`EagleProposer.dummy_run`, `eagle.py:1486-1537`) over the
/// batched tokens, `num_speculative_tokens` passes of its layer, one at a time: the layer's
/// widest live tensors (as the target's forward term) beside the target's outputs still
/// held. A model of vLLM's graph, as the forward term is.
fn drafter_forward(terms: &Terms, tp: u64, knobs: &memory::Knobs) -> u64 {
    let tokens = knobs.max_num_batched_tokens;
    memory::forward(&terms.drafter, tp, tokens).saturating_add(
        tokens
            .saturating_mul(terms.held_width)
            .saturating_mul(terms.drafter.element_bytes),
    )
}

impl ServingEngine for Vllm {
    fn engine(&self) -> Engine {
        Engine::Vllm
    }

    fn names(&self) -> &'static [&'static str] {
        &["vllm"]
    }

    fn modelled_version(&self) -> &'static str {
        "0.19.0"
    }

    fn not_offered(&self) -> &'static [(&'static str, &'static str)] {
        NOT_OFFERED
    }

    fn knobs_given(&self, options: &PlanOptions) -> Vec<&'static str> {
        [
            ("gpu_utilization", options.gpu_utilization.is_some()),
            ("max_num_seqs", options.max_num_seqs.is_some()),
            ("max_num_batched_tokens", options.max_num_batched_tokens.is_some()),
            ("block_size", options.block_size.is_some()),
            ("enforce_eager", options.enforce_eager),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// Every rank of the data-parallel deployment.
    fn expert_parallel_ranks(&self, options: &PlanOptions) -> u64 {
        options
            .tensor_parallel_degree()
            .saturating_mul(options.data_parallel_degree())
    }

    /// vLLM slices the experts over every rank of its data-parallel deployment
    /// (`FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp`).
    fn expert_width_ranks(&self, options: &PlanOptions) -> u64 {
        self.expert_parallel_ranks(options).max(1)
    }

    fn drafting(&self) -> &'static DraftRules {
        &DRAFTING
    }

    /// RoPE tables in the dtype the model computes in, whatever the KV cache's.
    fn buffer_bytes(&self, ropes: &[Rope], compute: ComputeDtype) -> u64 {
        crate::memory::rope_table_bytes(ropes, compute.element_bytes())
    }

    fn expert_padding(&self, model: &Model, options: &PlanOptions, ranks: u64) -> Option<(u64, u64)> {
        memory::mxfp4_expert_padding(model, options, ranks)
    }

    /// `gpu_memory_utilization` of it.
    /// `max_num_seqs` and `max_num_batched_tokens` as vLLM defaults them for the device
    /// (`Knobs::resolve`); the paging does not change them. Chunked prefill mixes prompts
    /// into the decode steps.
    fn scheduler(
        &self,
        options: &PlanOptions,
        device: &DeviceGroup,
        pool_tokens: u64,
        _context: u64,
    ) -> Option<Scheduler> {
        let knobs = memory::Knobs::resolve(
            options,
            Some(memory::Part {
                name: device.name.as_str(),
                total: device.capacity_bytes,
                capability: device.device().and_then(|d| d.compute_capability),
            }),
            memory::Paging::Standard,
        );
        Some(Scheduler {
            max_running: knobs.max_num_seqs,
            step_tokens: knobs.max_num_batched_tokens,
            pool_tokens,
            // V1's scheduler fills each step's token budget with decodes first, then prompt
            // chunks (`v1/core/sched/scheduler.py` `schedule`).
            mixes_prefill: true,
        })
    }

    fn usable(&self, options: &PlanOptions, capacity: u64) -> u64 {
        options.utilization().of(capacity)
    }

    fn budget_share(&self, options: &PlanOptions, _capacity: u64) -> f64 {
        options.utilization().into()
    }

    fn rank_terms(&self, sizing: &Sizing, rank_weights: u64, context: u64, target: &Target) -> Option<[u64; 5]> {
        let pool = pool(sizing, target).ok()?;
        let knobs = knobs(sizing, target);
        let tp = sizing.tensor_parallel;
        Some([
            rank_weights,
            sizing.buffers,
            pool.bytes_for(context, sizing.sequences),
            activation(sizing, tp, &knobs, context),
            // Expert parallelism over data-parallel ranks talks over NCCL too.
            memory::non_torch(tp.max(target.options.expert_parallel_degree(MemoryEngine::Vllm).unwrap_or(1))),
        ])
    }

    /// Whole pages, and vLLM's empty group slots, on one rank.
    fn cache_use(&self, sizing: &Sizing, context: u64, target: &Target) -> Vec<(Option<u64>, u64)> {
        match (sizing.lower_bound, pool(sizing, target)) {
            (false, Ok(pool)) => pool.by_cache(sizing.caches.len(), context, sizing.sequences),
            _ => exact_cache_use(sizing, context, context),
        }
    }

    fn capacity(&self, sizing: &Sizing, pool_bytes: u64, target: &Target) -> (Option<u64>, Option<f64>) {
        match pool(sizing, target) {
            Ok(pool) => {
                let blocks = pool.blocks(pool_bytes);
                (
                    Some(pool.tokens(blocks)),
                    Some(pool.max_concurrency(blocks, sizing.context)),
                )
            }
            Err(_) => (None, None),
        }
    }

    /// The drafter's share of the profile run's activation peak.
    fn draft_overheads(&self, sizing: &Sizing, target: &Target) -> (u64, u64) {
        if sizing.lower_bound {
            return (0, 0);
        }
        let knobs = knobs(sizing, target);
        let tp = sizing.tensor_parallel;
        let with = activation(sizing, tp, &knobs, sizing.context);
        let without = memory::activation_peak(&sizing.shape, tp, &knobs, sizing.context);
        (0, with.saturating_sub(without))
    }
}
