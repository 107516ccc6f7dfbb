//! The planner's own model of an architecture, apart from the wire types: what each decoder
//! layer mixes tokens with and what that costs to cache. Families build a [`Model`] from a
//! config or from GGUF key/values; memory sizes its layers; the verdict's `architecture`
//! block is rendered from it at the edge ([`Model::architecture`]). Nothing here knows a
//! family's name.

use crate::findings::{Code, Findings};
use crate::verdict::{Architecture, Attention, MlaDims, Moe, Quantization};

/// How far back a softmax-attention layer looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Every past token: the cache grows with the context.
    Full,
    /// The last `window` tokens (sliding-window attention).
    Sliding(u64),
    /// Tokens of the current `chunk`-sized block only (Llama 4's chunked local attention).
    Chunked(u64),
}

/// A decoder layer's token mixer, with the geometry its cache follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mixer {
    /// Softmax attention caching K and V per token.
    Attention {
        kv_heads: u64,
        head_dim: u64,
        v_head_dim: u64,
        span: Span,
        /// K and V share one projection (Gemma 4's `attention_k_eq_v` layers): engines still
        /// cache both.
        shared_kv: bool,
    },
    /// Multi-head latent attention: one compressed latent (+ rope key) per token; with a
    /// sparse-attention indexer (DeepSeek-V3.2), the indexer's own key per token beside it.
    Mla {
        kv_lora_rank: u64,
        rope_dim: u64,
        indexer_head_dim: Option<u64>,
    },
    /// Compressed attention (DeepSeek-V4): one shared K=V head over the last `window` tokens,
    /// plus one `head_dim`-wide entry compressed from every `ratio` past tokens; with a sparse
    /// indexer, an `indexer_head_dim`-wide compressed key per entry beside it.
    Compressed {
        head_dim: u64,
        window: u64,
        ratio: u64,
        indexer_head_dim: Option<u64>,
    },
    /// Softmax attention over every past token with a sparse-attention indexer beside it
    /// (MiniMax-M3): K and V per token, and the indexer's `index_heads × index_head_dim` key.
    IndexedAttention {
        kv_heads: u64,
        head_dim: u64,
        index_heads: u64,
        index_head_dim: u64,
    },
    /// Linear attention (gated DeltaNet): a fixed recurrent state and a short convolution
    /// window per sequence, whatever the context.
    LinearAttention {
        /// Channels of the causal convolution (q, k and v together).
        conv_dim: u64,
        conv_kernel: u64,
        /// Value heads: the recurrent state is `[heads, key_dim, value_dim]`.
        heads: u64,
        key_dim: u64,
        value_dim: u64,
        /// Bytes per element of the recurrent state as the reference keeps it.
        state_dtype: StateDtype,
    },
    /// A Mamba2 block: a convolution window and an SSM state per sequence.
    Mamba {
        conv_dim: u64,
        conv_kernel: u64,
        heads: u64,
        head_dim: u64,
        state_size: u64,
        state_dtype: StateDtype,
    },
    /// No token mixer (an MLP-only block).
    None,
}

/// The dtype a recurrent state is kept in: the model's own, or one the config pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateDtype {
    /// As the model computes (the KV dtype decides).
    Model,
    F32,
    Bf16,
    F16,
}

impl StateDtype {
    /// From a torch dtype name in a config (`mamba_ssm_dtype: "float32"`).
    pub fn from_torch(name: &str) -> Option<StateDtype> {
        match name {
            "float32" => Some(StateDtype::F32),
            "bfloat16" => Some(StateDtype::Bf16),
            "float16" => Some(StateDtype::F16),
            _ => None,
        }
    }
}

