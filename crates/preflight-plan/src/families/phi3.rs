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
        // The LongRoPE tables (Phi-3-128k, Phi-3.5): one of n_rot/2 factors each, written by
        // the converter from `rope_scaling.{long,short}_factor` (conversion/phi.py:184-211) and
        // read as such (models/phi3.cpp:54-55); config values, not parameters.
        tensors: &[group("rope_factors_{long,short}.weight", Buffer)],
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

/// llama.cpp's `phi3` (vendored in llama-cpp-python 0.3.36; paths under its `src/`): every
/// block full attention. The converter writes the config's `sliding_window` (2047 for
/// Phi-3-mini, conversion/phi.py:169-173), and llama.cpp's loader reads it only to turn it off
/// (`swa_type = LLAMA_SWA_TYPE_NONE`, `n_swa = 0`: "Phi SWA is currently disabled",
/// models/phi3.cpp:13-24), so it never bounds the cache; read as a window (as
/// `llama_cpp::read_decoder` reads one) it planned every layer's cache at 2,047 tokens where
/// llama.cpp allocates the whole context. The fused `ffn_up` holds gate and up:
/// [n_embd, 2 × n_ff] (models/phi3.cpp:52); the graph asserts one head width for K and V
/// (models/phi3.cpp:71).
fn normalize_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (dims, kv_per_layer, v_head_dim) = llama_cpp::read_dims(kv)?;
    if v_head_dim != dims.head_dim {
        kv.unsupported(
            "attention.value_length",
            "llama.cpp's phi3 graph asserts value_length == key_length",
        );
        return None;
    }
    let Some(intermediate) = dims.intermediate else {
        kv.required("feed_forward_length");
        return None;
    };
    let layers = (0..dims.layers)
        .map(|i| Mixer::full(llama_cpp::kv_heads(&dims, kv_per_layer.as_ref(), i), dims.head_dim))
        .collect();
    let mut normalized = llama_cpp::finish(model_type, FAMILY.name, kv, &dims, layers);
    normalized.model.llama_cpp_graph = Some(LlamaCppGraph::Phi3);
    normalized.shapes.push(ShapeRule {
        pattern: "blk.N.ffn_up.weight",
        dim: 1,
        value: intermediate.saturating_mul(2),
        keys: "2 × feed_forward_length (gate and up fused)",
    });
    Some(normalized)
}

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
