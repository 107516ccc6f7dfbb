//! MiniMax-M3 (`minimax_m3`, the text model transformers 5.24 names `minimax_m3_vl_text`):
//! GQA attention with per-head QK-norm and partial rotary on every layer; where
//! `sparse_attention_config.sparse_attention_freq` is 1 a sparse-attention indexer
//! (`index_q_proj`, `index_k_proj` and their norms) beside it, whose key transformers caches
//! per token next to K and V (`MiniMaxM3VLSparseCacheLayer.idx_keys`): `full_indexer`; the
//! other layers `full`. Dense MLPs (`dense_intermediate_size`) where `moe_layer_freq` is 0,
//! else `block_sparse_moe` with routed experts `w1/w2/w3`, a shared expert and the router's
//! `e_score_correction_bias` (a buffer). The published weights carry the CLIP-style vision
//! tower (`vision_tower.vision_model.*`), its projector and `patch_merge_mlp`, counted here
//! as stored; the language model is under `language_model.`.
//!
//! Memory: what an engine stores for the indexer's keys beside K and V is not established,
//! so the cache of an indexed layer is refused (memory.rs), never guessed.

use super::*;

const KEYS: &[(&str, Grade)] = &[
    ("num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("vocab_size", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("dense_intermediate_size", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("shared_intermediate_size", Grade::Consumed),
    ("first_k_dense_replace", Grade::Consumed),
    ("moe_layer_freq", Grade::Consumed),
    ("num_local_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("sparse_attention_config", Grade::Consumed),
    ("num_nextn_predict_layers", Grade::Consumed),
    ("num_mtp_modules", Grade::Consumed),
    ("partial_rotary_factor", Grade::Consumed),
    ("rotary_dim", Grade::Consumed),
    // Checked: per-head QK-norm is what the tensors hold; an output gate would add a
    // projection the planner does not model.
    ("use_qk_norm", Grade::Consumed),
    ("qk_norm_type", Grade::Consumed),
    ("attention_output_gate", Grade::Consumed),
    ("use_routing_bias", Grade::Numerics),
    ("use_gemma_norm", Grade::Numerics),
    ("swiglu_alpha", Grade::Numerics),
    ("swiglu_limit", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
];

pub static FAMILY: Family = Family {
    name: "minimax_m3",
    model_types: &["minimax_m3", "minimax_m3_vl_text"],
    architectures: &["MiniMaxM3ForCausalLM", "MiniMaxM3SparseForConditionalGeneration"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QK_NORM,
        GATED_MLP,
        &[
            group("model.layers.N.self_attn.{index_q_proj,index_k_proj}.weight", Attention),
            group("model.layers.N.self_attn.{index_q_norm,index_k_norm}.weight", Norm),
            group("model.layers.N.block_sparse_moe.gate.weight", Router),
            group("model.layers.N.block_sparse_moe.e_score_correction_bias", Buffer),
            group("model.layers.N.block_sparse_moe.experts.N.{w1,w2,w3}.weight", Experts),
            group(
                "model.layers.N.block_sparse_moe.shared_experts.{gate,up,down}_proj.weight",
                SharedExperts,
            ),
        ],
        &[
            group(
                "vision_tower.vision_model.{embeddings.patch_embedding.weight,pre_layrnorm.weight,pre_layrnorm.bias,post_layernorm.weight,post_layernorm.bias}",
                Vision,
            ),
            group(
                "vision_tower.vision_model.encoder.layers.N.{layer_norm1,layer_norm2,mlp.fc1,mlp.fc2,self_attn.q_proj,self_attn.k_proj,self_attn.v_proj,self_attn.out_proj}.{weight,bias}",
                Vision,
            ),
            group(
                "{multi_modal_projector,patch_merge_mlp}.{linear_1,linear_2}.{weight,bias}",
                Projector,
            ),
        ],
    ],
    mtp: Some(MtpLayout::Appended),
    normalize,
    ..Family::BASE
};

/// One 0/1 entry per layer, or `None` when absent.
fn flags(
    cfg: &mut ConfigReader,
    list: Option<&serde_json::Value>,
    key: &str,
    layers: u64,
) -> Option<Option<Vec<bool>>> {
    let Some(list) = list else { return Some(None) };
    let values: Option<Vec<u64>> = list
        .as_array()
        .and_then(|a| a.iter().map(serde_json::Value::as_u64).collect());
    match values {
        Some(v) if v.len() as u64 == layers && v.iter().all(|x| *x <= 1) => {
            Some(Some(v.into_iter().map(|x| x == 1).collect()))
        }
        _ => {
            cfg.unsupported(key, "one 0 or 1 per layer (num_hidden_layers) is expected");
            None
        }
    }
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let layers = dims.layers;
    if cfg.opt_bool("attention_output_gate") == Some(true) {
        cfg.unsupported("attention_output_gate", "an attention output gate is not modelled");
        return None;
    }
    if cfg.opt_bool("use_qk_norm") == Some(false) || cfg.opt_str("qk_norm_type").is_some_and(|t| t != "per_head") {
        cfg.unsupported("qk_norm_type", "only per-head QK-norm is modelled");
        return None;
    }
    let sparse = cfg.opt_object("sparse_attention_config");
    let indexed = match sparse {
        Some(s) if s.get("use_sparse_attention").and_then(serde_json::Value::as_bool) != Some(false) => {
            flags(cfg, s.get("sparse_attention_freq"), "sparse_attention_config", layers)?
        }
        _ => None,
    }
    .unwrap_or_else(|| vec![false; layers as usize]);
    let number = |key: &str| sparse.and_then(|s| s.get(key)).and_then(serde_json::Value::as_u64);
    let (index_heads, index_dim) = (number("sparse_num_index_heads"), number("sparse_index_dim"));
    let (index_heads, index_dim) = match (index_heads, index_dim) {
        (Some(h), Some(d)) if h > 0 && d > 0 => (h, d),
        _ if !indexed.contains(&true) => (0, 0),
        _ => {
            cfg.unsupported(
                "sparse_attention_config",
                "indexed layers need sparse_num_index_heads and sparse_index_dim",
            );
            return None;
        }
    };
    let moe_layers = flags(cfg, cfg.value("moe_layer_freq"), "moe_layer_freq", layers)?;
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(0);
    let moe_layers = moe_layers.unwrap_or_else(|| (0..layers).map(|i| i >= first_dense).collect());
    let experts = cfg.u64("num_local_experts");
    let active = cfg.u64("num_experts_per_tok");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(0);
    let expert_width = cfg.opt_positive("moe_intermediate_size");
    let dense_width = cfg.opt_positive("dense_intermediate_size");
    let mtp_layers = cfg.opt_layers("num_nextn_predict_layers")?;
    let moe = Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers: (0..layers).filter(|i| !moe_layers[*i as usize]).collect(),
        expert_intermediate_size: expert_width,
    };
    let mixers = indexed
        .iter()
        .map(|i| match i {
            true => Mixer::IndexedAttention {
                kv_heads: dims.kv_heads,
                head_dim: dims.head_dim,
                index_heads,
                index_head_dim: index_dim,
            },
            false => dims.attention(Span::Full),
        })
        .collect();
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.push(ShapeRule {
        pattern: "model.layers.N.block_sparse_moe.gate.weight",
        dim: 0,
        value: moe.experts,
        keys: "num_local_experts",
    });
    if index_dim > 0 {
        shapes.push(ShapeRule {
            pattern: "model.layers.N.self_attn.index_q_proj.weight",
            dim: 0,
            value: index_heads.saturating_mul(index_dim),
            keys: "sparse_num_index_heads × sparse_index_dim",
        });
    }
    let mut model = dims.model(model_type, FAMILY.name, mixers, Some(moe));
    model.intermediate = dense_width;
    model.mtp_layers = mtp_layers;
    model.mtp_mixer = Some(dims.attention(Span::Full));
    Some(Normalized { model, shapes })
}
