//! vLLM 0.19.0's memory accounting, followed from its source (`docs/memory.md` names the
//! lines): a budget of `gpu_memory_utilization × total` device memory, from which the
//! weights, the profile run's activation peak and non-torch memory are taken; the rest is
//! the KV pool, cut into pages of `block_size` tokens and shared by the layers' cache groups.

use super::{LayerCache, Shape};
use crate::model::{EncoderProfile, Model, Rope, RopeScaling};
use crate::options::PlanOptions;
use crate::verdict::CacheKind;

/// The version every term here follows.
pub const VERSION: &str = "0.19.0";

/// MXFP4 MoE experts as vLLM allocates them: at the chosen kernel's tile sizes
/// (`fused_moe/oracle/mxfp4.py:376-400` `mxfp4_round_up_hidden_size_and_intermediate_size`),
/// the kernel being the first of `select_mxfp4_moe_backend`'s priorities (l.169-185) the
/// default install runs: FlashInfer TRT-LLM on 10.x pads hidden and intermediate to 256,
/// FlashInfer CUTLASS on exactly 9.0 both to 128, Marlin (everything else from 7.5) the
/// intermediate to 128 and the hidden size to 256. The intermediate is a rank's share.
/// Returns one expert's (allocated, stored) matrix area; `None` where nothing is padded or
/// no named device says which kernel runs. Several device kinds: the largest padding.
pub fn mxfp4_expert_padding(model: &Model, options: &PlanOptions, tp: u64) -> Option<(u64, u64)> {
    if options.weights_dtype.is_some() || model.quantization.as_ref()?.method != "mxfp4" {
        return None;
    }
    let width = model.moe.as_ref()?.expert_intermediate_size?;
    let (hidden, intermediate) = (model.hidden, width / tp.max(1));
    let stored = hidden.checked_mul(intermediate).filter(|area| *area > 0)?;
    let padded = options
        .devices
        .as_ref()?
        .groups()
        .iter()
        .filter_map(|g| {
            let (hidden_tile, intermediate_tile) = match g.device()?.compute_capability? {
                100..=109 => (256, 256),
                90 => (128, 128),
                _ => (256, 128),
            };
            // Checked: a hostile config's widths may not round up within 64 bits.
            hidden
                .checked_next_multiple_of(hidden_tile)?
                .checked_mul(intermediate.checked_next_multiple_of(intermediate_tile)?)
        })
        .max()?;
    (padded > stored).then_some((padded, stored))
}

/// Bytes of the RoPE cos/sin tables, which every rank keeps whole beside its weights and
/// "Model loading took" counts with them: `get_rope` (`rotary_embedding/__init__.py:29-330`)
/// builds one table per distinct rope, `positions × width` in the model's dtype unless the
/// model pins one (`base.py:58-63`, `cache.to(dtype)`). Rows: `max_position` by default;
/// × `factor` for linear and dynamic scaling (`linear_scaling_rope.py:90`,
/// `dynamic_ntk_scaling_rope.py:56`); the original context × `factor` for YaRN
/// (`yarn_scaling_rope.py:77-78`, `deepseek_scaling_rope.py:104-106`); the original and the
/// long context for longrope (`phi3_long_rope_scaled_rope.py:82-90`); four times the
/// positions for multimodal rope (`mrope.py:238`). Width: the rotated channels, the whole
/// head for Gemma 4's proportional rope (`gemma4_rope.py:48-55`). SGLang's
/// `rotary_embedding.py` is adapted from vLLM's and keeps the same tables.
pub fn rope_table_bytes(ropes: &[Rope], model_element_bytes: u64) -> u64 {
    // `torch.arange(n × factor)` has ⌈n × factor⌉ rows.
    let stretch = |n: u64, factor: f64| (n as f64 * factor).ceil() as u64;
    ropes.iter().fold(0u64, |acc, rope| {
        let (rows, width) = match rope.scaling {
            RopeScaling::Plain => (rope.max_position, rope.rotary_dim),
            RopeScaling::Stretched { factor } => (stretch(rope.max_position, factor), rope.rotary_dim),
            RopeScaling::Yarn { factor, original } => (stretch(original, factor), rope.rotary_dim),
            RopeScaling::LongRope { original } => (original.saturating_add(rope.max_position), rope.rotary_dim),
            RopeScaling::Proportional => (rope.max_position, rope.head_size),
            RopeScaling::Multimodal { yarn } => match yarn {
                Some((factor, original)) => (stretch(original.saturating_mul(4), factor), rope.rotary_dim),
                None => (rope.max_position.saturating_mul(4), rope.rotary_dim),
            },
        };
        let element = if rope.f32 { 4 } else { model_element_bytes };
        acc.saturating_add(rows.saturating_mul(width).saturating_mul(element))
    })
}