impl Mixer {
    pub fn full(kv_heads: u64, head_dim: u64) -> Mixer {
        Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim: head_dim,
            span: Span::Full,
            shared_kv: false,
        }
    }

    pub fn with_span(self, span: Span) -> Mixer {
        match self {
            Mixer::Attention {
                kv_heads,
                head_dim,
                v_head_dim,
                shared_kv,
                ..
            } => Mixer::Attention {
                kv_heads,
                head_dim,
                v_head_dim,
                span,
                shared_kv,
            },
            other => other,
        }
    }

    /// The same recurrent layer with its state kept in `dtype` (an engine that pins it).
    pub fn with_state_dtype(self, dtype: StateDtype) -> Mixer {
        match self {
            Mixer::LinearAttention {
                conv_dim,
                conv_kernel,
                heads,
                key_dim,
                value_dim,
                ..
            } => Mixer::LinearAttention {
                conv_dim,
                conv_kernel,
                heads,
                key_dim,
                value_dim,
                state_dtype: dtype,
            },
            Mixer::Mamba {
                conv_dim,
                conv_kernel,
                heads,
                head_dim,
                state_size,
                ..
            } => Mixer::Mamba {
                conv_dim,
                conv_kernel,
                heads,
                head_dim,
                state_size,
                state_dtype: dtype,
            },
            other => other,
        }
    }

    /// The wire form: the layer's kind and the numbers that decide its cache.
    pub fn wire(self) -> Attention {
        match self {
            Mixer::Attention { span: Span::Full, .. } => Attention::Full,
            Mixer::Attention {
                span: Span::Sliding(window),
                ..
            } => Attention::Sliding { window },
            Mixer::Attention {
                span: Span::Chunked(chunk),
                ..
            } => Attention::Chunked { chunk },
            Mixer::Mla {
                kv_lora_rank,
                rope_dim,
                indexer_head_dim: None,
            } => Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim: rope_dim,
            },
            Mixer::Mla {
                kv_lora_rank,
                rope_dim,
                indexer_head_dim: Some(index_head_dim),
            } => Attention::MlaIndexer {
                kv_lora_rank,
                qk_rope_head_dim: rope_dim,
                index_head_dim,
            },
            Mixer::Compressed {
                head_dim,
                window,
                ratio,
                indexer_head_dim: Some(index_head_dim),
            } => Attention::CsaIndexer {
                head_dim,
                window,
                compress_ratio: ratio,
                index_head_dim,
            },
            Mixer::Compressed {
                head_dim,
                window,
                ratio,
                indexer_head_dim: None,
            } => Attention::Hca {
                head_dim,
                window,
                compress_ratio: ratio,
            },
            Mixer::IndexedAttention {
                kv_heads,
                head_dim,
                index_heads,
                index_head_dim,
            } => Attention::FullIndexer {
                kv_heads,
                head_dim,
                index_heads,
                index_head_dim,
            },
            Mixer::LinearAttention {
                conv_kernel,
                heads,
                key_dim,
                value_dim,
                ..
            } => Attention::LinearAttention {
                heads,
                key_head_dim: key_dim,
                value_head_dim: value_dim,
                conv_kernel,
            },
            Mixer::Mamba {
                conv_kernel,
                heads,
                head_dim,
                state_size,
                ..
            } => Attention::Mamba {
                heads,
                head_dim,
                state_size,
                conv_kernel,
            },
            Mixer::None => Attention::None,
        }
    }
}

/// A graph llama.cpp builds for an architecture whose compute buffer preflight replays
/// node by node (`engines/llama_cpp/memory.rs`); families without one get the staged estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlamaCppGraph {
    /// `src/models/openai-moe.cpp` (gpt-oss).
    OpenAiMoe,
    /// `src/models/llama.cpp` (GGUF architecture `llama`), and `mistral3.cpp` without
    /// temperature tuning, which builds the same nodes.
    Llama,
    /// `src/models/mistral3.cpp` with `attention.temperature_scale` (Ministral 3): Llama's graph
    /// with Q multiplied by a per-token scale after rope.
    Mistral3Tempered,
    /// `src/models/qwen3.cpp` and `qwen3moe.cpp`: Llama's with per-head Q and K norms.
    Qwen3,
    /// `src/models/qwen2.cpp`: Llama's with Q, K and V biases.
    Qwen2,
    /// `src/models/gemma2.cpp`: Gemma 3's without Q and K norms, its attention scores and
    /// logits soft-capped.
    Gemma2,
    /// `src/models/gemma3.cpp`.
    Gemma3,
    /// `src/models/phi3.cpp`: fused QKV and gate-and-up projections.
    Phi3,
    /// `src/models/nemotron-h.cpp` (`nemotron_h` and `nemotron_h_moe`, one graph:
    /// `models.h:1545-1549`): Mamba2, attention and feed-forward blocks, each its own layer.
    NemotronH(NemotronH),
    /// `src/models/deepseek2.cpp` with MLA (absorbed attention over the latent cache).
    Deepseek2(Deepseek2Graph),
    /// `src/models/qwen35.cpp` and `qwen35moe.cpp`: gated DeltaNet layers between gated
    /// attention layers.
    Qwen35,
    /// `src/models/glm4-moe.cpp`: attention with Q, K and V biases, a dense lead, then
    /// sigmoid-routed experts beside a shared one.
    Glm4Moe(Glm4MoeGraph),
    /// `src/models/llama4.cpp`: chunked and NoPE attention, the experts weighted before they run.
    Llama4(Llama4Graph),
    /// `src/models/qwen2moe.cpp`: attention with Q, K and V biases, softmax-routed experts
    /// beside a shared expert of its own width (`n_ff_shexp`) gated by a one-logit sigmoid.
    Qwen2Moe { shared_width: u64 },
}

