//! Mixtral: Mistral attention with a sparse MoE block of `num_local_experts`, top-k routing.

use super::*;

pub static FAMILY: Family = Family {
    name: "mixtral",
    model_types: &["mixtral"],
    keys: &[
        ("sliding_window", Grade::Consumed),
        ("num_local_experts", Grade::Consumed),
        ("num_experts_per_tok", Grade::Consumed),
        ("router_jitter_noise", Grade::TrainingOnly),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        &[
            group("model.layers.N.block_sparse_moe.gate.weight", Router),
            group("model.layers.N.block_sparse_moe.experts.N.{w1,w2,w3}.weight", Experts),
        ],
    ],
    architectures: &["MixtralForCausalLM"],
    normalize,
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let span = match cfg.opt_u64("sliding_window") {
        Some(window) if window < dims.context => Span::Sliding(window),
        _ => Span::Full,
    };
    let experts = cfg.u64("num_local_experts")?;
    let active = cfg.u64("num_experts_per_tok")?;
    let moe = Moe {
        experts,
        active,
        shared: 0,
        dense_layers: vec![],
        // Mixtral's experts are `intermediate_size` wide; it has no dense layers.
        expert_intermediate_size: dims.intermediate,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.push(ShapeRule {
        pattern: "model.layers.N.block_sparse_moe.gate.weight",
        dim: 0,
        value: experts,
        keys: "num_local_experts",
    });
    let mut model = dims.model(
        model_type,
        FAMILY.name,
        uniform(dims.layers, dims.attention(span)),
        Some(moe),
    );
    model.intermediate = None;
    Some(Normalized { model, shapes })
}
