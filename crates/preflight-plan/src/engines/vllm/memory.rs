//! vLLM 0.19.0's memory accounting, followed from its source (`docs/memory.md` names the
//! lines): a budget of `gpu_memory_utilization × total` device memory, from which the
//! weights, the profile run's activation peak and non-torch memory are taken; the rest is
//! the KV pool, cut into pages of `block_size` tokens and shared by the layers' cache groups.

use crate::memory::{LayerCache, Shape};
use crate::model::{EncoderProfile, Model};
use crate::options::PlanOptions;
use crate::verdict::CacheKind;

/// The kernel vLLM 0.19 runs MXFP4 MoE experts with: the first of `select_mxfp4_moe_backend`'s
/// priorities (`fused_moe/oracle/mxfp4.py:169-185`, `:290-301`) that the default install
/// supports on the device: FlashInfer TRT-LLM on 10.x; on 9.0 the OpenAI Triton kernels
/// (vendored as `vllm/third_party/triton_kernels`, supported for `(9, 0) ≤ cap < (11, 0)`,
/// `gpt_oss_triton_kernels_moe.py:887-896`), ahead of FlashInfer CUTLASS; Marlin elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mxfp4Kernel {
    TrtLlm,
    Triton,
    Marlin,
}

impl Mxfp4Kernel {
    fn on(compute_capability: u32) -> Mxfp4Kernel {
        match compute_capability {
            100..=109 => Mxfp4Kernel::TrtLlm,
            90 => Mxfp4Kernel::Triton,
            _ => Mxfp4Kernel::Marlin,
        }
    }

    /// Bytes one expert's tensors hold on a rank once loaded — the gate/up and down weights
    /// (two FP4 values a byte), their E8M0 scales (one a block of 32) and biases — for a
    /// rank's intermediate width `intermediate` and the hidden size `hidden`. Checked: a
    /// hostile config's widths may not fit 64 bits.
    fn allocated(self, hidden: u64, intermediate: u64) -> Option<u64> {
        // `mxfp4_round_up_hidden_size_and_intermediate_size` (`oracle/mxfp4.py:376-400`).
        let (hidden, intermediate) = match self {
            Mxfp4Kernel::TrtLlm => (
                hidden.checked_next_multiple_of(256)?,
                intermediate.checked_next_multiple_of(256)?,
            ),
            Mxfp4Kernel::Marlin => (
                hidden.checked_next_multiple_of(256)?,
                intermediate.checked_next_multiple_of(128)?,
            ),
            Mxfp4Kernel::Triton => (hidden, intermediate.checked_next_multiple_of(64)?),
        };
        let as_created = expert_bytes(hidden, intermediate, 2)?;
        if self != Mxfp4Kernel::Triton {
            // The others convert in place (`replace_parameter`): what was created stays.
            return Some(as_created);
        }
        // Triton swizzles into new tensors (`mxfp4_utils.py:22-90` `_swizzle_mxfp4`): the
        // values transposed and padded to 64 both ways (`HopperMXValueLayout.swizzle_data`),
        // the scales to 256 rows and 2 columns (`HopperMXScaleLayout`); the weights are
        // reassigned, but the scale parameters stay registered beside their swizzled copies
        // (`quantization/mxfp4.py:301-309`), and the biases become f32 (`oracle/mxfp4.py:323`).
        let up = |n: u64, to: u64| n.checked_next_multiple_of(to);
        let values = up(hidden / 2, 64)?
            .checked_mul(up(2 * intermediate, 64)?)?
            .checked_add(up(intermediate / 2, 64)?.checked_mul(up(hidden, 64)?)?)?;
        let swizzled_scales = up(2 * intermediate, 256)?
            .checked_mul(up(hidden / 32, 2)?)?
            .checked_add(up(hidden, 256)?.checked_mul(up(intermediate / 32, 2)?)?)?;
        let scales = 3u64.checked_mul(hidden)?.checked_mul(intermediate)? / 32;
        let biases = (2 * intermediate).checked_add(hidden)?.checked_mul(4)?;
        values
            .checked_add(swizzled_scales)?
            .checked_add(scales)?
            .checked_add(biases)
    }
}

