//! llama.cpp's compute graphs as `sched_reserve` builds them, one file per architecture
//! (`src/models/<arch>.cpp` in the vendored tree), over `llm_graph_context`'s builders
//! (llama-graph.cpp) here, replayed through ggml-alloc (`../ggml.rs`).

mod deepseek2;
mod gemma3;
mod glm4_moe;
mod llama;
mod llama4;
mod nemotron_h;
mod openai_moe;
mod phi3;
mod qwen2moe;
mod qwen35;

use super::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;
use crate::model::{ExpertRouting, LlamaCppGraph};

/// The CPU buffer type's alignment (`TENSOR_ALIGNMENT`, ggml-cpu).
const ALIGNMENT: u64 = 32;

/// ggml-alloc's reservation for `graph` at `shape`: the graph built as llama.cpp builds it,
/// replayed through ggml-alloc.
pub(crate) fn replay(graph: LlamaCppGraph, shape: &GraphShape) -> u64 {
    let built = match graph {
        LlamaCppGraph::OpenAiMoe => openai_moe::graph(shape),
        LlamaCppGraph::Llama => llama::graph(shape, Heads::PLAIN, false),
        LlamaCppGraph::Mistral3Tempered => llama::graph(shape, Heads::PLAIN, true),
        LlamaCppGraph::Qwen3 => llama::graph(
            shape,
            Heads {
                qk_norm: true,
                ..Heads::PLAIN
            },
            false,
        ),
        LlamaCppGraph::Qwen2 => llama::graph(
            shape,
            Heads {
                bias: true,
                ..Heads::PLAIN
            },
            false,
        ),
        LlamaCppGraph::Gemma2 => gemma3::graph(shape, true),
        LlamaCppGraph::Gemma3 => gemma3::graph(shape, false),
        LlamaCppGraph::Phi3 => phi3::graph(shape),
        LlamaCppGraph::NemotronH(dims) => nemotron_h::graph(shape, &dims),
        LlamaCppGraph::Deepseek2(params) => deepseek2::graph(shape, &params),
        LlamaCppGraph::Qwen35 => qwen35::graph(shape),
        LlamaCppGraph::Qwen2Moe { shared_width } => qwen2moe::graph(shape, shared_width),
        LlamaCppGraph::Glm4Moe(params) => glm4_moe::graph(shape, &params),
        LlamaCppGraph::Llama4(params) => llama4::graph(shape, &params),
    };
    built.reserve(ALIGNMENT)
}

/// One cache's graph inputs (`build_input_k_idxs`, `build_input_v_idxs`,
/// `build_attn_inp_kq_mask`) and the cells a stream of it holds.
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheInputs {
    pub(super) k_idxs: Id,
    pub(super) v_idxs: Id,
    pub(super) mask: Id,
    pub(super) cells: u64,
}

/// The recurrent state's row-copy inputs (`Builder::state_inputs`).
#[derive(Debug, Clone, Copy)]
pub(super) struct StateInputs {
    pub(super) main: Id,
    pub(super) extra: Id,
}

/// The order `build_attn` expands Q, K and V in: the unified cache's K last (for rope
/// fusion), the sliding-window pair's in order (llama-graph.cpp:2895-2897, 3066-3068).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExpandOrder {
    /// Q, V, K.
    KLast,
    /// Q, K, V.
    InOrder,
}