/// What llama.cpp's `llama4` graph is built from beyond the common widths (llama4.cpp:3-41).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Llama4Graph {
    /// `n_moe_layer_step`: layer `il` routes to the experts when `(il + 1) % step == 0`.
    pub moe_step: u64,
    /// `n_no_rope_layer_step`: layer `il` skips rope (and scales Q instead) when
    /// `(il + 1) % step == 0`.
    pub no_rope_step: u64,
    /// `use_kq_norm`: Q and K rms-normed (no weight) after rope.
    pub kq_norm: bool,
}

/// What Nemotron-H's graph is built from beyond the common shape: the Mamba2 mixer's
/// `ssm_*` dimensions (nemotron-h.cpp:6-10) and, for the MoE blocks, the shared expert and the
/// routing options `build_moe_ffn` is called with (l.295-333).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NemotronH {
    /// `ssm_d_conv`, `ssm_d_inner`, `ssm_d_state`, `ssm_dt_rank` (the Mamba heads), `ssm_n_group`.
    pub conv_kernel: u64,
    pub inner: u64,
    pub state: u64,
    pub heads: u64,
    pub groups: u64,
    /// The shared expert's width (`expert_shared_feed_forward_length`).
    pub shared_width: u64,
    /// `moe_latent_size`: the experts run over this width between two projections (0: none).
    pub latent: u64,
    /// How the router weighs the chosen experts (no groups: not replayed with them).
    pub routing: ExpertRouting,
}

/// What llama.cpp's `deepseek2` graph is built from beyond the common widths: the MLA
/// projections, the dense lead, the shared expert and how the router picks experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deepseek2Graph {
    /// `n_lora_q`; 0 where queries are projected directly (`wq`, the lite variants).
    pub q_lora_rank: u64,
    pub kv_lora_rank: u64,
    pub qk_nope: u64,
    pub qk_rope: u64,
    pub v_head: u64,
    /// `n_layer_dense_lead`: the first layers run a dense feed-forward.
    pub dense_lead: u64,
    /// The shared experts' width, `n_ff_exp × n_expert_shared`.
    pub shared_width: u64,
    /// Blocks carry `exp_probs_b`, the selection bias added to the router's probabilities.
    pub probs_bias: bool,
    pub routing: ExpertRouting,
}

/// What llama.cpp's `glm4moe` graph is built from beyond the common shape: the dense lead,
/// the optional Q/K norms (only GLM-4.5's 355B has them) and how `build_moe_ffn` routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Glm4MoeGraph {
    /// `n_layer_dense_lead`: the first layers run a dense feed-forward.
    pub dense_lead: u64,
    /// Blocks carry `attn_q_norm` and `attn_k_norm` (optional tensors, glm4-moe.cpp:67-70).
    pub qk_norm: bool,
    pub routing: ExpertRouting,
}

/// How `build_moe_ffn` picks and weighs experts where that shapes the graph
/// (llama-graph.cpp:2077-2166), from the keys every llama.cpp MoE reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExpertRouting {
    /// `n_expert_groups` and `n_group_used` (no group routing below two groups).
    pub groups: u64,
    pub groups_used: u64,
    /// `expert_weights_norm`, and an `expert_weights_scale` other than 0 or 1: each one op on
    /// the chosen experts' weights.
    pub norm_weights: bool,
    pub scale_weights: bool,
}

