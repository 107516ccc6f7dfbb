//! Speculative decoding in memory: what a drafter adds to its target, per engine, each term
//! from the engine's source (docs/memory.md § Speculative decoding names the lines).
//!
//! The drafter is folded into the target's [`Sizing`]: its weights and RoPE tables join the
//! target's, its attention layers join the target's cache list (vLLM pages them in the same
//! pool, as more layers of their kind; SGLang sizes a second pool of the same tokens), and
//! its lookahead and profile-run terms are charged where the engine charges them. [`Terms`]
//! keeps them apart for the memory block's `speculative` object.
//!
//! **vLLM 0.19.0** (`v1/spec_decode/eagle.py`, `v1/worker/gpu_model_runner.py`):
//! - weights: the drafter is loaded inside the same `DeviceMemoryProfiler` as the target
//!   (`load_model`, `gpu_model_runner.py:4746-4811`), so "Model loading took" counts it; it
//!   keeps what it does not share — an MTP drafter shares the target's embedding and head
//!   (`_maybe_share_embeddings` / `_maybe_share_lm_head`, `eagle.py:1322-1459`, the "MTP
//!   model" branches, and every layer's `shared_head.head`), an EAGLE head shares them only
//!   when it ships none (or identical ones: unknowable from metadata, so a shipped one is
//!   counted); `t2d` is never loaded (`llama_eagle3.py` `load_weights`).
//! - KV: the drafter's attention layers are registered in the same static forward context, so
//!   `get_kv_cache_spec` returns them beside the target's and they join the group of their
//!   spec (`eagle.py:1246-1266` `_draft_attn_layer_names`; `v1/core/kv_cache_utils.py:1045-1056`).
//! - lookahead: the scheduler allocates `num_lookahead_tokens = num_speculative_tokens` slots
//!   beyond a request's unverified drafts (`v1/core/sched/scheduler.py:213-222`), but
//!   `allocate_slots` caps them at `max_model_len` (`v1/core/kv_cache_manager.py:362-365`):
//!   a request at the planned context (preflight's `max_model_len`) holds no more pages.
//! - recurrent state: `num_speculative_blocks` more state pages a request (`vllm.rs` `Knobs`).
//! - activations: `_dummy_sampler_run` warms the rejection sampler on `[2 × rows, vocab]`
//!   logits after the sampler (`gpu_model_runner.py:5609-5631`), and the drafter's dummy run
//!   follows the target's forward pass while its outputs are held (`:5487-5526`).
//!
//! **SGLang 0.5.23**: the draft worker loads its model before the target's KV pool is profiled
//! (`managers/scheduler.py:1128-1137`, `init_model_worker`: `maybe_init_draft_worker`, then
//! `init_memory_pools`), so the draft weights *as allocated then* come out of
//! `mem_fraction_static` — its own token embedding and head included, freed only later when
//! the target's are shared (`speculative/eagle_worker_v2.py:243-258` calls `init_lm_head`, `:336-379`); the
//! target's cell grows by the draft's layers at the target's per-layer size
//! (`model_executor/pool_configurator.py:259-314`); each request reserves
//! `2 × max(steps × topk, draft tokens)` tokens a decode step (`mem_cache/allocation_sizing.py:
//! 28-70`, `speculative/eagle_utils.py:857-872`).

use super::{
    ComputeDtype, Inputs, LayerCache, MemoryEngine, PlanOptions, Shape, Share, Sizing, Target, layer_cache, part_bytes,
    tensor_parallel_split, weights_bytes,
};
use crate::model::{Mixer, Rope};
use crate::options::Speculative;
use crate::verdict::{Component, KvCacheGroup, SpeculativeMemory};

/// Stored tensors a drafter's engine does not keep, read from an artifact's headers (params
/// and bytes, as the layout counts them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Skipped {
    /// An MTP layer's own copies of the token embedding and of the output head: vLLM shares
    /// the target's (`v1/spec_decode/eagle.py:1322-1459`, the MTP branches), SGLang loads them.
    pub mtp_copies: Share,
    /// An EAGLE-3 head's target→draft map, loaded by neither engine (vLLM and SGLang
    /// `llama_eagle3.py` `load_weights`: `if "t2d" in name: continue`).
    pub t2d: Share,
    /// Its draft→target map: vLLM's `draft_id_to_target_id` parameter; SGLang's
    /// `hot_token_id`, on the host until after its pool is sized.
    pub d2t: Share,
}

