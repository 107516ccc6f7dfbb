//! llama.cpp's memory accounting, followed from the tree llama-cpp-python 0.3.36 vendors
//! (commit 0c1e570; `docs/memory.md` § llama.cpp names every source line): the model buffer,
//! the KV cache in 256-cell streams, the output buffer and the compute buffer ggml-alloc
//! reserves for the worst-case micro-batch — replayed through ggml-alloc where the family
//! names llama.cpp's graph, else estimated by its largest stage. Every buffer here is one
//! llama.cpp allocates; none is a margin.

use super::ggml::{Graph, Id, Type};
use crate::memory::{GraphShape, LayerCache, Shape, Sizing, Target};
use crate::model::{LlamaCppGraph, Mixer, StateDtype};
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

/// The CPU buffer type's alignment (`TENSOR_ALIGNMENT`, ggml-cpu).
const ALIGNMENT: u64 = 32;

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
    Buffers {
        weights: sizing.weights,
        kv,
        compute,
        output,
        host: sizing
            .weights
            .saturating_add(kv)
            .saturating_add(compute)
            .saturating_add(output),
    }
}

/// The context llama.cpp creates, its compute buffer (replayed where the family names the
/// graph, else estimated) and its output buffer.
pub fn reserved(sizing: &Sizing, context: u64, target: &Target) -> (Context, u64, u64) {
    let knobs = Knobs::resolve(target.options);
    let ctx = Context::new(context, sizing.sequences, &knobs);
    let compute = match sizing.llama_cpp_graph {
        Some(graph) => sizing
            .replays
            .reserve(graph, ctx.graph_shape(sizing, knobs.flash_attn), replay),
        None => ctx.compute(&sizing.shape, &sizing.caches, knobs.flash_attn),
    };
    let output = ctx.output(&sizing.shape);
    (ctx, compute, output)
}

/// ggml-alloc's reservation for `graph` at `shape`: the graph built as llama.cpp builds it,
/// replayed through ggml-alloc.
fn replay(graph: LlamaCppGraph, shape: &GraphShape) -> u64 {
    let built = match graph {
        LlamaCppGraph::OpenAiMoe => openai_moe_graph(shape),
        LlamaCppGraph::Llama => llama_graph(shape, false),
        LlamaCppGraph::Qwen3 => llama_graph(shape, true),
        LlamaCppGraph::Gemma3 => gemma3_graph(shape),
    };
    built.reserve(ALIGNMENT)
}

/// One cache's graph inputs (`build_input_k_idxs`, `build_input_v_idxs`,
/// `build_attn_inp_kq_mask`) and the cells a stream of it holds.
#[derive(Debug, Clone, Copy)]
struct CacheInputs {
    k_idxs: Id,
    v_idxs: Id,
    mask: Id,
    cells: u64,
}

/// The order `build_attn` expands Q, K and V in: the unified cache's K last (for rope
/// fusion), the sliding-window pair's in order (llama-graph.cpp:2895-2897, 3066-3068).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpandOrder {
    /// Q, V, K.
    KLast,
    /// Q, K, V.
    InOrder,
}

/// What a model's attention does around `build_attn`.
#[derive(Debug, Clone, Copy)]
struct Heads {
    order: ExpandOrder,
    /// Q, K, V and output projections carry biases (gpt-oss).
    bias: bool,
    /// Attention sinks: one more source of the softmax (gpt-oss).
    sinks: bool,
    /// Q and K normed per head before rope (Qwen3, Gemma 3).
    qk_norm: bool,
    /// Q scaled after rope (Gemma 3).
    scale_q: bool,
}

impl Heads {
    /// Llama's: no biases, sinks or norms; K expanded last.
    const PLAIN: Heads = Heads {
        order: ExpandOrder::KLast,
        bias: false,
        sinks: false,
        qk_norm: false,
        scale_q: false,
    };
}

/// How `build_moe_ffn` turns the router's logits into expert weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gating {
    /// Softmax over all experts, the chosen weights renormalised (`norm_w`): Qwen3-MoE, Mixtral.
    SoftmaxNormalised,
    /// Top-k of the logits, softmax over the chosen (gpt-oss).
    SoftmaxOfChosen,
}

/// `llm_graph_context`'s builders over a [`Graph`], each making the tensors llama-graph.cpp
/// makes and expanding where it expands; weights and the KV cache stand for one external
/// tensor (they are never placed in the compute buffer).
struct Builder<'s> {
    g: Graph,
    s: &'s GraphShape,
    weight: Id,
    cache: Id,
    positions: Id,
}