/// A rotary-embedding table as the config defines it. Engines that precompute cos/sin
/// (vLLM, SGLang) keep one table per distinct rope; how many rows it has is the engine's
/// rule (`memory/buffers.rs` `rope_table_bytes`), so this holds only the config's facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// The attention head the rope belongs to.
    pub head_size: u64,
    /// Channels rotated: `head_size × partial_rotary_factor`.
    pub rotary_dim: u64,
    /// `max_position_embeddings` as the attention layer passes it.
    pub max_position: u64,
    pub scaling: RopeScaling,
    /// Kept in f32 whatever the model computes in (gpt-oss pins it).
    pub f32: bool,
}

/// A rope's `rope_type`, as far as it decides the table's size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    /// `default`, `llama3`, `ntk` and the types not listed here: one row per position.
    Plain,
    /// `linear` and `dynamic`: positions stretched by `factor`.
    Stretched { factor: f64 },
    /// `yarn`, `deepseek_yarn`: the original context stretched by `factor`.
    Yarn { factor: f64, original: u64 },
    /// `longrope` (Phi-3): a table for the original context beside the long one.
    LongRope { original: u64 },
    /// `proportional` (Gemma 4's global layers): the whole head is tabled, rotated or not.
    Proportional,
    /// Multimodal rope (`mrope_section`): room for video timestamps past the context;
    /// with YaRN stretching when the config has it.
    Multimodal { yarn: Option<(f64, u64)> },
}

/// What a multimodal model's dummy encoder pass leaves on the device while vLLM 0.19's profile
/// run goes on (`v1/worker/gpu_model_runner.py:5721-5795`, `profile_run`): the batched dummy
/// inputs of the modality with the most embeddings an item (`_get_mm_dummy_batch`, on the
/// device, floating inputs cast to the model's dtype by `multimodal/processing/context.py:225-237`)
/// and the encoder's outputs in `encoder_cache`, both held through the text forward pass and the
/// sampler warm-up. The family reads it from the wrapper's config (`engines/vllm/memory.rs`
/// `encoder_held` sizes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderProfile {
    /// Embeddings one dummy item yields (its placeholder tokens).
    pub tokens_per_item: u64,
    /// Elements of one item's processed input (pixel values).
    pub input_elements_per_item: u64,
    /// Width of one embedding the encoder hands the language model.
    pub output_width: u64,
}

/// What the planner understood of a model: dimensions, the layer stack, experts.
#[derive(Debug, Clone)]
pub struct Model {
    pub model_type: String,
    pub family: &'static str,
    pub hidden: u64,
    /// Query heads of the attention layers.
    pub heads: u64,
    pub vocab: u64,
    pub context: u64,
    pub tie_word_embeddings: bool,
    pub dtype: Option<String>,
    /// The dense MLP width, when some layer is dense.
    pub intermediate: Option<u64>,
    /// One mixer per main-stack decoder layer.
    pub layers: Vec<Mixer>,
    /// Multi-token-prediction layers, each a decoder layer of `mtp_mixer`'s kind.
    pub mtp_layers: u64,
    pub mtp_mixer: Option<Mixer>,
    /// The first index MTP layers' tensors carry: the main stack's length for DeepSeek-style
    /// `model.layers.N` MTP, 0 for checkpoints that number them apart (`mtp.layers.0`).
    pub mtp_first_index: u64,
    pub moe: Option<Moe>,
    /// MLA's widths as declared, for the verdict (memory reads the layers' [`Mixer::Mla`]).
    pub mla: Option<MlaShape>,
    pub quantization: Option<Quantization>,
    /// The distinct rotary tables the attention layers build (empty without rope).
    pub rope: Vec<Rope>,
    /// The graph llama.cpp builds for this architecture, where it is replayed.
    pub llama_cpp_graph: Option<LlamaCppGraph>,
    /// A multimodal wrapper's dummy encoder pass, as vLLM profiles it (none for a text model).
    pub encoder_profile: Option<EncoderProfile>,
    /// SGLang builds its hybrid sliding-window pool for this architecture (0.5.23
    /// `configs/model_config.py` `is_hybrid_swa_model`, l.2651-2697): its sliding and chunked
    /// layers keep their window in a pool of their own. For any other architecture SGLang
    /// keeps every layer's K and V for every token in its one pool, sliding layers too. A family
    /// fact, set in the family file (as `llama_cpp_graph`).
    pub sglang_hybrid_swa: bool,
}

/// An MLA model's widths as declared, and the config's own `head_dim` when it declares one
/// (GLM-5: 192, the nope width, which its config class overwrites), for the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MlaShape {
    pub dims: MlaDims,
    pub declared_head_dim: Option<u64>,
}

