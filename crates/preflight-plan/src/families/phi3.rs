//! Phi-3: fused `qkv_proj` and `gate_up_proj`; a `sliding_window` shorter than the context
//! applies to every layer, as transformers' Phi3 attention does.

use super::*;

pub static FAMILY: Family = Family {
    name: "phi3",
    model_types: &["phi3"],
    keys: &[
        ("sliding_window", Grade::Consumed),
        ("original_max_position_embeddings", Grade::Numerics),
        ("partial_rotary_factor", Grade::Numerics),
        ("embd_pdrop", Grade::TrainingOnly),
        ("resid_pdrop", Grade::TrainingOnly),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        &[
            group("model.layers.N.self_attn.{qkv_proj,o_proj}.weight", Attention),
            group("model.layers.N.mlp.{gate_up_proj,down_proj}.weight", Mlp),
        ],
    ],
    architectures: &["Phi3ForCausalLM"],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("phi3", "phi3")],
        keys: &[],
        tensors: &[],
        normalize: |model_type, kv| llama_cpp::read_decoder(model_type, FAMILY.name, kv, 1),
    }),
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let Some(intermediate) = dims.intermediate else {
        // Phi-3 requires it; an invalid value was already reported by `read_dims`.
        if cfg.value("intermediate_size").is_none() {
            cfg.missing("intermediate_size");
        }
        return None;
    };
    let span = match cfg.opt_u64("sliding_window") {
        Some(window) if window < dims.context => Span::Sliding(window),
        _ => Span::Full,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.qkv_proj.weight",
            dim: 0,
            value: dims
                .heads
                .saturating_add(dims.kv_heads.saturating_mul(2))
                .saturating_mul(dims.head_dim),
            keys: "(num_attention_heads + 2 × num_key_value_heads) × head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.mlp.gate_up_proj.weight",
            dim: 0,
            value: intermediate.saturating_mul(2),
            keys: "2 × intermediate_size",
        },
    ]);
    Some(Normalized {
        model: dims.model(
            model_type,
            FAMILY.name,
            uniform(dims.layers, dims.attention(span)),
            None,
        ),
        shapes,
    })
}