impl<'s> Builder<'s> {
    /// `build_inp_embd` (the token rows, beside the unused embeddings input its select keeps)
    /// and `build_inp_pos`.
    fn new(s: &'s GraphShape) -> (Builder<'s>, Id) {
        let mut g = Graph::default();
        let t = s.tokens;
        let weight = g.external(Type::F32, [1, 1, 1, 1]);
        let cache = g.external(Type::F16, [1, 1, 1, 1]);
        let tokens = g.input(Type::I32, [t, 1, 1, 1]);
        let embeddings = g.input(Type::F32, [s.hidden, t, 1, 1]);
        let rows = g.op(Type::F32, [s.hidden, t, 1, 1], &[weight, tokens], false);
        g.expand(rows);
        g.expand(embeddings);
        let positions = g.input(Type::I32, [t, 1, 1, 1]);
        let builder = Builder {
            g,
            s,
            weight,
            cache,
            positions,
        };
        (builder, rows)
    }

    fn cache_inputs(&mut self, cells: u64) -> CacheInputs {
        let (t, kv_width) = (self.s.tokens, self.s.kv_heads.saturating_mul(self.s.head_dim));
        // V rows are scattered one element a row when the cache is transposed (no flash
        // attention), and the mask is f16 only for flash attention.
        let (v_rows, mask_type) = match self.s.flash_attn {
            true => (t, Type::F16),
            false => (t.saturating_mul(kv_width), Type::F32),
        };
        CacheInputs {
            k_idxs: self.g.input(Type::I64, [t, 1, 1, 1]),
            v_idxs: self.g.input(Type::I64, [v_rows, 1, 1, 1]),
            mask: self.g.input(mask_type, [cells, t, 1, 1]),
            cells,
        }
    }

    /// `build_norm(LLM_NORM_RMS)` with its weight.
    fn norm(&mut self, x: Id) -> Id {
        let normed = self.g.like(x, &[x], true);
        self.g.like(normed, &[normed, self.weight], true)
    }

    /// `build_lora_mm`, and the bias when the layer has one.
    fn linear(&mut self, x: Id, rows: u64, tokens: u64, bias: bool) -> Id {
        let y = self.g.op(Type::F32, [rows, tokens, 1, 1], &[self.weight, x], false);
        match bias {
            true => self.g.like(y, &[y, self.weight], true),
            false => y,
        }
    }

    /// `build_qkv` (separate projections), rope on Q and K, and `build_attn` with the output
    /// projection: the K and V rows written into the cache, then attention over all of it.
    fn attention(&mut self, x: Id, cache: CacheInputs, heads: Heads) -> Id {
        let Heads {
            order,
            bias,
            sinks,
            qk_norm,
            scale_q,
        } = heads;
        let s = self.s;
        let (t, d) = (s.tokens, s.head_dim);
        let (q_width, kv_width) = (s.heads.saturating_mul(d), s.kv_heads.saturating_mul(d));
        let head = |b: &mut Self, heads: u64, rope: bool| {
            let y = b.linear(x, heads.saturating_mul(d), t, bias);
            let y = b.g.reshape(y, [d, heads, t, 1]);
            if !rope {
                return y;
            }
            // `attn_q_norm` / `attn_k_norm`, over each head, before rope.
            let y = if qk_norm { b.norm(y) } else { y };
            b.g.like(y, &[y, b.positions, b.weight], true)
        };
        let q = head(self, s.heads, true);
        // Gemma 3 scales Q by its attention scale after rope.
        let q = if scale_q { self.g.like(q, &[q], true) } else { q };
        let k = head(self, s.kv_heads, true);
        let v = head(self, s.kv_heads, false);
        let expanded = match order {
            ExpandOrder::KLast => [q, v, k],
            ExpandOrder::InOrder => [q, k, v],
        };
        for y in expanded {
            self.g.expand(y);
        }
        let g = &mut self.g;
        let k_rows = g.reshape(k, [kv_width, t, 1, 1]);
        let written = g.write_into(self.cache, &[k_rows, cache.k_idxs, self.cache]);
        g.expand(written);
        let written = match s.flash_attn {
            true => {
                let v_rows = g.reshape(v, [kv_width, t, 1, 1]);
                g.write_into(self.cache, &[v_rows, cache.v_idxs, self.cache])
            }
            false => {
                let v_rows = g.reshape(v, [kv_width, t, 1, 1]);
                let v_elements = g.reshape(v_rows, [1, t.saturating_mul(kv_width), 1, 1]);
                let cache_elements = g.reshape(self.cache, [1, 1, 1, 1]);
                g.write_into(cache_elements, &[v_elements, cache.v_idxs, cache_elements])
            }
        };
        g.expand(written);
        // `build_attn_mha`: Q, K and V as views of their heads across the streams.
        let streams = s.streams.max(1);
        let cache_view = |g: &mut Graph| {
            let view = g.view(self.cache, [d, s.kv_heads, cache.cells, streams], g.strides(self.cache));
            g.permute_0213(view)
        };
        let q_view = g.reshape(q, [d, s.heads, t, 1]);
        let q = g.permute_0213(q_view);
        let (k, v) = (cache_view(g), cache_view(g));
        let mut sources = vec![q, k, v, cache.mask];
        let out = match s.flash_attn {
            true => {
                if sinks {
                    sources.push(self.weight);
                }
                let out = g.op(Type::F32, [d, s.heads, t, 1], &sources, false);
                g.reshape(out, [q_width, t, 1, 1])
            }
            false => {
                let scores = g.op(Type::F32, [cache.cells, t / streams, s.heads, streams], &[k, q], false);
                let mut softmax = vec![scores, cache.mask];
                if sinks {
                    softmax.push(self.weight);
                }
                let scores = g.like(scores, &softmax, true);
                let mixed = g.op(Type::F32, [d, t / streams, s.heads, streams], &[v, scores], false);
                let permuted = g.permute_0213(mixed);
                g.op(Type::F32, [q_width, t, 1, 1], &[permuted], false)
            }
        };
        self.linear(out, s.hidden, t, bias)
    }

