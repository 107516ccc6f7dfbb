//! Qwen3-VL (`qwen3_vl`, dense) and Qwen3-VL-MoE (`qwen3_vl_moe`): a Qwen3 language model
//! (QK-norm, GQA, full attention on every layer) inside a vision-language wrapper, beside
//! the Qwen ViT with its merger and deepstack mergers (`model.visual.*`).
//!
//! Published layout followed where transformers 5 differs: the MoE's fused experts are stored
//! in the old orientation, `experts.gate_up_proj` [E, H, 2I] and `experts.down_proj`
//! [E, I, H] (transformers' conversion_mapping transposes them on load).

use super::*;

/// Keys of `Qwen3VLTextConfig` / `Qwen3VLMoeTextConfig` (configuration_qwen3_vl*.py).
const KEYS: &[(&str, Grade)] = &[
    ("attention_bias", Grade::Consumed),
    ("num_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("decoder_sparse_step", Grade::Consumed),
    ("mlp_only_layers", Grade::Consumed),
    ("norm_topk_prob", Grade::Numerics),
];

const WRAPPER_KEYS: &[(&str, Grade)] = &[];

const FUSED_MOE: &[TensorGroup] = &[
    group("model.layers.N.mlp.gate.weight", Router),
    group("model.layers.N.mlp.experts.{gate_up_proj,down_proj}", Experts),
];

pub static FAMILY: Family = Family {
    name: "qwen3_vl",
    model_types: &["qwen3_vl_text"],
    architectures: &["Qwen3VLForConditionalGeneration"],
    keys: KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QK_NORM, GATED_MLP],
    normalize,
    wrappers: &[Wrapper {
        model_type: "qwen3_vl",
        keys: WRAPPER_KEYS,
        encoders: &[super::qwen3_5::VISION],
    }],
    ..Family::BASE
};

pub static MOE_FAMILY: Family = Family {
    name: "qwen3_vl_moe",
    model_types: &["qwen3_vl_moe_text"],
    architectures: &["Qwen3VLMoeForConditionalGeneration"],
    keys: KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QK_NORM, GATED_MLP, FUSED_MOE],
    normalize,
    wrappers: &[Wrapper {
        model_type: "qwen3_vl_moe",
        keys: WRAPPER_KEYS,
        encoders: &[super::qwen3_5::VISION],
    }],
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let is_moe = model_type == "qwen3_vl_moe_text";
    let family = if is_moe { MOE_FAMILY.name } else { FAMILY.name };
    let mut normalized = super::qwen::read(model_type, family, is_moe, cfg)?;
    if let Some(moe) = &normalized.model.moe {
        let width = moe.expert_intermediate_size.unwrap_or(0);
        normalized.shapes.extend([
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.{gate_up_proj,down_proj}",
                dim: 0,
                value: moe.experts,
                keys: "num_experts",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.gate_up_proj",
                dim: 2,
                value: width.saturating_mul(2),
                keys: "2 × moe_intermediate_size (stored [E, H, 2I])",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.down_proj",
                dim: 1,
                value: width,
                keys: "moe_intermediate_size (stored [E, I, H])",
            },
        ]);
    }
    Some(normalized)
}
