//! Xiaomi MiMo-V2-Flash (`mimo_v2_flash`): GQA attention with Q/K heads wider than V
//! (`head_dim` 192, `v_head_dim` 128), full attention on the layers `hybrid_layer_pattern`
//! marks 0 and sliding-window attention (its own head counts, `swa_*`, and learned sinks) on
//! those it marks 1; a dense MLP where `moe_layer_freq` is 0 and a 256-expert MoE (sigmoid
//! router, `e_score_correction_bias` a buffer) elsewhere.
//!
//! Read as vLLM 0.19's `mimo_v2.py` reads it (`hybrid_layer_pattern`, `moe_layer_freq`,
//! `swa_num_key_value_heads`, `sliding_window_size`); transformers 5.24's
//! `MiMoV2FlashConfig` derives the same layers when those keys are absent (full on layer 0
//! and every sixth, SWA KV heads twice the full layers').

use super::*;

const KEYS: &[(&str, Grade)] = &[
    ("num_hidden_layers", Grade::Consumed),
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("v_head_dim", Grade::Consumed),
    ("swa_num_attention_heads", Grade::Consumed),
    ("swa_num_key_value_heads", Grade::Consumed),
    ("swa_head_dim", Grade::Consumed),
    ("swa_v_head_dim", Grade::Consumed),
    ("vocab_size", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
    ("hybrid_layer_pattern", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("moe_layer_freq", Grade::Consumed),
    ("mlp_layer_types", Grade::Consumed),
    ("sliding_window", Grade::Consumed),
    ("sliding_window_size", Grade::Consumed),
    ("n_routed_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("partial_rotary_factor", Grade::Consumed),
    // Checked to be false.
    ("attention_bias", Grade::Consumed),
    // Whether a layer kind has sinks: counted as stored.
    ("add_swa_attention_sink_bias", Grade::Numerics),
    ("add_full_attention_sink_bias", Grade::Numerics),
    ("attention_value_scale", Grade::Numerics),
    ("swa_rope_theta", Grade::Numerics),
    ("layernorm_epsilon", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    ("topk_method", Grade::Numerics),
    ("n_group", Grade::Numerics),
    ("topk_group", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
    // Neither MiMoV2FlashConfig defines it nor modeling_mimo_v2_flash.py / vLLM's
    // mimo_v2.py reads it.
    ("attention_chunk_size", Grade::Ignored),
];

pub static FAMILY: Family = Family {
    name: "mimo_v2_flash",
    model_types: &["mimo_v2_flash"],
    architectures: &["MiMoV2FlashForCausalLM"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        GATED_MLP,
        &[
            group("model.layers.N.self_attn.attention_sink_bias", Attention),
            group("model.layers.N.mlp.gate.weight", Router),
            group("model.layers.N.mlp.gate.e_score_correction_bias", Buffer),
            group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
        ],
    ],
    normalize,
    ..Family::BASE
};

/// One 0/1 entry per layer from `key`, or `None` when the config does not carry it.
fn flags(cfg: &mut ConfigReader, key: &str, layers: u64) -> Option<Option<Vec<bool>>> {
    if cfg.value(key).is_none() {
        return Some(None);
    }
    let list = cfg.opt_u64_list(key)?;
    if list.len() as u64 != layers || list.iter().any(|v| *v > 1) {
        cfg.unsupported(key, "one 0 or 1 per layer (num_hidden_layers) is expected");
        return None;
    }
    Some(Some(list.into_iter().map(|v| v == 1).collect()))
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    if cfg.opt_bool("attention_bias") == Some(true) {
        cfg.unsupported("attention_bias", "MiMo-V2-Flash's projections have no biases");
        return None;
    }
    if cfg.value("layer_types").is_some() || cfg.value("mlp_layer_types").is_some() {
        cfg.unsupported(
            "layer_types",
            "MiMo-V2-Flash layers are read from hybrid_layer_pattern and moe_layer_freq, as vLLM reads them",
        );
        return None;
    }
    let layers = dims.layers;
    // 1 = sliding. transformers' default: full on layer 0 and every sixth.
    let sliding = flags(cfg, "hybrid_layer_pattern", layers)?
        .unwrap_or_else(|| (0..layers).map(|i| i != 0 && (i + 1) % 6 != 0).collect());
    let moe_layers = flags(cfg, "moe_layer_freq", layers)?.unwrap_or_else(|| (0..layers).map(|i| i != 0).collect());
    let v_head = cfg.opt_u64("v_head_dim").unwrap_or(dims.head_dim);
    let swa_kv = cfg
        .opt_u64("swa_num_key_value_heads")
        .unwrap_or(dims.kv_heads.saturating_mul(2));
    let swa_head = cfg.opt_u64("swa_head_dim").unwrap_or(dims.head_dim);
    let swa_v_head = cfg.opt_u64("swa_v_head_dim").unwrap_or(v_head);
    if cfg.opt_u64("swa_num_attention_heads").is_some_and(|h| h != dims.heads) {
        cfg.unsupported(
            "swa_num_attention_heads",
            "sliding layers with their own query head count are not modelled",
        );
        return None;
    }
    // vLLM attends over `sliding_window_size` tokens (transformers: that plus the query).
    let window = match cfg.opt_u64("sliding_window_size") {
        Some(w) => w,
        None => cfg.u64("sliding_window")?,
    };
    if window == 0 && sliding.iter().any(|s| *s) {
        cfg.unsupported("sliding_window_size", "sliding layers need a positive window");
        return None;
    }
    let experts = cfg.u64("n_routed_experts");
    let active = cfg.u64("num_experts_per_tok");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(0);
    let expert_width = cfg.opt_positive("moe_intermediate_size");
    let moe = Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers: (0..layers).filter(|i| !moe_layers[*i as usize]).collect(),
        expert_intermediate_size: expert_width,
    };
    let mixers = sliding
        .iter()
        .map(|is_swa| match is_swa {
            true => Mixer::Attention {
                kv_heads: swa_kv,
                head_dim: swa_head,
                v_head_dim: swa_v_head,
                span: Span::Sliding(window),
                shared_kv: false,
            },
            false => Mixer::Attention {
                kv_heads: dims.kv_heads,
                head_dim: dims.head_dim,
                v_head_dim: v_head,
                span: Span::Full,
                shared_kv: false,
            },
        })
        .collect();
    let mut shapes = dims.base_shapes();
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.q_proj.weight",
            dim: 0,
            value: dims.heads.saturating_mul(dims.head_dim),
            keys: "num_attention_heads × head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.o_proj.weight",
            dim: 1,
            value: dims.heads.saturating_mul(v_head),
            keys: "num_attention_heads × v_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.mlp.gate.weight",
            dim: 0,
            value: moe.experts,
            keys: "n_routed_experts",
        },
    ]);
    let mut model = dims.model(model_type, FAMILY.name, mixers, Some(moe));
    // SGLang's `MIMO_V2_MODEL_ARCHS` (`MiMoV2FlashForCausalLM`): a pool for the sliding layers apart.
    model.sglang_hybrid_swa = true;
    Some(Normalized { model, shapes })
}