    /// `build_ffn(LLM_FFN_SILU | LLM_FFN_GELU, LLM_FFN_PAR)`: gate and up, SwiGLU or GeGLU, down.
    fn ffn(&mut self, x: Id, tokens: u64) -> Id {
        let width = self.s.ffn_width;
        let up = self.linear(x, width, tokens, false);
        let gate = self.linear(x, width, tokens, false);
        let act = self.g.op(Type::F32, [width, tokens, 1, 1], &[gate, up], false);
        self.linear(act, self.s.hidden, tokens, false)
    }

    /// `build_moe_ffn` (llama-graph.cpp:2007-2373): router, top-k, the chosen experts' gate,
    /// up and down (with biases where the model has them), weighted and summed.
    fn moe(&mut self, x: Id, gating: Gating, bias: bool) -> Id {
        let s = self.s;
        let (t, e, used, width) = (s.tokens, s.hidden, s.experts_used, s.expert_width);
        let w = self.weight;
        let logits = self.linear(x, s.experts, t, bias);
        let g = &mut self.g;
        let probs = match gating {
            Gating::SoftmaxNormalised => g.like(logits, &[logits], true),
            Gating::SoftmaxOfChosen => logits,
        };
        let order = g.op(Type::I32, [s.experts, t, 1, 1], &[probs], false);
        let chosen = g.view(order, [used, t, 1, 1], g.strides(order));
        let probs_3d = g.reshape(probs, [1, s.experts, t, 1]);
        let weights = g.op(Type::F32, [1, used, t, 1], &[probs_3d, chosen], false);
        let weights = match gating {
            Gating::SoftmaxOfChosen => {
                let flat = g.reshape(weights, [used, t, 1, 1]);
                let softmax = g.op(Type::F32, [used, t, 1, 1], &[flat], true);
                g.reshape(softmax, [1, used, t, 1])
            }
            Gating::SoftmaxNormalised => {
                let flat = g.reshape(weights, [used, t, 1, 1]);
                let sum = g.op(Type::F32, [1, t, 1, 1], &[flat], false);
                let sum = g.like(sum, &[sum], true);
                let normalised = g.op(Type::F32, [used, t, 1, 1], &[flat, sum], true);
                g.reshape(normalised, [1, used, t, 1])
            }
        };
        g.expand(weights);
        let x = g.reshape(x, [e, 1, t, 1]);
        let expert = |g: &mut Graph, rows: u64, input: Id| {
            let y = g.op(Type::F32, [rows, used, t, 1], &[w, input, chosen], false);
            match bias {
                true => g.like(y, &[y, w, chosen], true),
                false => y,
            }
        };
        let up = expert(g, width, x);
        let gate = expert(g, width, x);
        let act = g.op(Type::F32, [width, used, t, 1], &[gate, up], false);
        let down = expert(g, e, act);
        let weighted = g.like(down, &[down, weights], true);
        g.expand(weighted);
        let nb = g.strides(weighted);
        // One view per chosen expert (`i × nb[1]` into each token's row), expanded before the adds.
        let views: Vec<Id> = (0..used)
            .map(|_| {
                let view = g.view(weighted, [e, t, 1, 1], [nb[0], nb[2], nb[3], nb[3]]);
                g.expand(view);
                view
            })
            .collect();
        let (first, second, rest) = match views.as_slice() {
            [first, second, rest @ ..] => (*first, *second, rest),
            // One expert: `ggml_cont` of its view.
            [only] => return g.op(Type::F32, [e, t, 1, 1], &[*only], false),
            [] => return x,
        };
        let mut sum = g.op(Type::F32, [e, t, 1, 1], &[first, second], true);
        g.expand(sum);
        for &view in rest {
            sum = g.like(sum, &[sum, view], true);
            g.expand(sum);
        }
        sum
    }

