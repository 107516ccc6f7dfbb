use super::{Heads, Routing};
use crate::engines::llama_cpp::ggml::Graph;
use crate::memory::GraphShape;
use crate::model::Glm4MoeGraph;

/// llama.cpp's GLM-4.5 graph (`src/models/glm4-moe.cpp:291-444`): one unified cache, Q, K and
/// V with biases (`build_qkv`), normed per head where the blocks hold the norms, partly roped
/// (rope's output is its input's shape whatever `n_rot`); at the last layer the attention
/// output and the residual are cut to the output rows; the first `dense_lead` layers dense,
/// the rest the sigmoid-routed experts (`exp_probs_b` is a required tensor, l.82) plus the
/// shared one. The NextN block is `graph_mtp`'s, never this graph's (l.317).
pub(super) fn graph(s: &GraphShape, p: &Glm4MoeGraph) -> Graph {
    let heads = Heads {
        bias: true,
        qk_norm: p.qk_norm,
        ..Heads::PLAIN
    };
    let routing = Routing {
        declared: p.routing,
        probs_bias: true,
    };
    super::llama::decoder(s, heads, false, |b, il, x, tokens| {
        b.dense_lead_or_routed(il, x, tokens, p.dense_lead, routing, s.shared_expert_width)
    })
}