/// Where the drafter comes from.
pub enum Source<'a> {
    /// The target's own multi-token-prediction layers.
    Mtp {
        name: String,
        inputs: Inputs<'a>,
        skipped: Skipped,
    },
    /// An EAGLE-3 head, the second source.
    Eagle3 {
        name: String,
        inputs: Inputs<'a>,
        skipped: Skipped,
    },
}

/// What the drafter adds, kept apart for the report (the sizing's own figures include it).
#[derive(Debug, Clone)]
pub struct Terms {
    pub(crate) spec: Speculative,
    draft: String,
    /// The drafter's weights as the engine holds them: whole, and on one rank (`None`: the
    /// drafter does not split at the degree).
    weights: u64,
    rank_weights: Option<u64>,
    /// RoPE tables the drafter builds beside the target's, on every rank.
    buffers: u64,
    /// Its attention layers and what one token adds to them (one copy).
    layers: u64,
    per_token: u64,
    /// The drafter's layer as vLLM's profile run runs it, and the elements a token its
    /// forward keeps beside it: the target's outputs still held and its concatenated input.
    pub(crate) drafter: Shape,
    pub(crate) held_width: u64,
}

/// Fold the drafter into the target's sizing. `Some(why)` when its memory cannot be known.
pub fn attach(
    target: &mut Sizing,
    target_ropes: &[Rope],
    source: Source,
    spec: Speculative,
    options: &PlanOptions,
    engine: MemoryEngine,
) -> Option<String> {
    if target.lower_bound {
        // A refused architecture: only its stored weights are known, drafter or not.
        return None;
    }
    let tp = target.tensor_parallel.max(1);
    let e = target.shape.element_bytes;
    // `--dtype` loads an unquantized drafter in the dtype it names, as `prepare` loads the
    // target (vLLM builds the draft's ModelConfig with the target's dtype).
    let cast = |quantized: bool| match (options.dtype, options.weights_dtype, quantized) {
        (Some(dtype), None, false) => PlanOptions {
            weights_dtype: Some(dtype.weights()),
            ..options.clone()
        },
        _ => options.clone(),
    };
    // Recurrent state is in the model's dtype; only its width matters here.
    let compute = if e == 4 { ComputeDtype::F32 } else { ComputeDtype::Bf16 };
    let (draft, mixers, weights, rank_weights, buffers, drafter, held_width) = match source {
        Source::Mtp { name, inputs, skipped } => {
            let Some(model) = inputs.model else {
                return Some("the target's architecture is not known, so neither are its MTP layers".into());
            };
            let Some(mixer) = model.mtp_mixer.or(model.layers.last().copied()) else {
                return Some("the target declares MTP layers but no layer kind for them".into());
            };
            let mixers: Vec<Mixer> = (0..model.mtp_layers).map(|_| mixer).collect();
            // The MTP layer's experts spread as the target's; only their tensor-parallel slicing
            // is modelled (the MTP component does not keep its experts apart).
            if options.expert_parallel_degree(engine).is_some() || options.data_parallel_degree() > 1 {
                return Some(
                    "MTP drafting with expert or data parallelism is not modelled: how the MTP layer's experts spread over those ranks is not established here"
                        .into(),
                );
            }
            let options = &cast(model.quantization.is_some());
            // vLLM shares the MTP layers' own embedding and head with the target; SGLang's
            // NEXTN model allocates and loads them (freed after its pool is sized).
            let shared = match engine.unit().drafting().mtp_shares_embedding_and_head {
                true => skipped.mtp_copies,
                false => Share::default(),
            };
            let (whole, rank) = mtp_weights(inputs.layout, options, tp, shared);
            let excess = tensor_parallel_split(model, &mixers, tp, tp);
            let rank = excess.map(|excess| rank.saturating_add(mtp_excess(inputs.layout, options, shared, excess)));
            // The MTP layers are built from the target's config: `get_rope`'s cache returns the
            // target's tables (same key), so none is added.
            (
                name,
                mixers,
                whole,
                rank,
                0,
                target.shape,
                // The target's last hidden states, and `[embedding, hidden]` into `eh_proj`.
                model.hidden.saturating_mul(3),
            )
        }
        Source::Eagle3 { name, inputs, skipped } => {
            let Some(model) = inputs.model else {
                return Some(format!(
                    "the EAGLE-3 draft {name} was not understood (see its findings), so its memory is not known"
                ));
            };
            let mixers = model.layers.clone();
            let options = &cast(model.quantization.is_some());
            let excess = tensor_parallel_split(model, &mixers, tp, tp);
            let mut whole = weights_bytes(inputs.layout, options, 1, 0, None, None, None);
            let mut rank = excess.map(|excess| weights_bytes(inputs.layout, options, tp, excess, None, None, None));
            // Neither engine loads `t2d`; SGLang keeps `d2t` on the host until after its pool
            // is sized (`hot_token_id`, moved to the device in `init_lm_head`). Both are
            // buffers, whole on every rank.
            let unloaded = match engine.unit().drafting().d2t_on_host {
                false => skipped.t2d.bytes,
                true => skipped.t2d.bytes.saturating_add(skipped.d2t.bytes),
            };
            whole = whole.saturating_sub(unloaded);
            rank = rank.map(|r| r.saturating_sub(unloaded));
            // SGLang's head builds its own `VocabParallelEmbedding(vocab, hidden)`
            // (`models/llama_eagle3.py:145-149`), loaded or not, and frees it for the target's
            // only after the pool is sized: charged when the head ships none.
            let ships_embedding = inputs.layout.component_bytes(Component::Embedding) > 0;
            if engine.unit().drafting().builds_missing_embedding && !ships_embedding {
                let embedding = model.vocab.saturating_mul(model.hidden).saturating_mul(e);
                whole = whole.saturating_add(embedding);
                rank = rank.map(|r| r.saturating_add(embedding.div_ceil(tp)));
            }
            // A rope the target does not build is a table of its own (`get_rope` caches by
            // head, width, positions, parameters and dtype).
            let own: Vec<Rope> = model
                .rope
                .iter()
                .filter(|r| !target_ropes.contains(r))
                .cloned()
                .collect();
            let buffers = super::rope_table_bytes(&own, e);
            // The target keeps its hidden states and its three auxiliary ones (`outputs` of
            // `_dummy_run`) through the head's forward, which reads `[embedding, hidden]`.
            let held = target
                .shape
                .hidden
                .saturating_mul(4)
                .saturating_add(model.hidden.saturating_mul(2));
            (name, mixers, whole, rank, buffers, Shape::of(model, compute, tp), held)
        }
    };
    let mut layers = 0u64;
    let mut per_token = 0u64;
    for (i, mixer) in mixers.iter().enumerate() {
        let cache = match layer_cache(*mixer, target.kv_dtype, compute, tp) {
            Ok(Some(cache)) => cache,
            Ok(None) => continue,
            Err(why) => return Some(format!("the drafter's layer {i}: {why}")),
        };
        layers += 1;
        if cache.cap.is_none() && !cache.kind.is_state() {
            per_token = per_token.saturating_add(cache.per_token);
        }
        match target.caches.iter_mut().find(|c| c.alike(&cache)) {
            Some(group) => {
                group.layers += 1;
                group.draft_layers += 1;
            }
            None => target.caches.push(LayerCache {
                draft_layers: 1,
                ..cache
            }),
        }
    }
    target.weights = target.weights.saturating_add(weights);
    target.rank_weights = target.rank_weights.zip(rank_weights).map(|(t, d)| t.saturating_add(d));
    target.buffers = target.buffers.saturating_add(buffers);
    target.speculative = Some(Terms {
        spec,
        draft,
        weights,
        rank_weights,
        buffers,
        layers,
        per_token,
        drafter,
        held_width,
    });
    None
}

