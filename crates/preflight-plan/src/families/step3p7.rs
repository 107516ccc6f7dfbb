//! StepFun Step-3.7-Flash (`step3p7`): the text model of transformers 5.24's `Step3p7`
//! vision-language class — GQA attention with per-head Q/K norms and a head-wise output
//! gate (`g_proj`), full and sliding layers by `layer_types`; dense MLPs on the first
//! `first_k_dense_replace` layers, then fused routed experts (`moe.{gate,up,down}_proj`
//! [E, out, in], the router's `router_bias` a buffer) beside one shared expert
//! (`share_expert`); `num_nextn_predict_layers` MTP layers after the main stack
//! (`model.layers.45–47`, each a full-attention layer with a dense MLP plus `eh_proj`,
//! `enorm`, `hnorm` and its own `transformer.shared_head`). The published checkpoint's
//! config is flat (no `vision_config`) while its weights carry the ViT (`vision_model.*`)
//! and projector (`vit_large_projector`), counted here as stored.
//!
//! Key names: the flat file's (`num_experts`, `num_experts_per_tok`), transformers'
//! `Step3p7TextConfig` (`n_routed_experts`) and vLLM's `step3p7.py` (`moe_num_experts`,
//! `moe_top_k`).

use super::*;

const KEYS: &[(&str, Grade)] = &[
    ("num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("vocab_size", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("sliding_window", Grade::Consumed),
    ("first_k_dense_replace", Grade::Consumed),
    ("num_experts", Grade::Consumed),
    ("n_routed_experts", Grade::Consumed),
    ("moe_num_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("moe_top_k", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("share_expert_dim", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_nextn_predict_layers", Grade::Consumed),
    // Whether the router has its bias: a buffer either way.
    ("use_moe_router_bias", Grade::Numerics),
    ("moe_router_scaling_factor", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
];

const VISION_AND_PROJECTOR: &[TensorGroup] = &[
    group(
        "vision_model.{conv1.weight,ln_pre.weight,ln_pre.bias,positional_embedding}",
        Vision,
    ),
    group(
        "vision_model.transformer.resblocks.N.{attn.in_proj_weight,attn.in_proj_bias,attn.out_proj.weight,attn.out_proj.bias}",
        Vision,
    ),
    group(
        "vision_model.transformer.resblocks.N.{ln_1,ln_2,mlp.c_fc,mlp.c_proj}.{weight,bias}",
        Vision,
    ),
    group("vision_model.transformer.resblocks.N.{ls_1,ls_2}.gamma", Vision),
    group("vision_model.{vit_downsampler1,vit_downsampler2}.{weight,bias}", Vision),
    group("vit_large_projector.{weight,bias}", Projector),
];

pub static FAMILY: Family = Family {
    name: "step3p7",
    model_types: &["step3p7"],
    architectures: &["Step3p7FlashForCausalLM", "Step3p7ForConditionalGeneration"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QK_NORM,
        GATED_MLP,
        &[
            group("model.layers.N.self_attn.g_proj.weight", Attention),
            group("model.layers.N.moe.gate.weight", Router),
            group("model.layers.N.moe.router_bias", Buffer),
            group("model.layers.N.moe.{gate,up,down}_proj.weight", Experts),
            group("model.layers.N.share_expert.{gate,up,down}_proj.weight", SharedExperts),
        ],
        VISION_AND_PROJECTOR,
    ],
    mtp: Some(MtpLayout::Appended),
    mtp_tensors: &[group(
        "model.layers.N.{eh_proj,enorm,hnorm,transformer.shared_head.norm,transformer.shared_head.output}.weight",
        Mtp,
    )],
    normalize,
    ..Family::BASE
};

/// The first of `keys` the config declares, required.
fn first_of(cfg: &mut ConfigReader, keys: &[&str]) -> Option<u64> {
    match keys.iter().find(|k| cfg.value(k).is_some()) {
        Some(key) => cfg.u64(key),
        None => {
            cfg.missing(keys[0]);
            None
        }
    }
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let window = cfg.opt_u64("sliding_window");
    let spans = layer_types(cfg, dims.layers, window)?.unwrap_or_else(|| vec![Span::Full; dims.layers as usize]);
    let experts = first_of(cfg, &["num_experts", "n_routed_experts", "moe_num_experts"]);
    let active = first_of(cfg, &["num_experts_per_tok", "moe_top_k"]);
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(0);
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(1);
    let expert_width = cfg.opt_positive("moe_intermediate_size");
    let mtp_layers = cfg.opt_layers("num_nextn_predict_layers")?;
    let moe = Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers: (0..dims.layers.min(first_dense)).collect(),
        expert_intermediate_size: expert_width,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.moe.gate.weight",
            dim: 0,
            value: moe.experts,
            keys: "num_experts",
        },
        ShapeRule {
            pattern: "model.layers.N.moe.{gate,up,down}_proj.weight",
            dim: 0,
            value: moe.experts,
            keys: "num_experts",
        },
    ]);
    let mut model = dims.model(model_type, FAMILY.name, super::spans(&dims, spans), Some(moe));
    model.mtp_layers = mtp_layers;
    // Each MTP layer is a full-attention layer (a copy of layer 0's kind).
    model.mtp_mixer = Some(dims.attention(Span::Full));
    Some(Normalized { model, shapes })
}
