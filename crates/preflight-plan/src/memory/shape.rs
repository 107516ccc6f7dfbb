//! The widths activations are sized by, on one rank's share.

use crate::model::{LlamaCppGraph, Mixer, Model};
use crate::options::ComputeDtype;

/// What the forward pass and the sampler are sized by: the model's widths on one rank's
/// share, in the dtype it computes in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    pub(crate) hidden: u64,
    /// Query heads (llama.cpp's KQ scores are one row a head).
    pub(crate) heads: u64,
    pub(crate) vocab: u64,
    /// Query heads × head width (the attention output's width).
    pub(crate) q_width: u64,
    /// K and V widths together, and their geometry (of the first attention layer).
    pub(crate) kv_width: u64,
    pub(crate) kv_heads: u64,
    pub(crate) head_dim: u64,
    /// The dense MLP's width (0 when every layer routes to experts).
    pub(crate) intermediate: u64,
    pub(crate) moe: Option<MoeShape>,
    pub(crate) element_bytes: u64,
    /// A multimodal model's dummy encoder pass (vLLM's profile run holds its inputs and outputs).
    pub(crate) encoder: Option<crate::model::EncoderProfile>,
    /// The first linear-attention layer's mixer (its convolution and state geometry).
    pub(crate) linear_attention: Option<Mixer>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoeShape {
    pub(crate) experts: u64,
    pub(crate) active: u64,
    pub(crate) shared: u64,
    /// One expert's MLP width.
    pub(crate) width: u64,
    /// The experts are stored unquantized, so vLLM runs them with its Triton fused-MoE
    /// kernel (`oracle/unquantized.py` `select_unquantized_moe_backend`: TRITON on CUDA by
    /// default), whose workspace it keeps.
    pub(crate) unquantized: bool,
    /// The ranks one expert's width is sliced over: 1 under expert parallelism (whole
    /// experts); under vLLM otherwise every tensor × data parallel rank.
    pub(crate) width_degree: u64,
}

impl Shape {
    /// `expert_width_degree`: the ranks one expert's width is sliced over (1: held whole).
    pub(crate) fn of(model: &Model, dtype: ComputeDtype, expert_width_degree: u64) -> Shape {
        let (q_width, kv_width, kv_heads, head_dim) = model
            .layers
            .iter()
            .find_map(|m| match *m {
                Mixer::Attention {
                    kv_heads,
                    head_dim,
                    v_head_dim,
                    ..
                } => Some((
                    model.heads.saturating_mul(head_dim),
                    kv_heads.saturating_mul(head_dim.saturating_add(v_head_dim)),
                    kv_heads,
                    head_dim,
                )),
                _ => None,
            })
            .unwrap_or((model.hidden, model.hidden.saturating_mul(2), model.heads, 0));
        Shape {
            hidden: model.hidden,
            heads: model.heads,
            vocab: model.vocab,
            q_width,
            kv_width,
            kv_heads,
            head_dim,
            intermediate: model.intermediate.unwrap_or(0),
            moe: model.moe.as_ref().map(|m| MoeShape {
                experts: m.experts,
                active: m.active,
                shared: m.shared,
                width: m.expert_intermediate_size.unwrap_or(0),
                unquantized: model.quantization.is_none(),
                width_degree: expert_width_degree.max(1),
            }),
            element_bytes: dtype.element_bytes(),
            encoder: model.encoder_profile,
            linear_attention: model
                .layers
                .iter()
                .copied()
                .find(|m| matches!(m, Mixer::LinearAttention { .. })),
        }
    }

    /// The widest per-token MLP: the dense width, or the routed-plus-shared experts' widths.
    pub(crate) fn ffn_width(&self) -> u64 {
        let experts = self
            .moe
            .map_or(0, |m| m.width.saturating_mul(m.active.saturating_add(m.shared)));
        self.intermediate.max(experts)
    }
}

/// Compute buffers already replayed for one artifact, by graph and shape. A plan asks for
/// the same graph many times — each placement candidate, the report, the longest-context
/// search — and a replay walks every node of every layer: one replay per distinct shape
/// bounds a plan's work by the shapes it considers, not by how often it asks.
#[derive(Debug, Default)]
pub struct Replays {
    done: std::sync::Mutex<std::collections::HashMap<(LlamaCppGraph, GraphShape), u64>>,
}

impl Replays {
    /// The reservation for `graph` at `shape`, replayed by `replay` once.
    pub(crate) fn reserve(
        &self,
        graph: LlamaCppGraph,
        shape: GraphShape,
        replay: impl FnOnce(LlamaCppGraph, &GraphShape) -> u64,
    ) -> u64 {
        let key = (graph, shape);
        if let Some(bytes) = self.done.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return *bytes;
        }
        let bytes = replay(graph, &key.1);
        self.done.lock().unwrap_or_else(|e| e.into_inner()).insert(key, bytes);
        bytes
    }
}

/// What llama.cpp's graph for one micro-batch is built from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GraphShape {
    /// The micro-batch, rounded up to a multiple of the sequences (`graph_reserve`,
    /// llama-context.cpp:2528-2530), and the outputs of it: `min(n_ctx, n_ubatch)`.
    pub tokens: u64,
    pub outputs: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    /// The dense feed-forward width (0 where every layer routes to experts).
    pub ffn_width: u64,
    pub experts: u64,
    pub experts_used: u64,
    pub expert_width: u64,
    /// Whether each layer attends through the sliding-window cache.
    pub sliding: Vec<bool>,
    /// Cells a stream of the full and of the sliding-window cache holds, and the streams.
    pub full_cells: u64,
    pub sliding_cells: u64,
    pub streams: u64,
    pub flash_attn: bool,
    /// What each layer caches, in layer order (`None`: nothing, a feed-forward-only block).
    pub layer_caches: Vec<Option<crate::verdict::CacheKind>>,
    /// `n_seq_max`: the worst-case micro-batch's sequences (`sched_reserve`,
    /// llama-context.cpp:628, 674), each a row of the recurrent state.
    pub sequences: u64,
    /// The gated DeltaNet's convolution (kernel, channels of q, k and v together), its key
    /// heads and width, and its value heads and width.
    pub conv_kernel: u64,
    pub conv_channels: u64,
    pub key_heads: u64,
    pub key_dim: u64,
    pub value_heads: u64,
    pub value_dim: u64,
    /// The shared experts' width beside the routed ones (0 without).
    pub shared_expert_width: u64,
}