/// One expert's stored tensors: `2 × intermediate × hidden` gate/up and `hidden ×
/// intermediate` down FP4 values (half a byte each), an E8M0 byte per 32 of them, and
/// `2 × intermediate + hidden` biases of `bias_bytes`.
fn expert_bytes(hidden: u64, intermediate: u64, bias_bytes: u64) -> Option<u64> {
    let area = hidden.checked_mul(intermediate)?.checked_mul(3)?;
    let biases = (2 * intermediate).checked_add(hidden)?.checked_mul(bias_bytes)?;
    (area / 2).checked_add(area / 32)?.checked_add(biases)
}

/// MXFP4 MoE experts as vLLM allocates them for the kernel it picks ([`Mxfp4Kernel`]):
/// padded to its tiles, and on Hopper swizzled beside scales it keeps. The intermediate is a
/// rank's share. Returns one expert's (allocated, stored) bytes, which scale the routed
/// experts; `None` where they are as stored or no named device says which kernel runs.
/// Several device kinds: the largest.
pub fn mxfp4_expert_padding(model: &Model, options: &PlanOptions, tp: u64) -> Option<(u64, u64)> {
    if options.weights_dtype.is_some() || model.quantization.as_ref()?.method != "mxfp4" {
        return None;
    }
    let width = model.moe.as_ref()?.expert_intermediate_size?;
    let (hidden, intermediate) = (model.hidden, width / tp.max(1));
    let stored = expert_bytes(hidden, intermediate, 2).filter(|bytes| *bytes > 0)?;
    let allocated = options
        .devices
        .as_ref()?
        .groups()
        .iter()
        .filter_map(|g| Mxfp4Kernel::on(g.device()?.compute_capability?).allocated(hidden, intermediate))
        .max()?;
    (allocated != stored).then_some((allocated, stored))
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
    /// With speculative decoding, the pages of recurrent state a request holds beyond its
    /// one: `MambaSpec.num_speculative_blocks` is `num_speculative_tokens`
    /// (`model_executor/layers/mamba/abstract.py:43-58`), and a request keeps
    /// `1 + num_speculative_blocks` pages (`v1/kv_cache_interface.py:293-300`). 0 without.
    pub speculative_blocks: u64,
}

/// Which kind of attention pages the KV cache, for the block size vLLM's backend picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// Standard attention (or none): `CacheConfig.DEFAULT_BLOCK_SIZE`, 16.
    Standard,
    /// Multi-head latent attention without a sparse indexer.
    Mla,
    /// Multi-head latent attention with the sparse indexer (DeepSeek-V3.2, GLM-5).
    SparseMla,
}

/// The device a plan is sized for: its name (a catalogue name, or a bare size), total bytes,
/// and compute capability where the catalogue knows it (`90` for 9.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part<'a> {
    pub name: &'a str,
    pub total: u64,
    pub capability: Option<u32>,
}

impl Knobs {
    pub fn resolve(options: &PlanOptions, device: Option<Part>, paging: Paging) -> Knobs {
        let large = device.is_none_or(|d| d.total >= 70 * GIB && !d.name.contains("a100"));
        let (tokens, seqs) = if large { (8192, 1024) } else { (2048, 256) };
        Knobs {
            max_num_seqs: options.max_num_seqs.unwrap_or(seqs),
            max_num_batched_tokens: options.max_num_batched_tokens.unwrap_or(tokens),
            block_size: options
                .block_size
                .unwrap_or_else(|| default_block_size(paging, device.and_then(|d| d.capability))),
            speculative_blocks: options.speculative.map_or(0, |s| s.tokens),
        }
    }
}

