//! DeepSeek-V3 (and checkpoints that reuse its `model_type`, e.g. Kimi-K2): multi-head latent
//! attention, MoE with shared experts after `first_k_dense_replace` dense layers, and
//! `num_nextn_predict_layers` multi-token-prediction layers stored after the main stack.

use super::*;

pub static FAMILY: Family = Family {
    name: "deepseek",
    model_types: &["deepseek_v3"],
    keys: &[
        ("num_hidden_layers", Grade::Consumed),
        ("hidden_size", Grade::Consumed),
        ("intermediate_size", Grade::Consumed),
        ("moe_intermediate_size", Grade::Consumed),
        ("num_attention_heads", Grade::Consumed),
        ("num_key_value_heads", Grade::Consumed),
        ("vocab_size", Grade::Consumed),
        ("max_position_embeddings", Grade::Consumed),
        ("attention_bias", Grade::Consumed),
        ("q_lora_rank", Grade::Consumed),
        ("kv_lora_rank", Grade::Consumed),
        ("qk_rope_head_dim", Grade::Consumed),
        ("qk_nope_head_dim", Grade::Consumed),
        ("v_head_dim", Grade::Consumed),
        ("head_dim", Grade::Consumed),
        ("n_routed_experts", Grade::Consumed),
        ("n_shared_experts", Grade::Consumed),
        ("num_experts_per_tok", Grade::Consumed),
        ("first_k_dense_replace", Grade::Consumed),
        ("moe_layer_freq", Grade::Consumed),
        ("num_nextn_predict_layers", Grade::Consumed),
        ("n_group", Grade::Numerics),
        ("topk_group", Grade::Numerics),
        ("topk_method", Grade::Numerics),
        ("scoring_func", Grade::Numerics),
        ("norm_topk_prob", Grade::Numerics),
        ("routed_scaling_factor", Grade::Numerics),
        ("rope_interleave", Grade::Numerics),
        ("ep_size", Grade::Metadata),
        ("aux_loss_alpha", Grade::TrainingOnly),
        ("seq_aux", Grade::TrainingOnly),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        &[
            group(
                "model.layers.N.self_attn.{q_a_proj,q_b_proj,q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj}.weight",
                Attention,
            ),
            group("model.layers.N.self_attn.{q_a_layernorm,kv_a_layernorm}.weight", Norm),
        ],
        GATED_MLP,
        &[
            group("model.layers.N.mlp.gate.weight", Router),
            group("model.layers.N.mlp.gate.e_score_correction_bias", Buffer),
            group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
            group(
                "model.layers.N.mlp.shared_experts.{gate,up,down}_proj.weight",
                SharedExperts,
            ),
        ],
    ],
    mtp_tensors: &[group(
        "model.layers.N.{embed_tokens,enorm,hnorm,eh_proj,shared_head.norm,shared_head.head}.weight",
        Mtp,
    )],
    // vLLM's DeepseekV2MLAAttention builds the latent down-projections as ReplicatedLinear.
    tp_replicated: &["model.layers.N.self_attn.{q_a_proj,kv_a_proj_with_mqa}.weight"],
    normalize,
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let layers = cfg.layers("num_hidden_layers");
    let hidden = cfg.u64("hidden_size");
    let heads = cfg.u64("num_attention_heads");
    let kv_heads = cfg.opt_u64("num_key_value_heads").or(heads);
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let kv_lora_rank = cfg.u64("kv_lora_rank");
    let q_lora_rank = cfg.opt_u64("q_lora_rank");
    let qk_rope = cfg.u64("qk_rope_head_dim");
    let qk_nope = cfg.u64("qk_nope_head_dim");
    let v_head = cfg.u64("v_head_dim");
    let experts = cfg.u64("n_routed_experts");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(0);
    let active = cfg.u64("num_experts_per_tok");
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(0);
    let intermediate = cfg.opt_positive("intermediate_size");
    let expert_intermediate = cfg.opt_positive("moe_intermediate_size");
    let freq = cfg.opt_u64("moe_layer_freq").unwrap_or(1).max(1);
    let mtp_layers = cfg.opt_layers("num_nextn_predict_layers");
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(false);
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    let (layers, hidden, heads, vocab, context, mtp_layers) = (layers?, hidden?, heads?, vocab?, context?, mtp_layers?);
    let (kv_lora_rank, qk_rope, qk_nope, v_head, experts, active) =
        (kv_lora_rank?, qk_rope?, qk_nope?, v_head?, experts?, active?);

    let dims = Dims {
        layers,
        hidden,
        heads,
        kv_heads: kv_heads?,
        head_dim: qk_nope.saturating_add(qk_rope),
        vocab,
        context,
        tie,
        dtype,
        intermediate,
    };
    let dense_layers: Vec<u64> = (0..layers).filter(|i| *i < first_dense || i % freq != 0).collect();
    let has_dense = !dense_layers.is_empty();
    let moe = Moe {
        experts,
        active,
        shared,
        dense_layers,
        expert_intermediate_size: expert_intermediate,
    };
    let mut architecture = dims.architecture(
        model_type,
        FAMILY.name,
        uniform(
            layers,
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim: qk_rope,
            },
        ),
        Some(moe),
    );
    architecture.mtp_layers = mtp_layers;
    if !has_dense {
        architecture.intermediate_size = None;
    }

    let mut shapes = dims.base_shapes();
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.kv_a_proj_with_mqa.weight",
            dim: 0,
            value: kv_lora_rank.saturating_add(qk_rope),
            keys: "kv_lora_rank + qk_rope_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.kv_b_proj.weight",
            dim: 0,
            value: heads.saturating_mul(qk_nope.saturating_add(v_head)),
            keys: "num_attention_heads × (qk_nope_head_dim + v_head_dim)",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.o_proj.weight",
            dim: 1,
            value: heads.saturating_mul(v_head),
            keys: "num_attention_heads × v_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.mlp.gate.weight",
            dim: 0,
            value: experts,
            keys: "n_routed_experts",
        },
    ]);
    let q_rows = heads.saturating_mul(qk_nope.saturating_add(qk_rope));
    match q_lora_rank {
        Some(rank) => shapes.extend([
            ShapeRule {
                pattern: "model.layers.N.self_attn.q_a_proj.weight",
                dim: 0,
                value: rank,
                keys: "q_lora_rank",
            },
            ShapeRule {
                pattern: "model.layers.N.self_attn.q_b_proj.weight",
                dim: 0,
                value: q_rows,
                keys: "num_attention_heads × (qk_nope_head_dim + qk_rope_head_dim)",
            },
        ]),
        None => shapes.push(ShapeRule {
            pattern: "model.layers.N.self_attn.q_proj.weight",
            dim: 0,
            value: q_rows,
            keys: "num_attention_heads × (qk_nope_head_dim + qk_rope_head_dim)",
        }),
    }
    Some(Normalized { architecture, shapes })
}
