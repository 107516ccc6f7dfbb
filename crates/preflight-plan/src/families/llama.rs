//! Llama and Mistral: GQA, gated MLP, every layer full attention (Mistral: sliding when
//! `sliding_window` is set).

use super::*;

pub static FAMILY: Family = Family {
    name: "llama",
    model_types: &["llama", "mistral"],
    keys: &[
        ("num_hidden_layers", Grade::Consumed),
        ("hidden_size", Grade::Consumed),
        ("intermediate_size", Grade::Consumed),
        ("num_attention_heads", Grade::Consumed),
        ("num_key_value_heads", Grade::Consumed),
        ("head_dim", Grade::Consumed),
        ("vocab_size", Grade::Consumed),
        ("max_position_embeddings", Grade::Consumed),
        ("attention_bias", Grade::Consumed),
        ("mlp_bias", Grade::Consumed),
        ("sliding_window", Grade::Consumed),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        GATED_MLP,
        &[
            group("model.layers.N.self_attn.{q,k,v,o}_proj.bias", Attention),
            group("model.layers.N.mlp.{gate,up,down}_proj.bias", Mlp),
        ],
    ],
    architectures: &["LlamaForCausalLM", "MistralForCausalLM"],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("llama", "llama"), ("mistral", "mistral")],
        keys: &[],
        tensors: &[],
        normalize: |model_type, kv| llama_cpp::read_decoder(model_type, FAMILY.name, kv, 1),
    }),
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let window = cfg.opt_u64("sliding_window");
    let span = match (model_type, window) {
        ("mistral", Some(window)) if window < dims.context => Span::Sliding(window),
        ("llama", Some(_)) => {
            cfg.unsupported(
                "sliding_window",
                "llama does not use a sliding window; this config is not a plain llama",
            );
            return None;
        }
        _ => Span::Full,
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
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