/// The MTP layers' weights, whole and on one of `tp` ranks, without the `shared` copies of the
/// embedding and head (vocab-parallel: sharded).
fn mtp_weights(layout: &super::WeightsLayout, options: &PlanOptions, tp: u64, shared: Share) -> (u64, u64) {
    use crate::families::Placement;
    let (mut whole, mut rank) = (0u64, 0u64);
    for ((component, placement), share) in &layout.parts {
        if *component != Component::Mtp {
            continue;
        }
        let share = match placement {
            Placement::Sharded => Share {
                params: share.params.saturating_sub(shared.params),
                bytes: share.bytes.saturating_sub(shared.bytes),
            },
            Placement::Replicated => *share,
        };
        let bytes = part_bytes(Component::Mtp, share, options.weights_dtype);
        whole = whole.saturating_add(bytes);
        rank = rank.saturating_add(match placement {
            Placement::Replicated => bytes,
            Placement::Sharded => bytes.div_ceil(tp),
        });
    }
    (whole, rank)
}

/// K/V projection rows every rank duplicates in the MTP layers (fewer KV heads than ranks),
/// costed at the MTP layers' bytes a parameter.
fn mtp_excess(layout: &super::WeightsLayout, options: &PlanOptions, shared: Share, excess: u64) -> u64 {
    if excess == 0 {
        return 0;
    }
    let share = layout
        .parts
        .iter()
        .filter(|((c, _), _)| *c == Component::Mtp)
        .fold(Share::default(), |acc, (_, s)| Share {
            params: acc.params.saturating_add(s.params),
            bytes: acc.bytes.saturating_add(s.bytes),
        });
    let share = Share {
        params: share.params.saturating_sub(shared.params),
        bytes: share.bytes.saturating_sub(shared.bytes),
    };
    if share.params == 0 {
        return 0;
    }
    let bytes = part_bytes(Component::Mtp, share, options.weights_dtype);
    u64::try_from(u128::from(bytes) * u128::from(excess) / u128::from(share.params)).unwrap_or(u64::MAX)
}