    /// At the last layer (`il == n_layer - 1 && inp_out_ids`), `ggml_get_rows` of the output
    /// rows of each tensor; the tokens the rest of the layer runs on.
    fn cut_to_outputs(&mut self, last: bool, tensors: [Id; 2], out_ids: Id) -> ([Id; 2], u64) {
        if !last {
            return (tensors, self.s.tokens);
        }
        let shape = [self.s.hidden, self.s.outputs, 1, 1];
        (
            tensors.map(|t| self.g.op(Type::F32, shape, &[t, out_ids], false)),
            self.s.outputs,
        )
    }

    /// The final norm and the logits of the outputs; both are graph outputs.
    fn output(mut self, x: Id) -> Graph {
        let result_norm = self.norm(x);
        self.g.set_output(result_norm);
        let logits = self.linear(result_norm, self.s.vocab, self.s.outputs, false);
        self.g.set_output(logits);
        self.g.expand(logits);
        self.g
    }
}

/// llama.cpp's gpt-oss graph (`src/models/openai-moe.cpp`) as `sched_reserve` builds it:
/// `tokens` tokens against the full caches, attention with biases and sinks, the MoE with
/// biased experts and the softmax of the chosen logits; the last layer's output is
/// `t_h_nextn`, a graph output, and the output rows are taken after the layers.
pub fn openai_moe_graph(s: &GraphShape) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    let full = b.cache_inputs(s.full_cells);
    let sliding = b.cache_inputs(s.sliding_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    for &windowed in &s.sliding {
        let cache = if windowed { sliding } else { full };
        let x = b.norm(layer_in);
        let heads = Heads {
            order: ExpandOrder::InOrder,
            bias: true,
            sinks: true,
            ..Heads::PLAIN
        };
        let attention = b.attention(x, cache, heads);
        let ffn_in = b.g.like(attention, &[attention, layer_in], true);
        let x = b.norm(ffn_in);
        let moe = b.moe(x, Gating::SoftmaxOfChosen, true);
        layer_in = b.g.like(moe, &[moe, ffn_in], true);
    }
    b.g.set_output(layer_in);
    let rows =
        b.g.op(Type::F32, [s.hidden, s.outputs, 1, 1], &[layer_in, out_ids], false);
    b.output(rows)
}

/// llama.cpp's Llama graph (`src/models/llama.cpp`; with `qk_norm`, Qwen3's `qwen3.cpp` and
/// `qwen3moe.cpp`): one unified KV cache, Q, V, K expanded in that order, no biases; at the last layer the attention output and the residual are cut
/// to the output rows before the feed-forward (a dense SwiGLU, or the MoE with normalised
/// softmax weights).
pub fn llama_graph(s: &GraphShape, qk_norm: bool) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    for il in 0..layers {
        let x = b.norm(layer_in);
        let heads = Heads {
            qk_norm,
            ..Heads::PLAIN
        };
        let attention = b.attention(x, cache, heads);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let ffn_in = b.g.like(attention, &[attention, residual], true);
        let x = b.norm(ffn_in);
        let out = match s.experts {
            0 => b.ffn(x, tokens),
            _ => b.moe(x, Gating::SoftmaxNormalised, false),
        };
        layer_in = b.g.like(out, &[out, ffn_in], true);
    }
    b.output(layer_in)
}

/// llama.cpp's Gemma 3 graph (`src/models/gemma3.cpp`): the embeddings scaled, Q and K normed
/// per head, Q scaled after rope, attention over the sliding-window pair of caches (Q, K, V
/// expanded in order), sandwich norms around attention and the GeGLU feed-forward; at the
/// last layer the attention output and the residual are cut to the output rows. (A
/// `final_logit_softcapping` would add three ops on the logits; Gemma 3 has none.)
pub fn gemma3_graph(s: &GraphShape) -> Graph {
    let (mut b, rows) = Builder::new(s);
    let mut layer_in = b.g.like(rows, &[rows], true);
    let full = b.cache_inputs(s.full_cells);
    let sliding = b.cache_inputs(s.sliding_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    for (il, &windowed) in s.sliding.iter().enumerate() {
        let cache = if windowed { sliding } else { full };
        let x = b.norm(layer_in);
        let heads = Heads {
            order: ExpandOrder::InOrder,
            qk_norm: true,
            scale_q: true,
            ..Heads::PLAIN
        };
        let attention = b.attention(x, cache, heads);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let normed = b.norm(attention);
        let attention_out = b.g.like(normed, &[normed, residual], true);
        let x = b.norm(attention_out);
        let ffn = b.ffn(x, tokens);
        let normed = b.norm(ffn);
        layer_in = b.g.like(normed, &[normed, attention_out], true);
    }
    b.output(layer_in)
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