const GIB: u64 = 1 << 30;

/// Non-torch memory the profile run adds (`non-torch forward increase memory`): cuBLAS and
/// attention workspaces on one GPU; with tensor parallelism, NCCL and custom all-reduce
/// buffers as well. Neither depends on the model — they are the runtime's, as vLLM 0.19
/// logged them on H100 (0.24–0.26 GiB at TP 1; 2.07–2.21 GiB at TP 2 and 4).
const NON_TORCH_SINGLE: u64 = GIB / 4;
const NON_TORCH_PARALLEL: u64 = 2_254_857_830; // 2.1 GiB

/// Streaming multiprocessors the Triton top-k/top-p kernel sizes its scratch rows by
/// (`apply_top_k_top_p_triton`: `min(num_sms, batch)` rows of the vocabulary, f32). An
/// H100's 132; other parts differ by well under 0.1 GiB.
const TRITON_SAMPLER_ROWS: u64 = 132;

/// Knobs resolved against vLLM's defaults for the device (`EngineArgs.get_batch_defaults`:
/// 8192 tokens and 1024 sequences on parts with ≥ 70 GiB other than the A100, else 2048 and
/// 256; `vllm serve`'s figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub block_size: u64,
}

impl Knobs {
    pub fn resolve(options: &PlanOptions, device: Option<(&str, u64)>, mla: bool) -> Knobs {
        let large = device.is_none_or(|(name, total)| total >= 70 * GIB && !name.contains("a100"));
        let (tokens, seqs) = if large { (8192, 1024) } else { (2048, 256) };
        Knobs {
            max_num_seqs: options.max_num_seqs.unwrap_or(seqs),
            max_num_batched_tokens: options.max_num_batched_tokens.unwrap_or(tokens),
            // MLA backends (FlashMLA) page by 64 tokens; the rest by 16.
            block_size: options.block_size.unwrap_or(if mla { 64 } else { 16 }),
        }
    }
}

pub fn non_torch(tensor_parallel: u64) -> u64 {
    if tensor_parallel > 1 {
        NON_TORCH_PARALLEL
    } else {
        NON_TORCH_SINGLE
    }
}

/// Bytes a multimodal model's dummy encoder pass leaves held through the rest of the profile
/// run (`gpu_model_runner.py:5734-5779`): `max_items` dummy items of the modality with the most
/// embeddings, their inputs batched on the device and the encoder's outputs in
/// `encoder_cache`, all in the model's dtype, freed only after the sampler warm-up (l.5793-5794).
/// `max_items` is `MultiModalBudget._get_max_items` (`multimodal/encoder_budget.py:142-181`):
/// the encoder budget (`compute_mm_encoder_budget`, `v1/core/encoder_cache_manager.py:309-316`:
/// `max_num_batched_tokens`, at least one item) over an item's embeddings, at most
/// `max_num_seqs` prompts of `min(999, max_model_len ÷ item)` items each (999: the default
/// `limit_mm_per_prompt`, `config/multimodal.py:269-271`), at least one. The encoder's own
/// transient peak while it runs is not modelled (for Gemma 3's SigLIP it is below the sampler's).
pub fn encoder_held(profile: &EncoderProfile, knobs: &Knobs, context: u64, element_bytes: u64) -> u64 {
    let item = profile.tokens_per_item.max(1);
    let by_encoder = knobs.max_num_batched_tokens.max(item) / item;
    let by_decoder = knobs.max_num_seqs.saturating_mul((context / item).clamp(1, 999));
    let items = by_encoder.min(by_decoder).max(1);
    let per_item = profile
        .input_elements_per_item
        .saturating_add(item.saturating_mul(profile.output_width));
    items.saturating_mul(per_item).saturating_mul(element_bytes)
}