/// What a model's attention does around `build_attn`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Heads {
    pub(super) order: ExpandOrder,
    /// Q, K and V projections carry biases (gpt-oss, GLM-4.5), and the output projection
    /// (gpt-oss).
    pub(super) bias: bool,
    pub(super) out_bias: bool,
    /// Attention sinks: one more source of the softmax (gpt-oss).
    pub(super) sinks: bool,
    /// `hparams.attn_soft_cap` (Gemma 2): the scores capped before the softmax, three ops
    /// without flash attention, a parameter of its kernel with it.
    pub(super) soft_cap: bool,
    /// Q and K normed per head before rope (Qwen3, Gemma 3).
    pub(super) qk_norm: bool,
    /// Q and K rms-normed, with no weight, after rope (Llama 4's L2 norm, llama4.cpp:180-186).
    pub(super) norm_after_rope: bool,
    /// What Q is multiplied by after rope.
    pub(super) scale_q: QScale,
    /// Q and K roped (not Nemotron-H's attention, which has no rope: nemotron-h.cpp:271-277).
    pub(super) rope: bool,
    /// The Q projection holds each head's queries then its output gate (Qwen3.5): Q is a
    /// strided view of it, and the attention output is multiplied by the gate's sigmoid
    /// before the output projection (qwen35.cpp:254-333).
    pub(super) gate: bool,
}

impl Heads {
    /// Llama's: no biases, sinks or norms; K expanded last.
    pub(super) const PLAIN: Heads = Heads {
        order: ExpandOrder::KLast,
        bias: false,
        out_bias: false,
        sinks: false,
        soft_cap: false,
        qk_norm: false,
        norm_after_rope: false,
        scale_q: QScale::None,
        rope: true,
        gate: false,
    };
}

/// What Q is multiplied by after rope.
#[derive(Debug, Clone, Copy)]
pub(super) enum QScale {
    None,
    /// Its attention scale, `ggml_scale` (Gemma 3).
    Constant,
    /// Temperature tuning's per-token input, `build_inp_attn_scale` (Ministral 3).
    PerToken(Id),
}

/// How `build_moe_ffn` turns the router's logits into expert weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gating {
    /// Softmax over all experts, the chosen weights as they are (Qwen2-MoE: `norm_w` false).
    Softmax,
    /// Softmax over all experts, the chosen weights renormalised (`norm_w`): Qwen3-MoE, Mixtral.
    SoftmaxNormalised,
    /// Top-k of the logits, softmax over the chosen (gpt-oss).
    SoftmaxOfChosen,
    /// Softmax or sigmoid over all experts, the choice among the best groups of the
    /// (biased) probabilities, the chosen weights normalised and scaled as declared (DeepSeek-V3).
    Grouped(Routing),
}

/// How a [`Gating::Grouped`] router chooses (llama-graph.cpp:2077-2166): as the model's keys
/// declare, with `exp_probs_b` added to the probabilities the experts are chosen by where its
/// blocks carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Routing {
    pub(super) declared: ExpertRouting,
    pub(super) probs_bias: bool,
}

/// `llm_graph_context`'s builders over a [`Graph`], each making the tensors llama-graph.cpp
/// makes and expanding where it expands; weights and the KV cache stand for one external
/// tensor (they are never placed in the compute buffer).
pub(super) struct Builder<'s> {
    pub(super) g: Graph,
    pub(super) s: &'s GraphShape,
    pub(super) weight: Id,
    pub(super) cache: Id,
    pub(super) positions: Id,
}