/// Sizes past which a declared dimension is not a real model. Every loop and allocation the
/// planner makes (per-layer tables, llama.cpp's graph with a node per active expert, cache
/// arithmetic) is sized by these, so a hostile header meets a finding, never an abort. Each
/// is far above any released checkpoint (widest hidden 16,384, most routed experts 512,
/// largest vocabulary 262,144, longest context 10,485,760).
pub mod limits {
    /// `hidden_size`, an MLP's or an expert's width, a head's dimension, a state's size.
    pub const MAX_WIDTH: u64 = 1 << 20;
    /// Query or KV heads, convolution channels per head group.
    pub const MAX_HEADS: u64 = 1 << 16;
    /// Routed or shared experts per layer (llama.cpp itself stops at `LLAMA_MAX_EXPERTS`).
    pub const MAX_EXPERTS: u64 = 1 << 16;
    /// Vocabulary rows.
    pub const MAX_VOCAB: u64 = 1 << 24;
    /// A model's context: the longest any plan considers (`options::MAX_CONTEXT`).
    pub const MAX_CONTEXT: u64 = crate::options::MAX_CONTEXT;
}

/// A declared size by its usual names: the config.json key, and the GGUF key under `<arch>.`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub config: &'static str,
    pub gguf: &'static str,
}

impl Key {
    const fn new(config: &'static str, gguf: &'static str) -> Key {
        Key { config, gguf }
    }
}

/// The sizes [`Model::out_of_bounds`] checks, by both names.
mod key {
    use super::Key;

    pub const HIDDEN_SIZE: Key = Key::new("hidden_size", "embedding_length");
    pub const NUM_ATTENTION_HEADS: Key = Key::new("num_attention_heads", "attention.head_count");
    pub const VOCAB_SIZE: Key = Key::new("vocab_size", "vocab_size");
    pub const MAX_POSITION_EMBEDDINGS: Key = Key::new("max_position_embeddings", "context_length");
    pub const INTERMEDIATE_SIZE: Key = Key::new("intermediate_size", "feed_forward_length");
    pub const NUM_KEY_VALUE_HEADS: Key = Key::new("num_key_value_heads", "attention.head_count_kv");
    pub const HEAD_DIM: Key = Key::new("head_dim", "attention.key_length");
    pub const SLIDING_WINDOW: Key = Key::new("sliding_window", "attention.sliding_window");
    pub const KV_LORA_RANK: Key = Key::new("kv_lora_rank", "attention.kv_lora_rank");
    pub const QK_ROPE_HEAD_DIM: Key = Key::new("qk_rope_head_dim", "rope.dimension_count");
    pub const INDEX_HEAD_DIM: Key = Key::new("index_head_dim", "attention.indexer.key_length");
    pub const COMPRESS_RATIOS: Key = Key::new("compress_ratios", "attention.compress_ratio");
    pub const LINEAR_CONV_DIM: Key = Key::new("linear_conv_dim", "ssm.inner_size");
    pub const LINEAR_CONV_KERNEL_DIM: Key = Key::new("linear_conv_kernel_dim", "ssm.conv_kernel");
    pub const LINEAR_NUM_VALUE_HEADS: Key = Key::new("linear_num_value_heads", "ssm.time_step_rank");
    pub const LINEAR_KEY_HEAD_DIM: Key = Key::new("linear_key_head_dim", "ssm.state_size");
    pub const MAMBA_CONV_DIM: Key = Key::new("mamba_conv_dim", "ssm.inner_size");
    pub const CONV_KERNEL: Key = Key::new("conv_kernel", "ssm.conv_kernel");
    pub const MAMBA_NUM_HEADS: Key = Key::new("mamba_num_heads", "ssm.time_step_rank");
    pub const MAMBA_HEAD_DIM: Key = Key::new("mamba_head_dim", "ssm.group_count");
    pub const SSM_STATE_SIZE: Key = Key::new("ssm_state_size", "ssm.state_size");
    pub const NUM_EXPERTS: Key = Key::new("num_experts", "expert_count");
    pub const N_SHARED_EXPERTS: Key = Key::new("n_shared_experts", "expert_shared_count");
    pub const MOE_INTERMEDIATE_SIZE: Key = Key::new("moe_intermediate_size", "expert_feed_forward_length");
    pub const NUM_EXPERTS_PER_TOK: Key = Key::new("num_experts_per_tok", "expert_used_count");
}