impl Terms {
    /// The block's `speculative` object. `kv_cache` is the block's groups (on all ranks),
    /// `ranks` what the block's figures multiply one rank's by (`None`: not placed).
    pub fn report(
        &self,
        sizing: &Sizing,
        kv_cache: &[KvCacheGroup],
        ranks: Option<u64>,
        target: &Target,
    ) -> SpeculativeMemory {
        let scale = |bytes: u64| bytes.saturating_mul(ranks.unwrap_or(1));
        let draft_weights_bytes = match (ranks, self.rank_weights) {
            (Some(_), Some(rank)) => scale(rank),
            _ => self.weights,
        };
        let draft_kv_cache_bytes = kv_cache
            .iter()
            .filter(|g| g.draft_layers > 0 && g.layers > 0)
            .map(|g| u128::from(g.bytes) * u128::from(g.draft_layers) / u128::from(g.layers))
            .map(|b| u64::try_from(b).unwrap_or(u64::MAX))
            .fold(0u64, u64::saturating_add);
        let unit = target.engine.unit();
        let (lookahead_kv_cache_bytes, activation_bytes) = unit.draft_overheads(sizing, target);
        SpeculativeMemory {
            method: self.spec.method.name().to_owned(),
            num_speculative_tokens: self.spec.tokens,
            draft: self.draft.clone(),
            draft_weights_bytes,
            draft_buffers_bytes: scale(self.buffers),
            draft_kv_layers: self.layers,
            draft_kv_cache_bytes_per_token: self.per_token,
            draft_kv_cache_bytes,
            lookahead_tokens: (unit.drafting().lookahead)(self.spec),
            lookahead_kv_cache_bytes: scale(lookahead_kv_cache_bytes),
            activation_bytes: scale(activation_bytes),
        }
    }
}

/// SGLang's bytes a token across the pool, the unit `max_total_num_tokens` is counted in:
/// the target's attention layers, and for an EAGLE or MTP drafter `draft_layers / layers` of
/// that again — it "assumes the draft shares the target's per-layer KV size"
/// (`DefaultPoolConfigurator.__init__`, `model_executor/pool_configurator.py:259-314`), exact
/// when it does (both examples), an estimate when not.
pub fn sglang_cell(sizing: &Sizing) -> u64 {
    let attention = || sizing.caches.iter().filter(|c| !c.kind.is_state());
    let target_cell = attention()
        .map(|c| c.per_token_rank.saturating_mul(c.layers - c.draft_layers))
        .fold(0u64, u64::saturating_add);
    let target_layers: u64 = attention().map(|c| c.layers - c.draft_layers).sum();
    let draft_layers: u64 = attention().map(|c| c.draft_layers).sum();
    let draft = match (sizing.speculative.is_some(), target_layers) {
        (true, layers) if layers > 0 => {
            u64::try_from(u128::from(target_cell) * u128::from(draft_layers) / u128::from(layers)).unwrap_or(u64::MAX)
        }
        _ => 0,
    };
    target_cell.saturating_add(draft)
}