/// The profile run's torch peak above the weights (`gpu_model_runner.profile_run`): the
/// larger of the forward pass over `max_num_batched_tokens` tokens and the sampler warm-up
/// over `min(max_num_seqs, max_num_batched_tokens)` requests, while the forward pass's
/// hidden states are still held — and, for a multimodal model, the dummy encoder pass's inputs
/// and outputs under both ([`encoder_held`]; `context` is `max_model_len`).
pub fn activation_peak(shape: &Shape, tensor_parallel: u64, knobs: &Knobs, context: u64) -> u64 {
    let tokens = knobs.max_num_batched_tokens;
    let e = shape.element_bytes;
    let tp = tensor_parallel.max(1);
    let hidden_states = tokens.saturating_mul(shape.hidden).saturating_mul(e);
    // One decoder layer at its widest: the residual and the normed input, plus the attention
    // stage (QKV projection and attention output) or the MLP stage (gate+up, then the
    // activation's output), each split over ranks.
    let attention = shape.q_width.saturating_mul(2).saturating_add(shape.kv_width) / tp;
    let mlp = match shape.moe {
        // fused_moe's workspaces: (tokens, top-k, 2·width) and (tokens, top-k, width), plus
        // the shared experts' own MLP.
        Some(moe) => moe
            .active
            .saturating_mul(moe.width.saturating_mul(3) / tp)
            .saturating_add(moe.shared.saturating_mul(moe.width).saturating_mul(3) / tp),
        None => shape.intermediate.saturating_mul(3) / tp,
    };
    let forward = tokens
        .saturating_mul(shape.hidden.saturating_mul(2).saturating_add(attention.max(mlp)))
        .saturating_mul(e);
    // `_dummy_sampler_run`: logits in the model dtype, their f32 copy, the softmax and the
    // exponential draw (f32 each), and the Triton kernel's scratch rows.
    let rows = knobs.max_num_seqs.min(tokens);
    let vocab = shape.vocab;
    let sampler = rows
        .saturating_mul(vocab)
        .saturating_mul(e.saturating_add(12))
        .saturating_add(rows.min(TRITON_SAMPLER_ROWS).saturating_mul(vocab).saturating_mul(4))
        .saturating_add(hidden_states);
    let encoder = shape.encoder.map_or(0, |p| encoder_held(&p, knobs, context, e));
    forward.max(sampler).saturating_add(encoder)
}

/// One kind of page the KV pool holds, and how many layers hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    kind: CacheKind,
    cap: Option<u64>,
    block_size: u64,
    /// Bytes of one page (one block of tokens, or one sequence's recurrent state).
    page: u64,
    layers: u64,
}

impl Spec {
    /// `KVCacheSpec.max_memory_usage_bytes`: what one request of `context` tokens may hold.
    fn max_bytes(&self, context: u64, batched: u64) -> u64 {
        let blocks = match (self.kind, self.cap) {
            (CacheKind::LinearAttention | CacheKind::Mamba, _) => 1,
            (CacheKind::Sliding, Some(w)) => {
                w.saturating_sub(1)
                    .saturating_add(batched)
                    .min(context)
                    .div_ceil(self.block_size)
                    + 1
            }
            (CacheKind::Chunked, Some(c)) => c.saturating_add(batched).min(context).div_ceil(self.block_size),
            _ => context.div_ceil(self.block_size),
        };
        blocks.saturating_mul(self.page)
    }
}

/// How vLLM cuts its KV pool (`kv_cache_utils.get_kv_cache_groups` and
/// `get_kv_cache_config_from_groups`): every group's layers share `group_size` tensors of
/// equal pages; a block is one page in each of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    specs: Vec<Spec>,
    /// Bytes of one block across a group: the unit the pool is counted in.
    page: u64,
    group_size: u64,
    groups: u64,
    min_block_size: u64,
    batched: u64,
}

