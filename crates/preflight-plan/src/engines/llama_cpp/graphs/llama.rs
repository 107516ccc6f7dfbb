use super::{Builder, Gating, Heads, QScale};
use crate::engines::llama_cpp::ggml::{Graph, Id, Type};
use crate::memory::GraphShape;

/// llama.cpp's Llama graph (`src/models/llama.cpp`) and those built like it, told apart by
/// `heads`: Qwen3's `qwen3.cpp` and `qwen3moe.cpp` norm Q and K, Qwen2's `qwen2.cpp` adds Q, K and
/// V biases, and Ministral 3 (`mistral3.cpp` with `temperature_tuning`) multiplies Q by a
/// per-token input after rope. One unified KV cache, Q, V, K expanded in that order; at the
/// last layer the attention output and the residual are cut to the output rows before the
/// feed-forward (a dense SwiGLU, or the MoE with normalised softmax weights).
pub(super) fn graph(s: &GraphShape, heads: Heads, temperature_tuning: bool) -> Graph {
    decoder(s, heads, temperature_tuning, |b, _, x, tokens| match s.experts {
        0 => b.ffn(x, tokens),
        _ => b.moe(x, tokens, Gating::SoftmaxNormalised, false),
    })
}

/// The decoder these graphs and GLM-4.5's and Qwen2-MoE's share: norm, attention over the one
/// unified cache, the cut to the output rows at the last layer, residual, norm, `ffn` (given the
/// layer, its input and the rows it runs on), residual; then the output.
pub(super) fn decoder(
    s: &GraphShape,
    heads: Heads,
    temperature_tuning: bool,
    mut ffn: impl FnMut(&mut Builder, usize, Id, u64) -> Id,
) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    let heads = Heads {
        scale_q: match temperature_tuning {
            true => QScale::PerToken(b.g.input(Type::F32, [1, 1, s.tokens, 1])),
            false => heads.scale_q,
        },
        ..heads
    };
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    for il in 0..layers {
        let x = b.norm(layer_in);
        let attention = b.attention(x, cache, heads);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let ffn_in = b.g.like(attention, &[attention, residual], true);
        let x = b.norm(ffn_in);
        let out = ffn(&mut b, il, x, tokens);
        layer_in = b.g.like(out, &[out, ffn_in], true);
    }
    b.output(layer_in)
}
