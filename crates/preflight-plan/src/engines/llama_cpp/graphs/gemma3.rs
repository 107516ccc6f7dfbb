use super::{Builder, ExpandOrder, Heads, QScale};
use crate::engines::llama_cpp::ggml::{Graph, Type};
use crate::memory::GraphShape;

/// llama.cpp's Gemma 3 graph (`src/models/gemma3.cpp`): the embeddings scaled, Q and K normed
/// per head, Q scaled after rope, attention over the sliding-window pair of caches (Q, K, V
/// expanded in order), sandwich norms around attention and the GeGLU feed-forward; at the
/// last layer the attention output and the residual are cut to the output rows. (A
/// `final_logit_softcapping` would add three ops on the logits; Gemma 3 has none.)
///
/// `gemma2` builds Gemma 2's graph (`src/models/gemma2.cpp`), the same but for three things:
/// no Q and K norms (l.91-106), attention scores soft-capped (`attn_soft_cap`, l.7; `Heads::soft_cap`) and the
/// logits soft-capped (l.166-169).
pub(super) fn graph(s: &GraphShape, gemma2: bool) -> Graph {
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
            qk_norm: !gemma2,
            soft_cap: gemma2,
            scale_q: QScale::Constant,
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
    b.output_capped(layer_in, gemma2)
}