/// One declared size outside what the planner can plan: `(which, value, why)`.
pub type OutOfBounds = (Key, u64, String);

impl Model {
    /// Every declared size that sizes a loop, an allocation or a cache, checked against
    /// [`limits`] and against each other (top-k within the routed experts). Readers call it
    /// right after a family reads the config or the GGUF key/values, and refuse the model on
    /// any answer: nothing downstream sees an unchecked count.
    pub fn out_of_bounds(&self) -> Vec<OutOfBounds> {
        use key::*;
        use limits::*;
        let mut out = Vec::new();
        let mut at_most = |what: Key, value: u64, limit: u64| {
            if value > limit {
                out.push((what, value, format!("at most {limit}: larger is not a real model")));
            }
        };
        at_most(HIDDEN_SIZE, self.hidden, MAX_WIDTH);
        at_most(NUM_ATTENTION_HEADS, self.heads, MAX_HEADS);
        at_most(VOCAB_SIZE, self.vocab, MAX_VOCAB);
        at_most(MAX_POSITION_EMBEDDINGS, self.context, MAX_CONTEXT);
        at_most(INTERMEDIATE_SIZE, self.intermediate.unwrap_or(0), MAX_WIDTH);
        for mixer in self.layers.iter().chain(&self.mtp_mixer) {
            match *mixer {
                Mixer::Attention {
                    kv_heads,
                    head_dim,
                    v_head_dim,
                    span,
                    ..
                } => {
                    at_most(NUM_KEY_VALUE_HEADS, kv_heads, MAX_HEADS);
                    at_most(HEAD_DIM, head_dim.max(v_head_dim), MAX_WIDTH);
                    if let Span::Sliding(window) | Span::Chunked(window) = span {
                        at_most(SLIDING_WINDOW, window, MAX_CONTEXT);
                    }
                }
                Mixer::Mla {
                    kv_lora_rank,
                    rope_dim,
                    indexer_head_dim,
                } => {
                    at_most(KV_LORA_RANK, kv_lora_rank, MAX_WIDTH);
                    at_most(QK_ROPE_HEAD_DIM, rope_dim, MAX_WIDTH);
                    at_most(INDEX_HEAD_DIM, indexer_head_dim.unwrap_or(0), MAX_WIDTH);
                }
                Mixer::Compressed {
                    head_dim,
                    window,
                    ratio,
                    indexer_head_dim,
                } => {
                    at_most(HEAD_DIM, head_dim, MAX_WIDTH);
                    at_most(SLIDING_WINDOW, window, MAX_CONTEXT);
                    at_most(COMPRESS_RATIOS, ratio, MAX_CONTEXT);
                    at_most(INDEX_HEAD_DIM, indexer_head_dim.unwrap_or(0), MAX_WIDTH);
                }
                Mixer::IndexedAttention {
                    kv_heads,
                    head_dim,
                    index_heads,
                    index_head_dim,
                } => {
                    at_most(NUM_KEY_VALUE_HEADS, kv_heads.max(index_heads), MAX_HEADS);
                    at_most(HEAD_DIM, head_dim.max(index_head_dim), MAX_WIDTH);
                }
                Mixer::LinearAttention {
                    conv_dim,
                    conv_kernel,
                    heads,
                    key_dim,
                    value_dim,
                    ..
                } => {
                    at_most(LINEAR_CONV_DIM, conv_dim, MAX_WIDTH);
                    at_most(LINEAR_CONV_KERNEL_DIM, conv_kernel, MAX_WIDTH);
                    at_most(LINEAR_NUM_VALUE_HEADS, heads, MAX_HEADS);
                    at_most(LINEAR_KEY_HEAD_DIM, key_dim.max(value_dim), MAX_WIDTH);
                }
                Mixer::Mamba {
                    conv_dim,
                    conv_kernel,
                    heads,
                    head_dim,
                    state_size,
                    ..
                } => {
                    at_most(MAMBA_CONV_DIM, conv_dim, MAX_WIDTH);
                    at_most(CONV_KERNEL, conv_kernel, MAX_WIDTH);
                    at_most(MAMBA_NUM_HEADS, heads, MAX_HEADS);
                    at_most(MAMBA_HEAD_DIM, head_dim, MAX_WIDTH);
                    at_most(SSM_STATE_SIZE, state_size, MAX_WIDTH);
                }
                Mixer::None => {}
            }
        }
        if let Some(moe) = &self.moe {
            at_most(NUM_EXPERTS, moe.experts, MAX_EXPERTS);
            at_most(N_SHARED_EXPERTS, moe.shared, MAX_EXPERTS);
            at_most(
                MOE_INTERMEDIATE_SIZE,
                moe.expert_intermediate_size.unwrap_or(0),
                MAX_WIDTH,
            );
            if moe.active == 0 || moe.active > moe.experts {
                out.push((
                    NUM_EXPERTS_PER_TOK,
                    moe.active,
                    format!("experts used per token must be 1 to the {} routed experts", moe.experts),
                ));
            }
        }
        out
    }

