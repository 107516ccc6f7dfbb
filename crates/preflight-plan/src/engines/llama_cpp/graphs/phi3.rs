use super::{Builder, Heads};
use crate::engines::llama_cpp::ggml::{Graph, Type};
use crate::memory::GraphShape;

/// llama.cpp's Phi-3 graph (`src/models/phi3.cpp:57-165`, the non-windowed variant: phi3.cpp
/// turns Phi-3's sliding window off, l.12-21): the fused QKV projection with Q, K and V as
/// views of it (`build_qkv`), Q scaled after rope, one unified cache (Q, V, K expanded); at the
/// last layer the attention output and the residual are cut to the output rows; the residual
/// added after attention, then the fused gate-and-up projection and SwiGLU (`LLM_FFN_SWIGLU`,
/// `LLM_FFN_SEQ`: one `ffn_up` twice as wide, halved by `ggml_swiglu`), added to the residual.
pub(super) fn graph(s: &GraphShape) -> Graph {
    let (mut b, mut layer_in) = Builder::new(s);
    let cache = b.cache_inputs(s.full_cells);
    let out_ids = b.g.input(Type::I32, [s.outputs, 1, 1, 1]);
    let layers = s.sliding.len();
    for il in 0..layers {
        let x = b.norm(layer_in);
        let [q, k, v] = b.fused_qkv(x);
        let q = b.g.like(q, &[q], true);
        let attention = b.attend([q, k, v], cache, Heads::PLAIN);
        let attention = b.linear(attention, s.hidden, s.tokens, false);
        let ([attention, residual], tokens) = b.cut_to_outputs(il + 1 == layers, [attention, layer_in], out_ids);
        let residual = b.g.like(attention, &[attention, residual], true);
        let x = b.norm(residual);
        let up = b.linear(x, s.ffn_width.saturating_mul(2), tokens, false);
        let act = b.g.op(Type::F32, [s.ffn_width, tokens, 1, 1], &[up], false);
        let out = b.linear(act, s.hidden, tokens, false);
        layer_in = b.g.like(out, &[residual, out], true);
    }
    b.output(layer_in)
}
