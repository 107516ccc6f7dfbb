//! What llama.cpp writes into every GGUF whatever the family: its key names under
//! `<arch>.` (`LLM_KV_*` in llama-arch.cpp), its uniform tensor names (`LLM_TENSOR_*`), and
//! the standard reading of a decoder from them. Families add their own keys and tensors in
//! their [`super::Gguf`] and call [`read_decoder`].

use super::*;
use crate::model::ExpertRouting;

/// llama.cpp's tensor names (numeric segments as `N`) and their components.
pub const TENSORS: &[TensorGroup] = &[
    group("token_embd.weight", Embedding),
    group("output.weight", LmHead),
    group("output_norm.{weight,bias}", Norm),
    group("rope_freqs.weight", Buffer),
    group(
        "blk.N.{attn_norm,attn_q_norm,attn_k_norm,ffn_norm,post_attention_norm,post_ffw_norm,attn_post_norm,ffn_post_norm}.{weight,bias}",
        Norm,
    ),
    group(
        "blk.N.{attn_q,attn_k,attn_v,attn_output,attn_qkv}.{weight,bias}",
        Attention,
    ),
    group("blk.N.{ffn_gate,ffn_up,ffn_down}.{weight,bias}", Mlp),
    group("blk.N.ffn_gate_inp.{weight,bias}", Router),
    group(
        "blk.N.{ffn_gate_exps,ffn_up_exps,ffn_down_exps,ffn_gate_up_exps}.{weight,bias}",
        Experts,
    ),
    group(
        "blk.N.{ffn_gate_shexp,ffn_up_shexp,ffn_down_shexp,ffn_gate_inp_shexp}.{weight,bias}",
        SharedExperts,
    ),
    group("blk.N.exp_probs_b.bias", Buffer),
    // An MTP (`nextn`) block's own tensors (`LLM_TENSOR_NEXTN_*`, llama-arch.cpp), beside the
    // decoder-block tensors it shares names with.
    group(
        "blk.N.nextn.{eh_proj,enorm,hnorm,shared_head_norm,embed_tokens,shared_head_head}.weight",
        Mtp,
    ),
];

/// llama.cpp names of tensors every tensor-parallel rank holds whole, beyond norms, routers
/// and buffers: the MLA latent down-projections (vLLM's `ReplicatedLinear`).
pub const TP_REPLICATED: &[&str] = &["blk.N.{attn_q_a,attn_kv_a_mqa}.weight"];

/// llama.cpp's `general.file_type` values (`enum llama_ftype` in llama.h, as vendored by
/// llama-cpp-python 0.3.x) and the names its tools print (`Q4_K_M`, not "15").
const FILE_TYPES: &[(u64, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (4, "Q4_1_SOME_F16"),
    (7, "Q8_0"),
    (8, "Q5_0"),
    (9, "Q5_1"),
    (10, "Q2_K"),
    (11, "Q3_K_S"),
    (12, "Q3_K_M"),
    (13, "Q3_K_L"),
    (14, "Q4_K_S"),
    (15, "Q4_K_M"),
    (16, "Q5_K_S"),
    (17, "Q5_K_M"),
    (18, "Q6_K"),
    (19, "IQ2_XXS"),
    (20, "IQ2_XS"),
    (21, "Q2_K_S"),
    (22, "IQ3_XS"),
    (23, "IQ3_XXS"),
    (24, "IQ1_S"),
    (25, "IQ4_NL"),
    (26, "IQ3_S"),
    (27, "IQ3_M"),
    (28, "IQ2_S"),
    (29, "IQ2_M"),
    (30, "IQ4_XS"),
    (31, "IQ1_M"),
    (32, "BF16"),
    (36, "TQ1_0"),
    (37, "TQ2_0"),
    (38, "MXFP4_MOE"),
];

/// The name llama.cpp gives a `general.file_type`, when it has one.
pub fn file_type_name(file_type: u64) -> Option<&'static str> {
    FILE_TYPES.iter().find(|(n, _)| *n == file_type).map(|(_, name)| *name)
}

/// A decoder's dimensions from the standard keys; `head_dim` defaults to hidden/heads as
/// llama.cpp's loader does (`n_embd_head_k`).
pub fn read_dims(kv: &mut GgufReader) -> Option<(Dims, Option<Vec<u64>>, u64)> {
    let (dims, per_layer, v_head_dim) = read_dims_per_layer(kv)?;
    Some((dims, per_layer.kv_heads, v_head_dim))
}

/// The per-block arrays `llama_model_base::load_hparams` reads with `get_key_or_arr`
/// (llama-model.cpp:1387-1396), as declared: `None` where the key is absent, or is an array of
/// another length (a finding then says so).
pub struct PerLayer {
    /// `attention.head_count_kv` (`n_head_kv_arr`).
    pub kv_heads: Option<Vec<u64>>,
    /// `feed_forward_length` (`n_ff_arr`).
    pub ffn: Option<Vec<u64>>,
}

