//! Llama and Mistral: GQA, gated MLP, every layer full attention (Mistral: sliding when
//! `sliding_window` is set). Mistral 3 (`mistral3`, `Mistral3ForConditionalGeneration`,
//! Mistral Small 3.x) wraps a `mistral` language model with a Pixtral vision tower and a
//! patch-merging projector (transformers 5.24 `models/mistral3/configuration_mistral3.py`
//! `Mistral3Config`, `modeling_mistral3.py` `Mistral3MultiModalProjector` l.108-125); it lives
//! here because its language model is this family's `mistral`.

use super::*;

pub static FAMILY: Family = Family {
    name: "llama",
    model_types: &["llama", "mistral"],
    keys: &[
        ("attention_bias", Grade::Consumed),
        ("mlp_bias", Grade::Consumed),
        ("sliding_window", Grade::Consumed),
    ],
    tensors: &[EMBED_NORM_HEAD, QKVO, GATED_MLP, QKVO_MLP_BIAS],
    architectures: &[
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Mistral3ForConditionalGeneration",
    ],
    normalize,
    wrappers: &[Wrapper {
        model_type: "mistral3",
        // `Mistral3Config`'s own fields.
        keys: &[
            // Shape the projector, which is counted from its stored tensors.
            ("vision_feature_layer", Grade::Consumed),
            ("spatial_merge_size", Grade::Consumed),
            ("multimodal_projector_bias", Grade::Consumed),
            ("projector_hidden_act", Grade::Numerics),
        ],
        encoders: &[Encoder {
            config_key: "vision_config",
            keys: PIXTRAL_VISION_KEYS,
            tensors: VISION_TOWER_AND_PROJECTOR,
        }],
    }],
    gguf: Some(Gguf {
        // convert_hf_to_gguf writes Mistral Small 3.x and Ministral 3 as `mistral3`
        // (conversion/mistral3.py:14-33); its graph is Llama's (src/models/mistral3.cpp).
        architectures: &[("llama", "llama"), ("mistral3", "mistral")],
        keys: &[
            // Ministral 3's temperature tuning: one more op on Q (mistral3.cpp:110-113, 151-155).
            ("attention.temperature_scale", Grade::Consumed),
        ],
        tensors: &[],
        normalize: |model_type, kv| {
            let tempered = kv
                .opt_float("attention.temperature_scale")
                .is_some_and(|scale| scale != 0.0);
            let mut normalized = llama_cpp::read_decoder(model_type, FAMILY.name, kv, 1)?;
            normalized.model.llama_cpp_graph = Some(match tempered {
                true => LlamaCppGraph::Mistral3Tempered,
                false => LlamaCppGraph::Llama,
            });
            Some(normalized)
        },
    }),
    ..Family::BASE
};

/// `PixtralVisionConfig`'s fields (transformers 5.24 `models/pixtral/configuration_pixtral.py`;
/// `head_dim` is set in `__post_init__` and read by `modeling_pixtral.py` l.69). The tower is
/// counted from its stored tensors; these keys shape them.
const PIXTRAL_VISION_KEYS: &[(&str, Grade)] = &[
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_hidden_layers", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_channels", Grade::Consumed),
    ("image_size", Grade::Consumed),
    ("patch_size", Grade::Consumed),
    ("head_dim", Grade::Consumed),
];

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
    let mut model = dims.model(
        model_type,
        FAMILY.name,
        uniform(dims.layers, dims.attention(span)),
        None,
    );
    // `convert_hf_to_gguf.py` writes a `llama` checkpoint as GGUF architecture `llama`, a
    // `mistral` one as `llama` or `mistral3` (conversion/llama.py:20, mistral3.py:14-33): the
    // same graph. Not with a window, which `llama` drops and vLLM keeps.
    if matches!(span, Span::Full) {
        model.llama_cpp_graph = Some(LlamaCppGraph::Llama);
    }
    Some(Normalized { model, shapes })
}
