//! SGLang, at the release whose source its rules follow: names, knobs, memory accounting
//! (`memory.rs`: `mem_fraction_static`, the pool configurators) and runtime support
//! (`runtime.rs`).

pub(crate) mod memory;
pub(crate) mod runtime;

use crate::memory::{DraftRules, ServingEngine, Sizing, Target, WiderSplit, exact_cache_use, speculative};
use crate::model::{Model, Rope};
use crate::options::{ComputeDtype, DeviceGroup, OptionsError, PlanOptions, Speculative};
use crate::verdict::{Component, Engine};
use crate::workload::Scheduler;

pub(crate) struct Sglang;

/// Model types SGLang 0.5.23 serves with its own NEXTN (MTP) draft: the architectures
/// `_handle_eagle_family` points the draft at the target checkpoint for
/// (`arg_groups/speculative_hook.py:1120-1152`: DeepSeek-V3/V3.2, GLM-4.5 and GLM-5), and those
/// with an MTP draft class of their own (`models/qwen3_5_mtp.py`, `qwen3_next_mtp.py`,
/// `nemotron_h_mtp.py`).
const MTP_MODEL_TYPES: &[&str] = &[
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "glm4_moe",
    "glm4_moe_lite",
    "nemotron_h",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
];

/// SGLang's decode reserve a request (`get_alloc_reserve_per_decode`: twice
/// `get_alloc_len_per_decode`, `max(steps × topk, draft tokens)` at page size 1): with
/// `K` steps, top-k 1 and K + 1 draft tokens (`_handle_eagle_family` sets them so for top-k 1,
/// `arg_groups/speculative_hook.py:1255-1266`), `2 × (K + 1)`.
fn decode_reserve(spec: Speculative) -> u64 {
    let steps = spec.tokens;
    let draft_tokens = steps.saturating_add(1);
    steps.max(draft_tokens).saturating_mul(2)
}

const DRAFTING: DraftRules = DraftRules {
    mtp_model_types: MTP_MODEL_TYPES,
    mtp_tokens_multiple_of_layers: false,
    eagle3_targets: None,
    // The NEXTN model allocates and loads the MTP layers' own embedding and head (freed after
    // its pool is sized).
    mtp_shares_embedding_and_head: false,
    // `hot_token_id`, moved to the device in `init_lm_head`.
    d2t_on_host: true,
    // `models/llama_eagle3.py:145-149`.
    builds_missing_embedding: true,
    lookahead: decode_reserve,
};

/// Under data-parallel attention (`--tp-size T×D --attn-dp-size D`), the components each
/// model class splits over the whole TP group of T×D ranks rather than the attention's T, as
/// read from SGLang 0.5.23's model source. In both classes QKV/O (`parallel_group="attn_tp"`)
/// and the embedding (`VocabParallelEmbedding(use_attn_tp_group=is_dp_attention_enabled())`,
/// `layers/vocab_parallel_embedding.py:183-185`) stay on the attention's T; the LM head goes
/// wide (`ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)`, and `--enable-dp-lm-head` is
/// off by default, `arg_groups/fields/parallel.py:199-205`); the routed experts follow
/// `expert_width_ranks`. Other model classes split the embedding differently (Llama's over the
/// whole TP group, `models/llama.py:432-437`; some replicate it), so they are not sized.
const DP_ATTENTION_SPLITS: &[(&[&str], &[Component])] = &[
    // `models/qwen3_moe.py` (model class `Qwen2MoeModel`, `models/qwen2_moe.py:1115-1120`):
    // QKV/O on `attn_tp` (l.525-543), the dense MLP on `tp` (`Qwen3MoeMLP`,
    // `models/qwen2_moe.py:180-198`), the head l.1017-1023.
    (&["qwen3_moe"], &[Component::Mlp, Component::LmHead]),
    // `models/deepseek_v2.py` (V2, V3, Kimi-K2, V3.2): the MLA projections on `attn_tp`
    // (l.2078-2161; the latent down-projections and V3.2's indexer replicated), the embedding
    // through `get_embedding_tp_kwargs()` (l.2943-2947), the first dense layers' MLP on `tp`
    // (l.2665: replicated only with `--moe-dense-tp-size 1`), the shared experts on `tp`
    // (l.896: replicated only under the DeepEP-style all-to-all backends), the head
    // l.3291-3297.
    (
        &["deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32"],
        &[Component::Mlp, Component::SharedExperts, Component::LmHead],
    ),
];