/// [`read_dims`], with the per-block arrays a hybrid decides its layers by.
pub fn read_dims_per_layer(kv: &mut GgufReader) -> Option<(Dims, PerLayer, u64)> {
    let layers = kv.layers("block_count");
    let hidden = kv.required("embedding_length");
    let heads = kv.required("attention.head_count");
    let context = kv.required("context_length");
    let (layers, hidden, heads, context) = (layers?, hidden?, heads?, context?);
    let vocab = kv.vocab()?;
    let kv_per_layer = kv.per_layer("attention.head_count_kv", layers);
    let kv_heads = kv_per_layer
        .as_ref()
        .and_then(|v| v.iter().copied().max())
        .unwrap_or(heads);
    let head_dim = kv.opt("attention.key_length").unwrap_or(hidden / heads);
    let v_head_dim = kv.opt("attention.value_length").unwrap_or(head_dim);
    let ffn = kv.per_layer("feed_forward_length", layers);
    let dims = Dims {
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        vocab,
        context,
        tie: false,
        dtype: None,
        intermediate: ffn.as_ref().and_then(|v| v.iter().copied().max()).filter(|n| *n > 0),
        // llama.cpp ropes in the graph and keeps no table.
        rope: Vec::new(),
    };
    let per_layer = PerLayer {
        kv_heads: kv_per_layer,
        ffn,
    };
    Some((dims, per_layer, v_head_dim))
}

/// The expert routing llama.cpp's graph builds: `None` for groups its loader refuses — they
/// must split the experts evenly, keep some but not all, and each hold the best two it takes
/// (llama-model.cpp:1365-1370, llama-graph.cpp:2103).
pub fn read_routing(kv: &GgufReader) -> Option<ExpertRouting> {
    let groups = kv.opt("expert_group_count").unwrap_or(0);
    let experts = kv.opt("expert_count").unwrap_or(0);
    let groups_used = match groups > 1 {
        true => kv.opt("expert_group_used_count")?,
        false => 0,
    };
    if groups > 1 && (!experts.is_multiple_of(groups) || experts / groups < 2 || !(1..groups).contains(&groups_used)) {
        return None;
    }
    let scale = kv.opt_float("expert_weights_scale").unwrap_or(0.0);
    Some(ExpertRouting {
        groups,
        groups_used,
        norm_weights: kv.opt_flag("expert_weights_norm").unwrap_or(false),
        scale_weights: scale != 0.0 && scale != 1.0,
    })
}

/// MoE settings from the standard keys.
pub fn read_moe(kv: &GgufReader, layers: u64) -> Option<Moe> {
    let experts = kv.opt("expert_count").filter(|n| *n > 0)?;
    let dense = kv.opt("leading_dense_block_count").unwrap_or(0);
    Some(Moe {
        experts,
        active: kv.opt("expert_used_count").unwrap_or(0),
        shared: kv.opt("expert_shared_count").unwrap_or(0),
        dense_layers: (0..dense.min(layers)).collect(),
        expert_intermediate_size: kv.opt("expert_feed_forward_length"),
    })
}

/// A softmax-attention decoder: per-layer KV heads, sliding layers where
/// `attention.sliding_window` is set (llama.cpp: layer `il` slides when
/// `il % pattern < pattern - 1`; pattern 1 slides every layer), experts when declared.
pub fn read_decoder(
    model_type: &str,
    family: &'static str,
    kv: &mut GgufReader,
    default_pattern: u64,
) -> Option<Normalized> {
    let (dims, kv_per_layer, v_head_dim) = read_dims(kv)?;
    let window = kv.opt("attention.sliding_window").filter(|w| *w > 0);
    let pattern = kv.opt("attention.sliding_window_pattern").unwrap_or(default_pattern);
    let layers = (0..dims.layers)
        .map(|i| {
            let span = match window {
                Some(window) if pattern <= 1 || i % pattern < pattern - 1 => Span::Sliding(window),
                _ => Span::Full,
            };
            attention(&dims, kv_per_layer.as_ref(), v_head_dim, i, span)
        })
        .collect();
    Some(finish(model_type, family, kv, &dims, layers))
}

/// Layer `layer`'s KV heads: its own where `attention.head_count_kv` is an array.
pub fn kv_heads(dims: &Dims, per_layer: Option<&Vec<u64>>, layer: u64) -> u64 {
    per_layer
        .and_then(|v| v.get(usize::try_from(layer).ok()?).copied())
        .unwrap_or(dims.kv_heads)
}

/// Layer `layer`'s attention as the GGUF declares it.
pub fn attention(dims: &Dims, per_layer: Option<&Vec<u64>>, v_head_dim: u64, layer: u64, span: Span) -> Mixer {
    Mixer::Attention {
        kv_heads: kv_heads(dims, per_layer, layer),
        head_dim: dims.head_dim,
        v_head_dim,
        span,
        shared_kv: false,
    }
}

/// The model around a layer stack: experts, MTP layers, the dense width.
pub fn finish(
    model_type: &str,
    family: &'static str,
    kv: &mut GgufReader,
    dims: &Dims,
    layers: Vec<Mixer>,
) -> Normalized {
    let moe = read_moe(kv, dims.layers);
    let mut model = dims.model(model_type, family, layers, moe);
    // `feed_forward_length` is the dense width; a MoE without dense layers has none.
    if model.moe.as_ref().is_some_and(|m| m.dense_layers.is_empty()) {
        model.intermediate = None;
    }
    model.mtp_layers = kv
        .opt("nextn_predict_layers")
        .unwrap_or(0)
        .min(crate::config::MAX_LAYERS);
    Normalized {
        model,
        shapes: Vec::new(),
    }
}
