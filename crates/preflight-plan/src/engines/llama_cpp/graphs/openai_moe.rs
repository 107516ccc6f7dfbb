use super::{Builder, ExpandOrder, Gating, Heads};
use crate::engines::llama_cpp::ggml::{Graph, Type};
use crate::memory::GraphShape;

/// llama.cpp's gpt-oss graph (`src/models/openai-moe.cpp`) as `sched_reserve` builds it:
/// `tokens` tokens against the full caches, attention with biases and sinks, the MoE with
/// biased experts and the softmax of the chosen logits; the last layer's output is
/// `t_h_nextn`, a graph output, and the output rows are taken after the layers.
pub(super) fn graph(s: &GraphShape) -> Graph {
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
            out_bias: true,
            sinks: true,
            ..Heads::PLAIN
        };
        let attention = b.attention(x, cache, heads);
        let ffn_in = b.g.like(attention, &[attention, layer_in], true);
        let x = b.norm(ffn_in);
        let moe = b.moe(x, s.tokens, Gating::SoftmaxOfChosen, true);
        layer_in = b.g.like(moe, &[moe, ffn_in], true);
    }
    b.g.set_output(layer_in);
    let rows =
        b.g.op(Type::F32, [s.hidden, s.outputs, 1, 1], &[layer_in, out_ids], false);
    b.output(rows)
}
