use super::{Gating, Heads};
use crate::engines::llama_cpp::ggml::Graph;
use crate::memory::GraphShape;

/// llama.cpp's Qwen2-MoE graph (`src/models/qwen2moe.cpp:68-201`): one unified cache, Q, K
/// and V with biases (Q, V, K expanded); at the last layer the attention output and the
/// residual are cut to the output rows; then the experts, softmax-routed with the chosen
/// weights as they are (`norm_w` false, l.146-157), beside the shared expert's SwiGLU of
/// `shared_width` scaled by its gate's sigmoid, built as `silu(x) / x` (l.162-178).
pub(super) fn graph(s: &GraphShape, shared_width: u64) -> Graph {
    let heads = Heads {
        bias: true,
        ..Heads::PLAIN
    };
    super::llama::decoder(s, heads, false, |b, _, x, tokens| {
        let routed = b.moe(x, tokens, Gating::Softmax, false);
        let logit = b.linear(x, 1, tokens, false);
        let silu = b.g.like(logit, &[logit], true);
        let sigmoid = b.g.like(silu, &[silu, logit], true);
        let shared = b.ffn_of(x, tokens, shared_width);
        let shared = b.g.like(shared, &[shared, sigmoid], true);
        b.g.like(routed, &[routed, shared], true)
    })
}
