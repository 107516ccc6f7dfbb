//! llama.cpp's memory accounting, followed from the tree llama-cpp-python 0.3.36 vendors
//! (commit 0c1e570; `docs/memory.md` § llama.cpp names every source line): the model buffer,
//! the KV cache in 256-cell streams, the output buffer and the compute buffer ggml-alloc
//! reserves for the worst-case micro-batch — replayed through ggml-alloc where the family
//! names llama.cpp's graph, else estimated by its largest stage. Every buffer here is one
//! llama.cpp allocates; none is a margin.

use crate::memory::{GraphShape, LayerCache, Shape, Sizing, Target};
use crate::model::{Mixer, StateDtype};
use crate::options::PlanOptions;

/// `llama_context`: `n_ctx` and each stream's cells are padded to 256 (llama-context.cpp:290-305),
/// and so is the sliding-window cache (llama-kv-cache-iswa.cpp:73).
const CELL_PAD: u64 = 256;

/// `common_params`' `n_batch` and `n_ubatch`, the tools' defaults.
pub const DEFAULT_BATCH: u64 = 2048;
pub const DEFAULT_UBATCH: u64 = 512;

/// Activations, logits, the KQ scores and (without flash attention) the mask are f32; with
/// flash attention the mask is f16 (llama-graph.cpp:39).
const F32: u64 = 4;
const F16: u64 = 2;

fn pad(n: u64) -> u64 {
    n.div_ceil(CELL_PAD).saturating_mul(CELL_PAD)
}

/// llama.cpp's knobs, resolved against the tools' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// `n_ubatch`, capped by `n_batch` as `llama_context` caps it.
    pub ubatch: u64,
    /// `--flash-attn auto` resolves to on wherever the backend runs the op (every backend
    /// preflight plans for: `llama_init_from_model`, llama-context.cpp:3822).
    pub flash_attn: bool,
    /// `--kv-unified`: one stream for every sequence.
    pub kv_unified: bool,
    /// `--swa-full`: windowed layers cache every cell.
    pub swa_full: bool,
}

impl Knobs {
    pub fn resolve(options: &PlanOptions) -> Knobs {
        let batch = options.batch.unwrap_or(DEFAULT_BATCH);
        Knobs {
            ubatch: options.ubatch.unwrap_or(DEFAULT_UBATCH).min(batch),
            flash_attn: options.flash_attn.unwrap_or(true),
            kv_unified: options.kv_unified,
            swa_full: options.swa_full,
        }
    }
}

/// The context llama.cpp creates for `sequences` sequences of `context` tokens: by default
/// (non-unified KV) one stream a sequence, each of `n_ctx_seq` cells; unified, one stream of
/// them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// `n_ctx_seq`: cells one stream holds, padded to 256.
    pub cells: u64,
    /// `n_stream`: `n_seq_max`, or 1 unified.
    pub streams: u64,
    /// `n_seq_max`.
    pub sequences: u64,
    /// Tokens of the worst-case graph: `min(n_ctx, n_ubatch)` (`sched_reserve`).
    pub tokens: u64,
    pub ubatch: u64,
    /// Windows a windowed stream keeps: every sequence's when unified.
    windows: u64,
    swa_full: bool,
}

impl Context {
    pub fn new(context: u64, sequences: u64, knobs: &Knobs) -> Context {
        let sequences = sequences.max(1);
        let (cells, streams) = match knobs.kv_unified {
            true => (pad(context.max(1).saturating_mul(sequences)), 1),
            false => (pad(context.max(1)), sequences),
        };
        Context {
            cells,
            streams,
            sequences,
            tokens: cells.saturating_mul(streams).min(knobs.ubatch),
            ubatch: knobs.ubatch,
            windows: if knobs.kv_unified { sequences } else { 1 },
            swa_full: knobs.swa_full,
        }
    }

    /// Cells a stream of this cache holds: the whole `n_ctx_seq`, or for a windowed layer
    /// `GGML_PAD(min(n_ctx_seq, n_swa × (unified ? n_seq_max : 1) + n_ubatch), 256)` unless
    /// `swa_full`.
    pub fn cells_of(&self, cache: &LayerCache) -> u64 {
        match cache.cap {
            Some(window) if !self.swa_full => pad(self
                .cells
                .min(window.saturating_mul(self.windows).saturating_add(self.ubatch))),
            _ => self.cells,
        }
    }

    /// Bytes one layer of this group allocates: K (and V unless MLA) rows for every cell of
    /// every stream; a recurrent layer's r and s rows for each of `n_seq_max` sequences.
    pub fn layer_bytes(&self, cache: &LayerCache) -> u64 {
        cache
            .per_token
            .saturating_mul(self.cells_of(cache))
            .saturating_mul(self.streams)
            .saturating_add(cache.per_sequence.saturating_mul(self.sequences))
    }