/// Ranks of SGLang's TP group (`--tp-size`): the tensor-parallel degree times the
/// attention-DP groups (`data_parallel`), which live inside it.
fn tp_size(options: &PlanOptions) -> u64 {
    options
        .tensor_parallel_degree()
        .saturating_mul(options.data_parallel_degree())
        .max(1)
}

/// Tokens each request holds beyond its context (0 without a drafter).
fn lookahead(sizing: &Sizing) -> u64 {
    sizing.speculative.as_ref().map_or(0, |t| decode_reserve(t.spec))
}

impl ServingEngine for Sglang {
    fn engine(&self) -> Engine {
        Engine::Sglang
    }

    fn names(&self) -> &'static [&'static str] {
        &["sglang"]
    }

    fn modelled_version(&self) -> &'static str {
        "0.5.23"
    }

    fn knobs_given(&self, options: &PlanOptions) -> Vec<&'static str> {
        match options.mem_fraction_static {
            Some(_) => vec!["mem_fraction_static"],
            None => Vec::new(),
        }
    }

    fn refuse(&self, options: &PlanOptions) -> Result<(), OptionsError> {
        if options.data_parallel_degree() > 1 && options.speculative.is_some() {
            return Err(OptionsError {
                option: "data_parallel",
                message: "speculative decoding under SGLang's data-parallel attention is not modelled (how the draft model splits over the attention groups is not read)".into(),
            });
        }
        Ok(())
    }

    /// `--ep-size` equal to `--tp-size`: the whole TP group, attention-DP groups included.
    fn expert_parallel_ranks(&self, options: &PlanOptions) -> u64 {
        tp_size(options)
    }

    /// The experts' width splits over the whole TP group: `moe_tp_size = tp_size // ep_size
    /// // moe_dp_size` (0.5.23 `runtime_context.py:154`), attention-DP groups included.
    fn expert_width_ranks(&self, options: &PlanOptions) -> u64 {
        tp_size(options)
    }

    /// Data-parallel attention (`data_parallel` D is `--attn-dp-size D`, or the deprecated
    /// `--dp-size D --enable-dp-attention`, 0.5.23 `arg_groups/parallel_hook.py:39-61`, with
    /// `--tp-size` = `tensor_parallel` × D): the attention runs on `attn_tp_size = tp_size //
    /// attn_dp_size` ranks (`runtime_context.py:73-76`), the rest on all of them.
    fn wider_split(&self, model: &Model, options: &PlanOptions) -> Result<Option<WiderSplit>, String> {
        if options.data_parallel_degree() <= 1 {
            return Ok(None);
        }
        let Some((_, components)) = DP_ATTENTION_SPLITS
            .iter()
            .find(|(model_types, _)| model_types.contains(&model.model_type.as_str()))
        else {
            let read: Vec<&str> = DP_ATTENTION_SPLITS
                .iter()
                .flat_map(|(types, _)| types.iter().copied())
                .collect();
            return Err(format!(
                "SGLang's data-parallel attention (--attn-dp-size) is modelled for {} only: how model_type `{}` splits its embedding and MLP under it is not read",
                read.join(", "),
                model.model_type
            ));
        };
        if model.tie_word_embeddings {
            return Err(
                "SGLang's data-parallel attention with tied embeddings (the LM head is the embedding, split over the attention's ranks or the whole group) is not modelled"
                    .into(),
            );
        }
        Ok(Some(WiderSplit {
            ranks: tp_size(options),
            components,
        }))
    }

    fn drafting(&self) -> &'static DraftRules {
        &DRAFTING
    }

    /// RoPE tables in FP32.
    fn buffer_bytes(&self, ropes: &[Rope], _compute: ComputeDtype) -> u64 {
        memory::rope_table_bytes(ropes)
    }

    /// A window apart only in the hybrid SWA pool; else every layer holds every token.
    fn keeps_windows(&self, model: &Model) -> bool {
        model.sglang_hybrid_swa
    }

    /// `chunked_prefill_size` by the device's memory, divided over the attention-DP groups
    /// (`arg_groups/parallel_hook.py:326-341`), and `max_running_requests` from the pool.
    fn scheduler(
        &self,
        options: &PlanOptions,
        device: &DeviceGroup,
        pool_tokens: u64,
        context: u64,
    ) -> Option<Scheduler> {
        let (chunked_prefill, _) = memory::defaults(device.capacity_bytes, tp_size(options));
        Some(Scheduler {
            max_running: memory::max_running_requests(pool_tokens, context),
            step_tokens: chunked_prefill / options.data_parallel_degree(),
            pool_tokens,
            // `--enable-mixed-chunk` is off by default (`arg_groups/fields/scheduler.py`): a
            // prefill batch runs as a step of its own.
            mixes_prefill: false,
        })
    }

    /// `mem_fraction_static` of it.
    fn usable(&self, options: &PlanOptions, capacity: u64) -> u64 {
        memory::fraction(options, capacity, tp_size(options), options.data_parallel_degree()).of(capacity)
    }

    fn budget_share(&self, options: &PlanOptions, capacity: u64) -> f64 {
        memory::fraction(options, capacity, tp_size(options), options.data_parallel_degree()).into()
    }

    /// Activations live in the share `mem_fraction_static` leaves out; a drafter's decode
    /// reserve adds tokens to every request.
    fn rank_terms(&self, sizing: &Sizing, rank_weights: u64, context: u64, _target: &Target) -> Option<[u64; 5]> {
        let cache = sizing.kv(context.saturating_add(lookahead(sizing)), true);
        Some([rank_weights, sizing.buffers, cache, 0, 0])
    }

    fn cache_use(&self, sizing: &Sizing, context: u64, _target: &Target) -> Vec<(Option<u64>, u64)> {
        exact_cache_use(sizing, context, context.saturating_add(lookahead(sizing)))
    }

    fn capacity(&self, sizing: &Sizing, pool_bytes: u64, _target: &Target) -> (Option<u64>, Option<f64>) {
        // Bytes a token costs the full pool and, for a hybrid SWA model, the SWA pool.
        let per_token = |windowed: bool| {
            sizing
                .caches
                .iter()
                .filter(|c| !c.kind.is_state() && c.cap.is_some() == windowed)
                .map(|c| c.per_token_rank.saturating_mul(c.layers))
                .fold(0u64, u64::saturating_add)
        };
        // A drafter's layers cost the full pool what SGLang estimates for them.
        let full = match sizing.speculative {
            Some(_) => speculative::sglang_cell(sizing).saturating_sub(per_token(true)),
            None => per_token(false),
        };
        // A Mamba or linear-attention model's state slots take their share first.
        let state: u64 = sizing
            .caches
            .iter()
            .filter(|c| c.kind.is_state())
            .map(|c| c.per_sequence_rank.saturating_mul(c.layers))
            .fold(0u64, u64::saturating_add);
        let kv_bytes = pool_bytes.saturating_sub(memory::state_pool_bytes(pool_bytes, state));
        let held = sizing.context.saturating_add(lookahead(sizing));
        let per_request = sizing.kv(held, true) / sizing.sequences.max(1);
        (
            memory::pool_tokens(kv_bytes, full, per_token(true)),
            (per_request > 0).then(|| pool_bytes as f64 / per_request as f64),
        )
    }

    /// The decode reserve's cache.
    fn draft_overheads(&self, sizing: &Sizing, _target: &Target) -> (u64, u64) {
        let context = sizing.context;
        let with = sizing.kv(context.saturating_add(lookahead(sizing)), true);
        (with.saturating_sub(sizing.kv(context, true)), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::SpeculativeMethod;

    #[test]
    fn sglang_reserves_twice_the_draft_tokens_a_step() {
        // eagle3:3 → 3 steps, top-k 1, 4 draft tokens: 2 × max(3, 4) = 8.
        let spec = Speculative {
            method: SpeculativeMethod::Eagle3,
            tokens: 3,
        };
        assert_eq!(decode_reserve(spec), 8);
    }
}