impl Pool {
    /// The pool's layout for these caches (on one rank), or why vLLM could not build one.
    pub fn new(caches: &[LayerCache], knobs: &Knobs) -> Result<Pool, String> {
        let block = knobs.block_size;
        let mut specs: Vec<Spec> = caches
            .iter()
            .map(|c| {
                let page = match c.kind.is_state() {
                    true => c.per_sequence_rank,
                    false => c.per_token_rank.saturating_mul(block),
                };
                Spec {
                    kind: c.kind,
                    cap: c.cap,
                    block_size: block,
                    page,
                    layers: c.layers,
                }
            })
            .filter(|s| s.page > 0)
            .collect();
        // MLA with the sparse indexer caches two kinds of page per layer: the latent, and the
        // indexer's keys (its own `DeepseekV32IndexerCache` layer).
        for cache in caches.iter().filter(|c| c.indexer_per_token_rank > 0) {
            if let Some(latent) = specs.iter_mut().find(|s| s.kind == cache.kind) {
                latent.page = latent
                    .page
                    .saturating_sub(cache.indexer_per_token_rank.saturating_mul(block));
            }
            specs.push(Spec {
                kind: CacheKind::Full,
                cap: None,
                block_size: block,
                page: cache.indexer_per_token_rank.saturating_mul(block),
                layers: cache.layers,
            });
        }
        if specs.is_empty() {
            return Err("no layer caches anything".into());
        }
        let batched = knobs.max_num_batched_tokens;
        let layers: u64 = specs.iter().map(|s| s.layers).sum();
        if specs.len() == 1 {
            // Every layer alike: one group of all layers.
            let page = specs[0].page;
            return Ok(Pool {
                specs,
                page,
                group_size: layers,
                groups: 1,
                min_block_size: block,
                batched,
            });
        }
        let token_kinds = |s: &Spec| !s.kind.is_state() && s.cap.is_none();
        if specs.iter().all(token_kinds) {
            // `UniformTypeKVCacheSpecs`: every layer keeps every token, pages differ in width;
            // one group whose block is a page of each layer.
            let page = specs
                .iter()
                .map(|s| s.page.saturating_mul(s.layers))
                .fold(0u64, u64::saturating_add);
            return Ok(Pool {
                specs,
                page,
                group_size: 1,
                groups: 1,
                min_block_size: block,
                batched,
            });
        }
        // A hybrid: recurrent state sets the attention block so one attention page holds a
        // state (`HybridAttentionMambaModelConfig`), the state page is padded to it, and the
        // other pages are made equal by growing their block size (`unify_kv_cache_spec_page_size`).
        if let Some(state) = specs.iter().filter(|s| s.kind.is_state()).map(|s| s.page).max() {
            let per_token = specs
                .iter()
                .filter(|s| !s.kind.is_state())
                .map(|s| s.page / block)
                .max();
            if let Some(per_token) = per_token.filter(|p| *p > 0) {
                let aligned = 16u64.saturating_mul(state.div_ceil(16u64.saturating_mul(per_token)));
                for s in specs.iter_mut().filter(|s| !s.kind.is_state()) {
                    if s.block_size < aligned {
                        s.page = s.page / s.block_size * aligned;
                        s.block_size = aligned;
                    }
                }
            }
            let page = specs
                .iter()
                .filter(|s| !s.kind.is_state())
                .map(|s| s.page)
                .max()
                .unwrap_or(state);
            for s in specs.iter_mut().filter(|s| s.kind.is_state()) {
                s.page = s.page.max(page);
            }
        }
        let page = specs.iter().map(|s| s.page).max().unwrap_or(0);
        for s in &mut specs {
            if s.page != page {
                if !page.is_multiple_of(s.page) {
                    return Err(format!(
                        "vLLM cannot give its cache groups one page size ({} and {page} bytes)",
                        s.page
                    ));
                }
                s.block_size = s.block_size.saturating_mul(page / s.page);
                s.page = page;
            }
        }
        // `_get_kv_cache_groups_uniform_page_size`: groups of the smallest kind's layer count
        // (the largest's when that is under 1.5× the smallest), the last of a kind padded.
        let fewest = specs.iter().map(|s| s.layers).min().unwrap_or(1);
        let most = specs.iter().map(|s| s.layers).max().unwrap_or(1);
        let group_size = if most.saturating_mul(2) < fewest.saturating_mul(3) {
            most
        } else {
            fewest
        };
        let groups = specs.iter().map(|s| s.layers.div_ceil(group_size)).sum();
        let min_block_size = specs.iter().filter(|s| !s.kind.is_state()).map(|s| s.block_size).min();
        Ok(Pool {
            min_block_size: min_block_size.unwrap_or(block),
            page,
            group_size,
            groups,
            specs,
            batched,
        })
    }