/// The block size vLLM 0.19 settles on without `--block-size`: the default 16 unless the
/// attention backend it selects cannot page by 16, then that backend's smallest size
/// (`Platform.update_block_size_for_backend`, `platforms/interface.py:430-476`;
/// `AttentionBackend.get_preferred_block_size`, `v1/attention/backend.py:189-197`). For MLA
/// the CUDA platform tries its backends in order (`platforms/cuda.py:50-98`):
/// - dense MLA on 9.x: FlashAttention MLA (`flashattn_mla.py:52-69`, any multiple of 16) — 16;
///   on 10.x: FlashInfer MLA (`flashinfer_mla.py:49-66`, 32 or 64) — 32; elsewhere Triton MLA
///   (`triton_mla.py:43-62`, multiples of 16) — 16. A device of unknown capability: 16.
/// - sparse MLA (the indexer's): FlashMLA sparse (`flashmla_sparse.py:90-91`, only 64) — 64
///   (FlashInfer's sparse kernel, first on 10.x for 16 heads or fewer, would take 32).
fn default_block_size(paging: Paging, capability: Option<u32>) -> u64 {
    match (paging, capability) {
        (Paging::Standard, _) => 16,
        (Paging::Mla, Some(100..=109)) => 32,
        (Paging::Mla, _) => 16,
        (Paging::SparseMla, _) => 64,
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
/// hidden states are still held — and, for unquantized MoE, the fused-MoE workspaces the
/// forward pass left allocated, and for a multimodal model the dummy encoder pass's inputs
/// and outputs, under both ([`encoder_held`]; `context` is `max_model_len`).
pub fn activation_peak(shape: &Shape, tensor_parallel: u64, knobs: &Knobs, context: u64) -> u64 {
    let profile = profile(shape, tensor_parallel, knobs, context);
    profile.forward.max(profile.sampler).saturating_add(profile.held)
}

/// The profile run's terms ([`activation_peak`] is `max(forward, sampler) + held`); speculative
/// decoding adds terms of its own beside the first two (`memory/speculative.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The widest decoder layer's live tensors over the batched tokens.
    pub forward: u64,
    /// The sampler warm-up, the forward pass's hidden states held under it.
    pub sampler: u64,
    /// What outlives the forward pass under both: the fused-MoE workspace, the encoder's batch.
    pub held: u64,
}

pub fn profile(shape: &Shape, tensor_parallel: u64, knobs: &Knobs, context: u64) -> Profile {
    let tokens = knobs.max_num_batched_tokens;
    let e = shape.element_bytes;
    let tp = tensor_parallel.max(1);
    let hidden_states = tokens.saturating_mul(shape.hidden).saturating_mul(e);
    let workspace = triton_moe_workspace(shape, tokens);
    let forward = forward(shape, tp, tokens);
    // `_dummy_sampler_run`: logits in the model dtype, their f32 copy, the softmax and the
    // exponential draw (f32 each), and the Triton kernel's scratch rows.
    let rows = knobs.max_num_seqs.min(tokens);
    let vocab = shape.vocab;
    let sampler = rows
        .saturating_mul(vocab)
        .saturating_mul(e.saturating_add(12))
        .saturating_add(rows.min(TRITON_SAMPLER_ROWS).saturating_mul(vocab).saturating_mul(4))
        .saturating_add(hidden_states);
    // The workspace and the encoder's batch outlive the forward pass: the sampler's peak
    // sits on top of them.
    let encoder = shape.encoder.map_or(0, |p| encoder_held(&p, knobs, context, e));
    Profile {
        forward,
        sampler,
        held: workspace.saturating_add(encoder),
    }
}

/// One decoder layer at its widest over `tokens` tokens: the residual and the normed input,
/// plus the attention stage (QKV projection and attention output) or the MLP stage (gate+up,
/// then the activation's output), each split over ranks. MoE layers add the experts'
/// workspaces, held from the first MoE layer on (apart: [`profile`]'s `held`), beside the
/// shared experts' own MLP.
pub fn forward(shape: &Shape, tensor_parallel: u64, tokens: u64) -> u64 {
    let tp = tensor_parallel.max(1);
    let attention = shape.q_width.saturating_mul(2).saturating_add(shape.kv_width) / tp;
    let workspace = triton_moe_workspace(shape, tokens);
    let mlp = match shape.moe {
        // The Triton kernel's workspace is held apart; the shared experts' own MLP.
        Some(moe) if workspace > 0 => moe.shared.saturating_mul(moe.width).saturating_mul(3) / tp,
        // Other fused-MoE kernels' intermediates: (tokens, top-k, 2·width) and (tokens,
        // top-k, width) of a rank's share of each expert (`MoeShape::width_degree`), plus
        // the shared experts' own MLP.
        Some(moe) => moe
            .active
            .saturating_mul(moe.width.saturating_mul(3) / moe.width_degree)
            .saturating_add(moe.shared.saturating_mul(moe.width).saturating_mul(3) / tp),
        None => shape.intermediate.saturating_mul(3) / tp,
    };
    tokens
        .saturating_mul(shape.hidden.saturating_mul(2).saturating_add(attention.max(mlp)))
        .saturating_mul(shape.element_bytes)
}

/// The workspace vLLM's Triton fused-MoE kernel takes for `tokens` tokens, and keeps: the
/// modular kernel asks the worker's `WorkspaceManager` (`v1/worker/workspace.py`, which only
/// grows) for `workspace13` — `(tokens, top_k, max(width, hidden))`, shared with the
/// `(tokens, hidden)` output — and `workspace2`, `(tokens, top_k, max(2·width, hidden))`,
/// each rounded to 256 bytes (`fused_moe/modular_kernel.py:1033-1068`,
/// `fused_moe.py:1976-1991` `TritonExperts.workspace_shapes`). `width` is a rank's share
/// (`MoeShape::width_degree`).
/// So the profile run's peak holds it under the sampler's. 0 for dense models and for
/// quantized experts, whose kernels' buffers are not modelled apart.
fn triton_moe_workspace(shape: &Shape, tokens: u64) -> u64 {
    let Some(moe) = shape.moe.filter(|m| m.unquantized && m.width > 0) else {
        return 0;
    };
    // A rank's share of one expert's width (whole under expert parallelism).
    let width = moe.width / moe.width_degree;
    let rows = tokens.saturating_mul(moe.active);
    let e = shape.element_bytes;
    let workspace13 = rows
        .saturating_mul(width.max(shape.hidden))
        .max(tokens.saturating_mul(shape.hidden))
        .saturating_mul(e);
    let workspace2 = rows
        .saturating_mul(width.saturating_mul(2).max(shape.hidden))
        .saturating_mul(e);
    let aligned = |bytes: u64| bytes.checked_next_multiple_of(256).unwrap_or(u64::MAX);
    aligned(workspace13).saturating_add(aligned(workspace2))
}

/// One kind of page the KV pool holds, and how many layers hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    /// The layer cache (`Pool::new`'s `caches[cache]`) these pages belong to.
    cache: usize,
    kind: CacheKind,
    cap: Option<u64>,
    block_size: u64,
    /// Bytes of one page (one block of tokens, or one sequence's recurrent state).
    page: u64,
    layers: u64,
}