    /// The model when every size is within bounds, else `None` with one
    /// `config.invalid_value` finding per size, named by `subject` (the reader's key form).
    pub fn checked(self, subject: impl Fn(Key) -> String, findings: &mut Findings) -> Option<Model> {
        let out = self.out_of_bounds();
        for (key, value, why) in &out {
            findings
                .push(Code::ConfigInvalidValue, subject(*key), why.clone())
                .observed = Some((*value).into());
        }
        out.is_empty().then_some(self)
    }

    /// The widest softmax-attention geometry: `(kv_heads, head_dim, v_head_dim)` of the layer
    /// with most KV heads, for the wire summary.
    fn attention_summary(&self) -> Option<(u64, u64, u64)> {
        self.layers
            .iter()
            .filter_map(|m| match *m {
                Mixer::Attention {
                    kv_heads,
                    head_dim,
                    v_head_dim,
                    ..
                } => Some((kv_heads, head_dim, v_head_dim)),
                _ => None,
            })
            .max_by_key(|(kv, head, _)| (*kv, *head))
    }

    /// The verdict's `architecture` block.
    pub fn architecture(&self) -> Architecture {
        let (kv_heads, head_dim, v_head_dim) = match (self.attention_summary(), &self.mla) {
            (Some(summary), _) => summary,
            // MLA: each query head reads its own key and value out of the latent, as wide as
            // declared.
            (None, Some(mla)) => (
                self.heads,
                mla.declared_head_dim
                    .unwrap_or(mla.dims.qk_nope_head_dim.saturating_add(mla.dims.qk_rope_head_dim)),
                mla.dims.v_head_dim,
            ),
            // Compressed attention (DeepSeek-V4): one shared K=V head. Attention-free: none.
            (None, None) => self
                .layers
                .iter()
                .find_map(|m| match *m {
                    Mixer::Compressed { head_dim, .. } => Some((1, head_dim, head_dim)),
                    _ => None,
                })
                .unwrap_or((0, 0, 0)),
        };
        let per_layer = |f: fn(&Mixer) -> Option<u64>| -> Option<Vec<u64>> {
            let values: Vec<u64> = self.layers.iter().map(|m| f(m).unwrap_or(0)).collect();
            let attention: Vec<u64> = values.iter().copied().filter(|v| *v > 0).collect();
            (!attention.windows(2).all(|w| w[0] == w[1])).then_some(values)
        };
        Architecture {
            model_type: self.model_type.clone(),
            family: self.family.to_owned(),
            layers: self.layers.len() as u64,
            hidden_size: self.hidden,
            heads: self.heads,
            kv_heads,
            head_dim,
            v_head_dim: (v_head_dim != head_dim).then_some(v_head_dim),
            kv_heads_per_layer: per_layer(|m| match m {
                Mixer::Attention { kv_heads, .. } => Some(*kv_heads),
                _ => None,
            }),
            head_dim_per_layer: per_layer(|m| match m {
                Mixer::Attention { head_dim, .. } => Some(*head_dim),
                _ => None,
            }),
            intermediate_size: self.intermediate,
            vocab_size: self.vocab,
            context: self.context,
            attention: self.layers.iter().map(|m| m.wire()).collect(),
            moe: self.moe.clone(),
            mla: self.mla.as_ref().map(|m| m.dims.clone()),
            quantization: self.quantization.clone(),
            mtp_layers: self.mtp_layers,
            tie_word_embeddings: self.tie_word_embeddings,
            dtype: self.dtype.clone(),
        }
    }
}