    /// `get_num_blocks`: whole blocks in `available` bytes.
    pub fn blocks(&self, available: u64) -> u64 {
        available / self.page.max(1) / self.group_size.max(1)
    }

    /// `_report_kv_cache_config`'s "GPU KV cache size: N tokens". For hybrid models it is
    /// blocks per group times the smallest block, not a count of cached tokens.
    pub fn tokens(&self, blocks: u64) -> u64 {
        blocks / self.groups.max(1) * self.min_block_size
    }

    /// Blocks one request of `context` tokens needs (`get_max_concurrency_for_kv_cache_config`).
    pub fn blocks_per_request(&self, context: u64) -> u64 {
        let pages = |s: &Spec| s.max_bytes(context, self.batched).div_ceil(s.page.max(1));
        let blocks = match self.groups {
            // One group: a block is a page of every layer, so a request needs as many blocks
            // as its most demanding layer needs pages.
            1 => self.specs.iter().map(pages).max().unwrap_or(0),
            // Groups of equal pages: each group of a kind holds the request's pages of it.
            _ => self
                .specs
                .iter()
                .map(|s| pages(s).saturating_mul(s.layers.div_ceil(self.group_size.max(1))))
                .fold(0u64, u64::saturating_add),
        };
        blocks.max(1)
    }

    /// Bytes of pool that `sequences` requests of `context` tokens take on this rank.
    pub fn bytes_for(&self, context: u64, sequences: u64) -> u64 {
        self.blocks_per_request(context)
            .saturating_mul(sequences)
            .saturating_mul(self.page)
            .saturating_mul(self.group_size)
    }

    /// "Maximum concurrency for N tokens per request".
    pub fn max_concurrency(&self, blocks: u64, context: u64) -> f64 {
        blocks as f64 / self.blocks_per_request(context) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope(scaling: RopeScaling) -> Rope {
        Rope {
            head_size: 128,
            rotary_dim: 64,
            max_position: 1000,
            scaling,
            f32: false,
        }
    }

    #[test]
    fn rope_rows_follow_each_types_constructor() {
        let bytes = |scaling| rope_table_bytes(&[rope(scaling)], 2);
        let row = 64 * 2;
        assert_eq!(bytes(RopeScaling::Plain), 1000 * row);
        // `torch.arange(1000 × 2.5)` has 2,500 rows; a fractional product rounds up.
        assert_eq!(bytes(RopeScaling::Stretched { factor: 2.5 }), 2500 * row);
        assert_eq!(bytes(RopeScaling::Stretched { factor: 1.0005 }), 1001 * row);
        assert_eq!(
            bytes(RopeScaling::Yarn {
                factor: 4.0,
                original: 100
            }),
            400 * row
        );
        assert_eq!(bytes(RopeScaling::LongRope { original: 100 }), 1100 * row);
        assert_eq!(bytes(RopeScaling::Proportional), 1000 * 128 * 2);
        assert_eq!(bytes(RopeScaling::Multimodal { yarn: None }), 4000 * row);
        assert_eq!(bytes(RopeScaling::Multimodal { yarn: Some((2.0, 100)) }), 800 * row);
        // A pinned f32 table, and tables adding up.
        let pinned = Rope {
            f32: true,
            ..rope(RopeScaling::Plain)
        };
        assert_eq!(
            rope_table_bytes(&[pinned.clone(), rope(RopeScaling::Plain)], 2),
            1000 * 64 * 6
        );
        // A hostile factor saturates instead of wrapping.
        assert_eq!(bytes(RopeScaling::Stretched { factor: f64::MAX }), u64::MAX);
    }
}