    pub fn kv(&self, caches: &[LayerCache]) -> u64 {
        caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(self.layer_bytes(c).saturating_mul(c.layers))
        })
    }

    /// The output buffer `output_reserve(n_seq_max)` allocates at construction: one row of
    /// f32 logits per sequence (llama-context.cpp:2141).
    pub fn output(&self, shape: &Shape) -> u64 {
        shape.vocab.saturating_mul(F32).saturating_mul(self.sequences)
    }

    /// The dimensions llama.cpp's graph for `sizing` is built from, in this context.
    fn graph_shape(&self, sizing: &Sizing, flash_attn: bool) -> GraphShape {
        let shape = &sizing.shape;
        let moe = shape.moe.unwrap_or_default();
        let windowed = sizing.caches.iter().find(|c| c.cap.is_some());
        let sequences = self.sequences.max(1);
        let (conv_kernel, conv_channels, key_dim, value_heads, value_dim) = match shape.linear_attention {
            Some(Mixer::LinearAttention {
                conv_dim,
                conv_kernel,
                heads,
                key_dim,
                value_dim,
                ..
            }) => (conv_kernel, conv_dim, key_dim, heads, value_dim),
            _ => (0, 0, 0, 0, 0),
        };
        // The channels are q and k over the key heads, then v: `2 × H_k × S_k + H_v × S_v`.
        let key_heads = conv_channels
            .saturating_sub(value_heads.saturating_mul(value_dim))
            .checked_div(key_dim.saturating_mul(2))
            .unwrap_or(0);
        GraphShape {
            tokens: self.tokens.div_ceil(sequences).saturating_mul(sequences),
            outputs: self.tokens,
            hidden: shape.hidden,
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            head_dim: shape.head_dim,
            vocab: shape.vocab,
            experts: moe.experts,
            experts_used: moe.active,
            expert_width: moe.width,
            ffn_width: shape.intermediate,
            sliding: sizing
                .layer_groups
                .iter()
                .map(|g| g.and_then(|g| sizing.caches.get(g)).is_some_and(|c| c.cap.is_some()))
                .collect(),
            full_cells: self.cells,
            sliding_cells: windowed.map_or(self.cells, |c| self.cells_of(c)),
            streams: self.streams,
            flash_attn,
            layer_caches: sizing
                .layer_groups
                .iter()
                .map(|g| g.and_then(|g| sizing.caches.get(g)).map(|c| c.kind))
                .collect(),
            sequences: self.sequences,
            conv_kernel,
            conv_channels,
            key_heads,
            key_dim,
            value_heads,
            value_dim,
            shared_expert_width: moe.width.saturating_mul(moe.shared),
        }
    }

    /// The compute buffer: ggml-alloc's peak over the worst-case graph `sched_reserve` builds
    /// (`n_tokens` tokens, every one an output), as the largest of three stages:
    /// - output: the logits of every token beside the final norm and its input;
    /// - attention: the masks (one per cache, live through every layer), the residual, Q and
    ///   the attention output, and without flash attention the f32 KQ scores over the cells
    ///   one stream attends to (`build_attn_mha`, llama-graph.cpp:2688; softmax in place);
    /// - feed-forward: the masks, the residual and its norm, gate, up and their product.
    ///
    /// ggml-alloc's placement (where the logits land after the layers' tensors are freed) can
    /// add a few MiB of fragmentation on top; only a replay of the graph knows it (the
    /// `*_graph` builders below, for the architectures that have one).
    pub fn compute(&self, shape: &Shape, caches: &[LayerCache], flash_attn: bool) -> u64 {
        let tokens = self.tokens;
        let row = |width: u64| tokens.saturating_mul(width).saturating_mul(F32);
        let attends = caches.iter().filter(|c| !c.kind.is_state());
        let full = attends.clone().filter(|c| c.cap.is_none()).map(|_| self.cells).max();
        let windowed = attends.filter(|c| c.cap.is_some()).map(|c| self.cells_of(c)).max();
        let mask_element = if flash_attn { F16 } else { F32 };
        let masks = [full, windowed].into_iter().flatten().fold(0u64, |acc, cells| {
            acc.saturating_add(tokens.saturating_mul(cells).saturating_mul(mask_element))
        });
        let widest = full.into_iter().chain(windowed).max().unwrap_or(0);
        let scores = match flash_attn {
            true => 0,
            false => row(widest.saturating_mul(shape.heads)),
        };
        let output = row(shape.vocab.saturating_add(shape.hidden.saturating_mul(2)));
        let attention = masks
            .saturating_add(scores)
            .saturating_add(row(shape.hidden.saturating_add(shape.q_width.saturating_mul(2))));
        let ffn = masks.saturating_add(row(shape
            .hidden
            .saturating_mul(2)
            .saturating_add(shape.ffn_width().saturating_mul(3))));
        output.max(attention).max(ffn)
    }
}