impl Spec {
    /// `KVCacheSpec.max_memory_usage_bytes`: what one request of `context` tokens may hold.
    fn max_bytes(&self, context: u64, batched: u64, speculative_blocks: u64) -> u64 {
        let blocks = match (self.kind, self.cap) {
            (CacheKind::LinearAttention | CacheKind::Mamba, _) => speculative_blocks.saturating_add(1),
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
    /// State pages a request holds beyond its one ([`Knobs::speculative_blocks`]).
    speculative_blocks: u64,
}

impl Pool {
    /// The pool's layout for these caches (on one rank), or why vLLM could not build one.
    pub fn new(caches: &[LayerCache], knobs: &Knobs) -> Result<Pool, String> {
        let block = knobs.block_size;
        let mut specs: Vec<Spec> = caches
            .iter()
            .enumerate()
            .map(|(cache, c)| {
                let page = match c.kind.is_state() {
                    true => c.per_sequence_rank,
                    false => c.per_token_rank.saturating_mul(block),
                };
                Spec {
                    cache,
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
        for (index, cache) in caches.iter().enumerate().filter(|(_, c)| c.indexer_per_token_rank > 0) {
            if let Some(latent) = specs.iter_mut().find(|s| s.cache == index) {
                latent.page = latent
                    .page
                    .saturating_sub(cache.indexer_per_token_rank.saturating_mul(block));
            }
            specs.push(Spec {
                cache: index,
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
        let speculative_blocks = knobs.speculative_blocks;
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
                speculative_blocks,
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
                speculative_blocks,
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
            speculative_blocks,
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
        let pages = |s: &Spec| {
            s.max_bytes(context, self.batched, self.speculative_blocks)
                .div_ceil(s.page.max(1))
        };
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

    /// `bytes_for` by layer cache (`Pool::new`'s `caches`, in order): the tokens a sequence
    /// keeps in its pages (`None` for a state page), and the bytes `sequences` requests
    /// take on this rank — a layer cache's pages, whole blocks of them, and in a hybrid the
    /// slots its groups leave empty. They add up to `bytes_for`.
    pub fn by_cache(&self, caches: usize, context: u64, sequences: u64) -> Vec<(Option<u64>, u64)> {
        let mut out = vec![(None, 0u64); caches];
        // One group: a block is a page of every layer, as many as the most demanding needs.
        let one_group_blocks = self.blocks_per_request(context);
        for spec in &self.specs {
            let (pages, layer_slots) = match self.groups {
                1 => (one_group_blocks, spec.layers),
                _ => (
                    spec.max_bytes(context, self.batched, self.speculative_blocks)
                        .div_ceil(spec.page.max(1)),
                    spec.layers
                        .div_ceil(self.group_size.max(1))
                        .saturating_mul(self.group_size),
                ),
            };
            let bytes = pages
                .saturating_mul(spec.page)
                .saturating_mul(layer_slots)
                .saturating_mul(sequences);
            let Some((tokens, total)) = out.get_mut(spec.cache) else {
                continue;
            };
            *total = total.saturating_add(bytes);
            if !spec.kind.is_state() {
                let kept = pages.saturating_mul(spec.block_size);
                *tokens = Some(tokens.map_or(kept, |t: u64| t.max(kept)));
            }
        }
        out
    }

    /// "Maximum concurrency for N tokens per request".
    pub fn max_concurrency(&self, blocks: u64, context: u64) -> f64 {
        blocks as f64 / self.blocks_per_request(context) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gpt-oss-20b's experts (hidden 2,880, width 2,880) one expert at a time, worked by hand.
    #[test]
    fn mxfp4_experts_are_held_as_each_kernel_lays_them_out() {
        // Stored: 3 × 2,880 × 2,880 FP4 values (half a byte) = 12,441,600; a scale byte per
        // 32 = 777,600; biases (2 × 2,880 + 2,880) BF16 = 17,280.
        assert_eq!(expert_bytes(2880, 2880, 2), Some(13_236_480));
        // Hopper, Triton: values padded to 64 both ways once transposed — (1,440 → 1,472) ×
        // 5,760 and (1,440 → 1,472) × 2,880 = 12,718,080; swizzled scales (5,760 → 5,888) × 90
        // and (2,880 → 3,072) × 90 = 806,400 beside the 777,600 kept; f32 biases 34,560.
        assert_eq!(Mxfp4Kernel::Triton.allocated(2880, 2880), Some(14_336_640));
        // Ampere, Marlin: hidden to 3,072 and width to 2,944, converted in place.
        assert_eq!(Mxfp4Kernel::Marlin.allocated(2880, 2880), expert_bytes(3072, 2944, 2));
        // Blackwell, TRT-LLM: both to 3,072.
        assert_eq!(Mxfp4Kernel::TrtLlm.allocated(2880, 2880), expert_bytes(3072, 3072, 2));
        assert_eq!(Mxfp4Kernel::on(90), Mxfp4Kernel::Triton);
        assert_eq!(Mxfp4Kernel::on(80), Mxfp4Kernel::Marlin);
        assert_eq!(Mxfp4Kernel::on(120), Mxfp4Kernel::Marlin);
        assert_eq!(Mxfp4Kernel::on(100), Mxfp4Kernel::TrtLlm);
        // A hostile width never wraps.
        assert_eq!(Mxfp4Kernel::Triton.allocated(u64::MAX, u64::MAX), None);
    }

    /// With speculative decoding a request holds `1 + num_speculative_tokens` pages of each
    /// state layer (`MambaSpec.max_memory_usage_bytes`, `mamba_cache_mode` "none"); attention
    /// layers are unchanged (their lookahead stops at `max_model_len`).
    #[test]
    fn state_layers_hold_a_page_per_speculative_token_more() {
        let spec = |kind| Spec {
            cache: 0,
            kind,
            cap: None,
            block_size: 16,
            page: 1000,
            layers: 1,
        };
        assert_eq!(spec(CacheKind::Mamba).max_bytes(8192, 2048, 0), 1000);
        assert_eq!(spec(CacheKind::LinearAttention).max_bytes(8192, 2048, 3), 4000);
        assert_eq!(spec(CacheKind::Full).max_bytes(8192, 2048, 3), 512 * 1000);
    }

    #[test]
    fn mla_blocks_follow_the_backend_vllm_selects() {
        assert_eq!(default_block_size(Paging::Standard, Some(100)), 16);
        // FlashAttention MLA on Hopper, Triton MLA on Ampere or an unknown part: 16.
        assert_eq!(default_block_size(Paging::Mla, Some(90)), 16);
        assert_eq!(default_block_size(Paging::Mla, Some(80)), 16);
        assert_eq!(default_block_size(Paging::Mla, None), 16);
        // FlashInfer MLA on Blackwell pages by 32 or 64: the smaller.
        assert_eq!(default_block_size(Paging::Mla, Some(100)), 32);
        assert_eq!(default_block_size(Paging::SparseMla, Some(90)), 64);
    }
}