impl<'s> Builder<'s> {
    /// `build_inp_embd` (the token rows, beside the unused embeddings input its select keeps)
    /// and `build_inp_pos`.
    pub(super) fn new(s: &'s GraphShape) -> (Builder<'s>, Id) {
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

    pub(super) fn cache_inputs(&mut self, cells: u64) -> CacheInputs {
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
    pub(super) fn norm(&mut self, x: Id) -> Id {
        let normed = self.g.like(x, &[x], true);
        self.g.like(normed, &[normed, self.weight], true)
    }

    /// `build_lora_mm`, and the bias when the layer has one.
    pub(super) fn linear(&mut self, x: Id, rows: u64, tokens: u64, bias: bool) -> Id {
        let y = self.g.op(Type::F32, [rows, tokens, 1, 1], &[self.weight, x], false);
        match bias {
            true => self.g.like(y, &[y, self.weight], true),
            false => y,
        }
    }

    /// `build_qkv` (separate projections), rope on Q and K, and `build_attn` with the output
    /// projection: the K and V rows written into the cache, then attention over all of it.
    pub(super) fn attention(&mut self, x: Id, cache: CacheInputs, heads: Heads) -> Id {
        let Heads {
            bias,
            out_bias,
            qk_norm,
            norm_after_rope,
            scale_q,
            rope,
            gate,
            ..
        } = heads;
        let s = self.s;
        let (t, d) = (s.tokens, s.head_dim);
        let q_width = s.heads.saturating_mul(d);
        // Each head's queries, then its gate: every other `d` floats of the projection.
        let gated_rows = [
            4,
            d.saturating_mul(8),
            q_width.saturating_mul(8),
            q_width.saturating_mul(8).saturating_mul(t),
        ];
        let head = |b: &mut Self, heads: u64, roped: bool, gated: bool| {
            let width = heads.saturating_mul(d);
            let full = b.linear(x, if gated { width.saturating_mul(2) } else { width }, t, bias);
            let y = match gated {
                true => b.g.view(full, [d, heads, t, 1], gated_rows),
                false => b.g.reshape(full, [d, heads, t, 1]),
            };
            if !roped {
                return (y, full);
            }
            // `attn_q_norm` / `attn_k_norm`, over each head, before rope.
            let y = if qk_norm { b.norm(y) } else { y };
            let y = b.g.like(y, &[y, b.positions, b.weight], true);
            match norm_after_rope {
                true => (b.g.like(y, &[y], true), full),
                false => (y, full),
            }
        };
        let (q, q_full) = head(self, s.heads, rope, gate);
        let q = match scale_q {
            QScale::None => q,
            QScale::Constant => self.g.like(q, &[q], true),
            QScale::PerToken(scale) => self.g.like(q, &[q, scale], true),
        };
        let (k, _) = head(self, s.kv_heads, rope, false);
        let (v, _) = head(self, s.kv_heads, false, false);
        let out = self.attend([q, k, v], cache, heads);
        let g = &mut self.g;
        let out = match gate {
            true => {
                let gate = g.view(q_full, [d, s.heads, t, 1], gated_rows);
                let gate = g.op(Type::F32, [q_width, t, 1, 1], &[gate], false);
                let gate = g.like(gate, &[gate], true);
                g.like(out, &[out, gate], true)
            }
            false => out,
        };
        self.linear(out, s.hidden, t, out_bias)
    }

    /// `build_qkv`'s fused path (`wqkv`, llama-graph.cpp:1662-1690): one projection, Q, K and
    /// V views of it (`ggml_view_3d`, no memory of their own), rope on Q and K.
    pub(super) fn fused_qkv(&mut self, x: Id) -> [Id; 3] {
        let s = self.s;
        let (t, d) = (s.tokens, s.head_dim);
        let width = s.heads.saturating_add(s.kv_heads.saturating_mul(2)).saturating_mul(d);
        let qkv = self.linear(x, width, t, false);
        let row = self.g.strides(qkv)[1];
        let view = |b: &mut Self, heads: u64| {
            let strides = [4, d.saturating_mul(4), row, row.saturating_mul(t)];
            b.g.view(qkv, [d, heads, t, 1], strides)
        };
        let q = view(self, s.heads);
        let q = self.g.like(q, &[q, self.positions], true);
        let k = view(self, s.kv_heads);
        let k = self.g.like(k, &[k, self.positions], true);
        let v = view(self, s.kv_heads);
        [q, k, v]
    }

    /// `build_attn` from Q, K and V (rope applied): expanded in `order`, the K and V rows
    /// written into the cache, and `build_attn_mha`'s attention over all of it, expanded
    /// (llama-graph.cpp:2752) — the output projection is the caller's.
    pub(super) fn attend(&mut self, [q, k, v]: [Id; 3], cache: CacheInputs, heads: Heads) -> Id {
        let Heads {
            order, sinks, soft_cap, ..
        } = heads;
        let s = self.s;
        let (t, d) = (s.tokens, s.head_dim);
        let (q_width, kv_width) = (s.heads.saturating_mul(d), s.kv_heads.saturating_mul(d));
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
                // A V that is a view of a fused projection is made contiguous before it is
                // scattered (`cpy_v`, llama-kv-cache.cpp:1398-1403).
                let v = match g.is_contiguous(v) {
                    true => v,
                    false => g.like(v, &[v], false),
                };
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
                let mut scores = g.op(Type::F32, [cache.cells, t / streams, s.heads, streams], &[k, q], false);
                // Scaled, tanh, scaled back (llama-graph.cpp:2708-2715); flash attention takes
                // the cap as a parameter instead.
                if soft_cap {
                    for _ in 0..3 {
                        scores = g.like(scores, &[scores], true);
                    }
                }
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
        g.expand(out);
        out
    }

    /// `build_ffn(LLM_FFN_SILU | LLM_FFN_GELU, LLM_FFN_PAR)`: gate and up, SwiGLU or GeGLU, down.
    pub(super) fn ffn(&mut self, x: Id, tokens: u64) -> Id {
        self.ffn_of(x, tokens, self.s.ffn_width)
    }

    /// `build_moe_ffn` (llama-graph.cpp:2007-2373) over `tokens` rows (the output rows at a
    /// layer cut to them): router, top-k, the chosen experts' gate, up and down (with biases
    /// where the model has them), weighted and summed.
    pub(super) fn moe(&mut self, x: Id, tokens: u64, gating: Gating, bias: bool) -> Id {
        let s = self.s;
        let (t, e, used, width) = (tokens, s.hidden, s.experts_used, s.expert_width);
        let w = self.weight;
        let logits = self.linear(x, s.experts, t, bias);
        let g = &mut self.g;
        let probs = match gating {
            Gating::Softmax | Gating::SoftmaxNormalised | Gating::Grouped(_) => g.like(logits, &[logits], true),
            Gating::SoftmaxOfChosen => logits,
        };
        let selection = match gating {
            Gating::Grouped(routing) => select_groups(g, probs, w, routing, s.experts, t),
            _ => probs,
        };
        let order = g.op(Type::I32, [s.experts, t, 1, 1], &[selection], false);
        let chosen = g.view(order, [used, t, 1, 1], g.strides(order));
        let probs_3d = g.reshape(probs, [1, s.experts, t, 1]);
        let weights = g.op(Type::F32, [1, used, t, 1], &[probs_3d, chosen], false);
        let weights = match gating {
            Gating::SoftmaxOfChosen => {
                let flat = g.reshape(weights, [used, t, 1, 1]);
                let softmax = g.op(Type::F32, [used, t, 1, 1], &[flat], true);
                g.reshape(softmax, [1, used, t, 1])
            }
            Gating::Softmax => weights,
            Gating::SoftmaxNormalised => normalise(g, weights, used, t),
            Gating::Grouped(routing) => {
                let weights = match routing.declared.norm_weights {
                    true => normalise(g, weights, used, t),
                    false => weights,
                };
                match routing.declared.scale_weights {
                    true => g.op(Type::F32, [1, used, t, 1], &[weights], true),
                    false => weights,
                }
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
        sum_experts(g, weighted, [e, t], used).unwrap_or(x)
    }

    /// Layer `il`'s feed-forward where the first `dense_lead` layers are dense and the rest run
    /// routed experts beside a shared one of `shared_width`, summed (deepseek2.cpp, glm4-moe.cpp).
    pub(super) fn dense_lead_or_routed(
        &mut self,
        il: usize,
        x: Id,
        tokens: u64,
        dense_lead: u64,
        routing: Routing,
        shared_width: u64,
    ) -> Id {
        if (il as u64) < dense_lead {
            return self.ffn(x, tokens);
        }
        let routed = self.moe(x, tokens, Gating::Grouped(routing), false);
        let shared = self.ffn_of(x, tokens, shared_width);
        self.g.like(routed, &[routed, shared], true)
    }

    /// `build_ffn` of `width` (a shared expert's): gate and up, SwiGLU, down.
    pub(super) fn ffn_of(&mut self, x: Id, tokens: u64, width: u64) -> Id {
        let up = self.linear(x, width, tokens, false);
        let gate = self.linear(x, width, tokens, false);
        let act = self.g.op(Type::F32, [width, tokens, 1, 1], &[gate, up], false);
        self.linear(act, self.s.hidden, tokens, false)
    }

    /// At the last layer (`il == n_layer - 1 && inp_out_ids`), `ggml_get_rows` of the output
    /// rows of each tensor; the tokens the rest of the layer runs on.
    pub(super) fn cut_to_outputs(&mut self, last: bool, tensors: [Id; 2], out_ids: Id) -> ([Id; 2], u64) {
        if !last {
            return (tensors, self.s.tokens);
        }
        let shape = [self.s.hidden, self.s.outputs, 1, 1];
        (
            tensors.map(|t| self.g.op(Type::F32, shape, &[t, out_ids], false)),
            self.s.outputs,
        )
    }

    /// `build_rs_inp_impl` (llama-graph.cpp:3548-3569): the recurrent state's row copies, one
    /// a sequence (the memory holds `n_seq_max` rows, llama-model.cpp:2727), and the two views
    /// every layer's `build_rs` reads: the sequences' rows and the rest (none at reservation).
    pub(super) fn state_inputs(&mut self) -> StateInputs {
        let sequences = self.s.sequences.max(1);
        let copy = self.g.input(Type::I32, [sequences, 1, 1, 1]);
        let nb = self.g.strides(copy);
        StateInputs {
            main: self.g.view(copy, [sequences, 1, 1, 1], nb),
            extra: self.g.view(copy, [0, 1, 1, 1], nb),
        }
    }

    /// `build_rs` (llama-graph.cpp:3512-3546): the sequences' state rows `rows` makes from the
    /// state cache (expanded), then the rows beyond them copied back — none at reservation,
    /// where the micro-batch holds every sequence (`get_n_rs` is the memory's size,
    /// llama-memory-recurrent.cpp:1318-1320). Views of the cache place nothing.
    pub(super) fn build_rs(&mut self, inputs: StateInputs, width: u64, rows: impl FnOnce(&mut Graph, Id) -> Id) -> Id {
        let (cache, g) = (self.cache, &mut self.g);
        let out = rows(g, cache);
        g.expand(out);
        let extra = g.op(Type::F32, [width, 0, 1, 1], &[cache, inputs.extra], false);
        let copied = g.write_into(cache, &[extra, cache]);
        g.expand(copied);
        out
    }

    /// [`Self::build_rs`] gathering each sequence's `width`-float row.
    pub(super) fn state_rows(&mut self, inputs: StateInputs, width: u64) -> Id {
        let sequences = self.s.sequences.max(1);
        self.build_rs(inputs, width, |g, cache| {
            g.op(Type::F32, [width, sequences, 1, 1], &[cache, inputs.main], false)
        })
    }

    /// The final norm over every token (`t_h_nextn`, a graph output: llama-graph.cpp:1377-1379),
    /// then the output rows of it and their logits: the hybrid graphs, which cut no layer.
    pub(super) fn output_rows_after_norm(mut self, x: Id, out_ids: Id) -> Graph {
        let normed = self.norm(x);
        self.g.set_output(normed);
        let shape = [self.s.hidden, self.s.outputs, 1, 1];
        let rows = self.g.op(Type::F32, shape, &[normed, out_ids], false);
        self.g.set_output(rows);
        let logits = self.linear(rows, self.s.vocab, self.s.outputs, false);
        self.g.set_output(logits);
        self.g.expand(logits);
        self.g
    }

    /// The final norm and the logits of the outputs; both are graph outputs.
    pub(super) fn output(self, x: Id) -> Graph {
        self.output_capped(x, false)
    }

    /// [`Builder::output`], the logits soft-capped when `capped` (`final_logit_softcapping`:
    /// scaled, tanh, scaled back, the last of them the output, gemma2.cpp:166-169).
    pub(super) fn output_capped(mut self, x: Id, capped: bool) -> Graph {
        let result_norm = self.norm(x);
        self.g.set_output(result_norm);
        let mut logits = self.linear(result_norm, self.s.vocab, self.s.outputs, false);
        if capped {
            for _ in 0..3 {
                logits = self.g.like(logits, &[logits], true);
            }
        }
        self.g.set_output(logits);
        self.g.expand(logits);
        self.g
    }
}

/// The chosen weights divided by their sum (clamped away from zero): `norm_w`
/// (llama-graph.cpp:2148-2162).
fn normalise(g: &mut Graph, weights: Id, used: u64, t: u64) -> Id {
    let flat = g.reshape(weights, [used, t, 1, 1]);
    let sum = g.op(Type::F32, [1, t, 1, 1], &[flat], false);
    let sum = g.like(sum, &[sum], true);
    let normalised = g.op(Type::F32, [used, t, 1, 1], &[flat, sum], true);
    g.reshape(normalised, [1, used, t, 1])
}

/// The probabilities experts are chosen by: biased by `exp_probs_b`, then, with groups, every
/// expert outside the `groups_used` groups of the best two-expert sums masked to -inf
/// (llama-graph.cpp:2077-2118).
fn select_groups(g: &mut Graph, probs: Id, bias: Id, routing: Routing, experts: u64, t: u64) -> Id {
    let selection = match routing.probs_bias {
        true => g.op(Type::F32, [experts, t, 1, 1], &[probs, bias], true),
        false => probs,
    };
    let ExpertRouting {
        groups, groups_used, ..
    } = routing.declared;
    if groups < 2 {
        return selection;
    }
    let per_group = experts / groups;
    let grouped = g.reshape(selection, [per_group, groups, t, 1]);
    let rows = g.reshape(grouped, [1, per_group, groups, t]);
    let order = g.op(Type::I32, [per_group, groups, t, 1], &[grouped], false);
    let best_two = g.view(order, [2, groups, t, 1], g.strides(order));
    let best = g.op(Type::F32, [1, 2, groups, t], &[rows, best_two], false);
    let best = g.reshape(best, [2, groups, t, 1]);
    let scores = g.op(Type::F32, [1, groups, t, 1], &[best], false);
    let scores = g.reshape(scores, [groups, t, 1, 1]);
    let order = g.op(Type::I32, [groups, t, 1, 1], &[scores], false);
    let kept = g.view(order, [groups_used, t, 1, 1], g.strides(order));
    let kept_rows = g.op(Type::F32, [per_group, groups_used, t, 1], &[grouped, kept], false);
    let masked = g.like(grouped, &[grouped], true);
    let masked = g.write_into(masked, &[kept_rows, kept, masked]);
    g.reshape(masked, [experts, t, 1, 1])
}

/// The end of `build_moe_ffn` (llama-graph.cpp:2343-2364): the weighted experts' outputs
/// `weighted` ([width, used, tokens]) expanded, one view per chosen expert (`i × nb[1]` into
/// each token's row) expanded before the adds, then summed in place — or, for one expert, a
/// `ggml_cont` of its view. `None` without experts.
pub(super) fn sum_experts(g: &mut Graph, weighted: Id, [width, tokens]: [u64; 2], used: u64) -> Option<Id> {
    g.expand(weighted);
    let nb = g.strides(weighted);
    let views: Vec<Id> = (0..used)
        .map(|_| {
            let view = g.view(weighted, [width, tokens, 1, 1], [nb[0], nb[2], nb[3], nb[3]]);
            g.expand(view);
            view
        })
        .collect();
    let (first, second, rest) = match views.as_slice() {
        [first, second, rest @ ..] => (*first, *second, rest),
        [only] => return Some(g.op(Type::F32, [width, tokens, 1, 1], &[*only], false)),
        [] => return None,
    };
    let mut sum = g.op(Type::F32, [width, tokens, 1, 1], &[first, second], true);
    g.expand(sum);
    for &view in rest {
        sum = g.like(sum, &[sum, view], true);
        g.expand(sum);
    }
    Some(sum)
}