/// llama.cpp keeps recurrent state (conv r and SSM s rows) in F32 whatever the model's dtype
/// (`recurrent_type_r`/`_s`, llama-model.cpp:2483).
pub fn engine_mixer(mixer: Mixer) -> Mixer {
    match mixer {
        Mixer::LinearAttention { .. } | Mixer::Mamba { .. } => mixer.with_state_dtype(StateDtype::F32),
        other => other,
    }
}

/// What llama.cpp allocates for one artifact, and the part of it that stays in host RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffers {
    /// Model weights on the CPU backend; with devices, the busiest device's.
    pub weights: u64,
    pub kv: u64,
    pub compute: u64,
    pub output: u64,
    /// Bytes in host RAM rather than on a device: on the CPU backend all of the above; with
    /// devices, `memory.host`'s total (see `offload.rs`).
    pub host: u64,
}

/// llama.cpp's buffers for `sizing` at `context` tokens a sequence on the CPU backend (what
/// `oracles/llamacpp/` measured): the whole model, its cells, the compute and output buffers.
pub fn buffers(sizing: &Sizing, context: u64, target: &Target) -> Buffers {
    let (ctx, compute, output) = reserved(sizing, context, target);
    let kv = ctx.kv(&sizing.caches);
    let weights = mapped(sizing);
    Buffers {
        weights,
        kv,
        compute,
        output,
        host: weights
            .saturating_add(kv)
            .saturating_add(compute)
            .saturating_add(output),
    }
}

/// The CPU backend's model buffer: per file, the span of the mapping from the first loaded
/// tensor to the end of the last (`get_mapping_range`, llama-model-loader.cpp:1449-1464, as
/// `load_tensors` wraps it, llama-model.cpp:1854-1868) — a skipped MTP block that sits before
/// the output layer is inside it. Without a file layout (not a GGUF, or a what-if dtype the
/// file does not hold), the weights.
fn mapped(sizing: &Sizing) -> u64 {
    let stored = sizing.named.iter().fold(0u64, |acc, t| acc.saturating_add(t.bytes));
    if sizing.named.is_empty() || stored != sizing.weights {
        return sizing.weights;
    }
    let mut spans: std::collections::BTreeMap<u32, (u64, u64)> = std::collections::BTreeMap::new();
    for t in sizing.named.iter() {
        let end = t.offset.saturating_add(t.bytes);
        let span = spans.entry(t.file).or_insert((t.offset, end));
        *span = (span.0.min(t.offset), span.1.max(end));
    }
    spans
        .values()
        .fold(0u64, |acc, (first, last)| acc.saturating_add(last - first))
}

/// The context llama.cpp creates, its compute buffer (replayed where the family names the
/// graph, else estimated) and its output buffer.
pub fn reserved(sizing: &Sizing, context: u64, target: &Target) -> (Context, u64, u64) {
    let knobs = Knobs::resolve(target.options);
    let ctx = Context::new(context, sizing.sequences, &knobs);
    let compute = match sizing.llama_cpp_graph {
        Some(graph) => sizing
            .replays
            .reserve(graph, ctx.graph_shape(sizing, knobs.flash_attn), super::graphs::replay),
        None => ctx.compute(&sizing.shape, &sizing.caches, knobs.flash_attn),
    };
    let output = ctx.output(&sizing.shape);
    (ctx, compute, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_pad_to_256_cells_a_stream() {
        let knobs = Knobs {
            ubatch: 512,
            flash_attn: true,
            kv_unified: false,
            swa_full: false,
        };
        // 10,000 tokens: n_ctx 10,240, as llama.cpp logs it.
        let one = Context::new(10_000, 1, &knobs);
        assert_eq!((one.cells, one.streams, one.tokens), (10_240, 1, 512));
        // Four sequences of 2,500: each stream pads to 2,560 cells.
        let four = Context::new(2_500, 4, &knobs);
        assert_eq!((four.cells, four.streams), (2_560, 4));
        // A short context reserves a graph of fewer tokens than the micro-batch.
        assert_eq!(Context::new(100, 1, &knobs).tokens, 256);
        // Unified: one stream of all four sequences' cells.
        let unified = Context::new(
            2_500,
            4,
            &Knobs {
                kv_unified: true,
                ..knobs
            },
        );
        assert_eq!((unified.cells, unified.streams, unified.sequences), (10_240, 1, 4));
    }

    #[test]
    fn recurrent_state_is_f32_whatever_the_model_pins() {
        let mamba = Mixer::Mamba {
            conv_dim: 8,
            conv_kernel: 4,
            heads: 2,
            head_dim: 4,
            state_size: 16,
            state_dtype: StateDtype::F16,
        };
        assert_eq!(engine_mixer(mamba), mamba.with_state_dtype(StateDtype::F32));
        assert_ne!(engine_mixer(mamba), mamba);
        let attention = Mixer::full(8, 128);
        assert_eq!(engine_mixer(attention), attention);
    }
}
