//! MiniMax-M2 (`minimax_m2`: MiniMax-M2, M2.1, M2.5, M2.7): GQA full attention on every
//! layer with per-layer QK-norm over all heads (`q_norm` is `heads × head_dim` wide) and
//! partial rotary (`rotary_dim`), a 256-expert top-8 MoE per layer (`block_sparse_moe`,
//! experts `w1/w2/w3`, `intermediate_size` wide) with a sigmoid router whose
//! `e_score_correction_bias` is a buffer. The published weights are FP8 blocks
//! (`weight_scale_inv`), which the quantization layer reads from `quantization_config`.
//!
//! The configs declare `use_mtp` / `num_mtp_modules` while the published shards carry no
//! MTP weights: the layers are counted as declared, so the layer check says they are absent
//! (a warning: engines serve it without speculative decoding). vLLM 0.19.0 would look for
//! them as `model.layers.{62,…}` (`minimax_m2.py` `get_spec_layer_idx_from_weight_name`).
//!
//! Grades cite transformers 5.24.0 (`configuration_minimax_m2.py`, `modeling_minimax_m2.py`)
//! and vLLM 0.19.0 (`model_executor/models/minimax_m2.py`).

use super::*;

const KEYS: &[(&str, Grade)] = &[
    // The experts' width (MiniMaxM2Experts; vLLM FusedMoE `intermediate_size`).
    ("num_local_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    // 1 = full softmax attention; MiniMax-01's 0 (lightning attention) is not this model.
    ("attn_type_list", Grade::Consumed),
    // Checked to ask for what the reference builds unconditionally: per-layer QK-norm.
    ("use_qk_norm", Grade::Consumed),
    ("qk_norm_type", Grade::Consumed),
    // Checked to be 0: neither reference has a shared expert.
    ("shared_intermediate_size", Grade::Consumed),
    // vLLM reads `getattr(config, "attention_bias", False)`; checked to be false.
    ("attention_bias", Grade::Consumed),
    ("use_mtp", Grade::Consumed),
    ("num_mtp_modules", Grade::Consumed),
    ("mtp_transformer_layers", Grade::Consumed),
    // transformers turns it into partial_rotary_factor; vLLM reads it: values, not shapes.
    ("rotary_dim", Grade::Numerics),
    ("partial_rotary_factor", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    // vLLM: whether the router has its correction bias (a buffer either way).
    ("use_routing_bias", Grade::Numerics),
    ("router_jitter_noise", Grade::TrainingOnly),
    // MiniMaxM2Config defines it and every layer is full attention; a window would change
    // the cache, so only `null` is accepted.
    ("sliding_window", Grade::Consumed),
];

pub static FAMILY: Family = Family {
    name: "minimax_m2",
    model_types: &["minimax_m2"],
    architectures: &["MiniMaxM2ForCausalLM"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QK_NORM,
        &[
            group("model.layers.N.block_sparse_moe.gate.weight", Router),
            group("model.layers.N.block_sparse_moe.e_score_correction_bias", Buffer),
            group("model.layers.N.block_sparse_moe.experts.N.{w1,w2,w3}.weight", Experts),
        ],
    ],
    mtp: Some(MtpLayout::Appended),
    normalize,
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let experts = cfg.u64("num_local_experts")?;
    let active = cfg.u64("num_experts_per_tok")?;
    if cfg.value("sliding_window").is_some() {
        cfg.unsupported(
            "sliding_window",
            "MiniMax-M2 attends over every past token; a window is not modelled",
        );
        return None;
    }
    if cfg.value("attn_type_list").is_some() {
        let list = cfg.opt_u64_list("attn_type_list")?;
        if list.len() as u64 != dims.layers {
            cfg.findings.mismatch(
                crate::findings::Code::ConfigInvalidValue,
                "config.attn_type_list",
                dims.layers,
                list.len(),
                "attn_type_list must have one entry per layer (num_hidden_layers)",
            );
            return None;
        }
        if list.iter().any(|k| *k != 1) {
            cfg.unsupported(
                "attn_type_list",
                "MiniMax-M2 layers are all full attention (1); other kinds (MiniMax-01's lightning attention) are not this model",
            );
            return None;
        }
    }
    if cfg.opt_bool("use_qk_norm") == Some(false) {
        cfg.unsupported(
            "use_qk_norm",
            "the reference (transformers and vLLM MiniMaxM2Attention) always applies QK-norm",
        );
        return None;
    }
    if let Some(kind) = cfg.opt_str("qk_norm_type")
        && kind != "per_layer"
    {
        cfg.unsupported(
            "qk_norm_type",
            "the reference normalises q and k across all heads of a layer (`per_layer`) only",
        );
        return None;
    }
    if cfg.opt_u64("shared_intermediate_size").unwrap_or(0) != 0 {
        cfg.unsupported("shared_intermediate_size", "MiniMax-M2 has no shared expert");
        return None;
    }
    if cfg.opt_bool("attention_bias") == Some(true) {
        cfg.unsupported(
            "attention_bias",
            "transformers' MiniMaxM2Attention has no projection biases",
        );
        return None;
    }
    // vLLM looks for `num_mtp_modules` layers after the stack; a module is
    // `mtp_transformer_layers` decoder layers (1 in every published config).
    let mtp_layers = match cfg.opt_bool("use_mtp").unwrap_or(false) {
        true => {
            let modules = cfg.opt_layers("num_mtp_modules")?;
            let per_module = cfg.opt_u64("mtp_transformer_layers").unwrap_or(1);
            modules.saturating_mul(per_module).min(crate::config::MAX_LAYERS)
        }
        false => 0,
    };
    let moe = Moe {
        experts,
        active,
        shared: 0,
        dense_layers: vec![],
        expert_intermediate_size: dims.intermediate,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.q_norm.weight",
            dim: 0,
            value: dims.heads.saturating_mul(dims.head_dim),
            keys: "num_attention_heads × head_dim (per-layer QK-norm)",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.k_norm.weight",
            dim: 0,
            value: dims.kv_heads.saturating_mul(dims.head_dim),
            keys: "num_key_value_heads × head_dim (per-layer QK-norm)",
        },
        ShapeRule {
            pattern: "model.layers.N.block_sparse_moe.gate.weight",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
    ]);
    if let Some(width) = dims.intermediate {
        shapes.push(ShapeRule {
            pattern: "model.layers.N.block_sparse_moe.experts.N.{w1,w3}.weight",
            dim: 0,
            value: width,
            keys: "intermediate_size",
        });
    }
    let mut model = dims.model(
        model_type,
        FAMILY.name,
        uniform(dims.layers, dims.attention(Span::Full)),
        Some(moe),
    );
    model.mtp_layers = mtp_layers;
    // vLLM 0.19 `minimax_m2.py:200-204`: `rotary_dim` stands for a partial factor the rope
    // parameters leave out.
    let factor_given = cfg.value("partial_rotary_factor").is_some()
        || ["rope_parameters", "rope_scaling"]
            .iter()
            .any(|k| cfg.value(k).is_some_and(|p| p.get("partial_rotary_factor").is_some()));
    if let (Some(rotary_dim), false) = (cfg.opt_positive("rotary_dim"), factor_given) {
        for rope in &mut model.rope {
            rope.rotary_dim = rotary_dim.min(rope.head_size);
        }
    }
    model.mtp_mixer = Some(dims.attention(Span::Full));
    // Every layer is MoE: `intermediate_size` is the experts' width, not a dense one.
    model.intermediate = None;
    Some(Normalized { model, shapes })
}
