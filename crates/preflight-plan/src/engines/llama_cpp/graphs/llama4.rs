use super::{Builder, ExpandOrder, Heads, QScale, sum_experts};
use crate::engines::llama_cpp::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;
use crate::model::Llama4Graph;

/// llama.cpp's Llama 4 graph (`src/models/llama4.cpp:104-268`): attention over the chunked
/// layers' cache and the full layers' (Q, K, V expanded in order; without a window, one cache
/// and K last), Q and K roped then rms-normed except on the NoPE layers, whose Q is scaled by
/// the temperature input instead; at the last layer the attention output and the residual cut
/// to the output rows; then the dense MLP, or the routed experts plus the shared one.
pub(super) fn graph(s: &GraphShape, p: &Llama4Graph) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    // `build_inp_attn_scale` (llama-graph.cpp:2479-2492): one factor a token.
    let attn_scale = b.g.input(Type::F32, [1, 1, s.tokens, 1]);
    let windowed = s.sliding.contains(&true);
    let full = b.cache_inputs(s.full_cells);
    let sliding = match windowed {
        true => b.cache_inputs(s.sliding_cells),
        false => full,
    };
    let order = match windowed {
        true => ExpandOrder::InOrder,
        false => ExpandOrder::KLast,
    };
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    // llama.cpp's `step > 0 && (il + 1) % step == 0` (no layer for a step of 0).
    let every = |step: u64, il: usize| (il as u64 + 1).is_multiple_of(step);
    for (il, &chunked) in s.sliding.iter().enumerate() {
        let cache = if chunked { sliding } else { full };
        let x = b.norm(layer_in);
        // A RoPE layer ropes Q and K and, with `kq_norm`, rms-norms both; a NoPE layer
        // multiplies Q by the temperature instead (llama4.cpp:161-186).
        let roped = !every(p.no_rope_step, il);
        let heads = Heads {
            order,
            rope: roped,
            norm_after_rope: roped && p.kq_norm,
            scale_q: match roped {
                true => QScale::None,
                false => QScale::PerToken(attn_scale),
            },
            ..Heads::PLAIN
        };
        let attention = b.attention(x, cache, heads);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let ffn_in = b.g.like(attention, &[attention, residual], true);
        let x = b.norm(ffn_in);
        let out = match every(p.moe_step, il) {
            true => {
                let routed = experts(&mut b, x, tokens);
                let shared = b.ffn_of(x, tokens, s.expert_width);
                b.g.like(routed, &[routed, shared], true)
            }
            false => b.ffn(x, tokens),
        };
        layer_in = b.g.like(out, &[out, ffn_in], true);
    }
    b.output(layer_in)
}

/// `build_moe_ffn` as it runs for `LLM_ARCH_LLAMA4` (llama-graph.cpp:2007-2373): sigmoid
/// probabilities, the experts chosen by the raw logits, and each token's row repeated once
/// per chosen expert and weighted before the experts run (`weight_before_ffn`), so nothing
/// is weighted after them.
fn experts(b: &mut Builder, x: Id, t: u64) -> Id {
    let s = b.s;
    let (e, used, width) = (s.hidden, s.experts_used, s.expert_width);
    let w = b.weight;
    let logits = b.linear(x, s.experts, t, false);
    let g = &mut b.g;
    let probs = g.like(logits, &[logits], true);
    let order = g.op(Type::I32, [s.experts, t, 1, 1], &[logits], false);
    let chosen = g.view(order, [used, t, 1, 1], g.strides(order));
    let probs = g.reshape(probs, [1, s.experts, t, 1]);
    let weights = g.op(Type::F32, [1, used, t, 1], &[probs, chosen], false);
    g.expand(weights);
    let x = g.reshape(x, [e, 1, t, 1]);
    let repeated = g.op(Type::F32, [e, used, t, 1], &[x], false);
    let weighted = g.like(repeated, &[repeated, weights], true);
    let up = g.op(Type::F32, [width, used, t, 1], &[w, weighted, chosen], false);
    let gate = g.op(Type::F32, [width, used, t, 1], &[w, weighted, chosen], false);
    let act = g.op(Type::F32, [width, used, t, 1], &[gate, up], false);
    let down = g.op(Type::F32, [e, used, t, 1], &[w, act, chosen], false);
    sum_experts(g, down, [e, t], used).unwrap_or(x)
}
