//! Gemma (1), Gemma 2 and Gemma 3 (text). Gemma 1 (`gemma`, `GemmaForCausalLM`): every layer
//! full attention, `head_dim` independent of hidden/heads (gemma-7b: 16 heads × 256 = 4096 over
//! a 3072 hidden), tied embeddings (vLLM 0.19 `models/gemma.py:385-386` asserts them). Gemma 2
//! and 3: interleaved sliding/full attention, `head_dim` independent of hidden/heads (256 on
//! gemma-3-1b), sandwich norms, tied embeddings by default. Gemma 3's
//! multimodal wrapper (`gemma3`, `Gemma3ForConditionalGeneration`) adds a SigLIP vision tower
//! and a projector (transformers 5.24 `models/gemma3/configuration_gemma3.py` `Gemma3Config`,
//! `modeling_gemma3.py` `Gemma3MultiModalProjector` l.635-650).

use super::*;

pub static FAMILY: Family = Family {
    name: "gemma",
    model_types: &["gemma", "gemma2", "gemma3_text"],
    keys: &[
        ("attention_bias", Grade::Consumed),
        ("sliding_window", Grade::Consumed),
        ("layer_types", Grade::Consumed),
        ("sliding_window_pattern", Grade::Consumed),
        ("_sliding_window_pattern", Grade::Consumed),
        ("use_bidirectional_attention", Grade::Consumed),
        ("query_pre_attn_scalar", Grade::Numerics),
        ("attn_logit_softcapping", Grade::Numerics),
        ("final_logit_softcapping", Grade::Numerics),
        ("rope_local_base_freq", Grade::Numerics),
        ("cache_implementation", Grade::Generation),
    ],
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QK_NORM,
        GATED_MLP,
        &[group(
            "model.layers.N.{pre_feedforward_layernorm,post_feedforward_layernorm}.weight",
            Norm,
        )],
    ],
    architectures: &[
        "GemmaForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
    ],
    normalize,
    wrappers: &[Wrapper {
        model_type: "gemma3",
        // `Gemma3Config`'s own fields (its token ids are graded as token ids).
        keys: &[
            // Sets the projector's pooling kernel (no parameters): tokens an image takes.
            ("mm_tokens_per_image", Grade::Numerics),
        ],
        encoders: &[Encoder {
            config_key: "vision_config",
            keys: SIGLIP_VISION_KEYS,
            tensors: VISION_TOWER_AND_PROJECTOR,
        }],
    }],
    gguf: Some(Gguf {
        architectures: &[("gemma2", "gemma2"), ("gemma3", "gemma3_text")],
        // Gemma 3's local layers rope from their own base (llama.cpp `gemma3.cpp` l.9): values,
        // not shapes.
        keys: &[("rope.freq_base_swa", Grade::Numerics)],
        tensors: &[],
        // llama.cpp: Gemma 2 alternates (pattern 2), Gemma 3 has five sliding per full (6).
        normalize: |model_type, kv| {
            let pattern = if model_type == "gemma2" { 2 } else { 6 };
            llama_cpp::read_decoder(model_type, FAMILY.name, kv, pattern).map(with_llama_cpp_graph)
        },
    }),
    defaults: &[
        // transformers 5.24 `models/gemma3/configuration_gemma3.py` `Gemma3TextConfig` l.73-81, 93.
        ConfigDefaults {
            model_type: "gemma3_text",
            values: &[
                ("vocab_size", 262_208),
                ("hidden_size", 2304),
                ("intermediate_size", 9216),
                ("num_hidden_layers", 26),
                ("num_attention_heads", 8),
                ("num_key_value_heads", 4),
                ("head_dim", 256),
                ("max_position_embeddings", 131_072),
                ("sliding_window", 4096),
            ],
        },
    ],
    encoder_profile: Some(gemma3_encoder_profile),
    ..Family::BASE
};

/// Gemma 3's dummy image as vLLM 0.19 profiles it (`models/gemma3_mm.py`): without pan-and-scan
/// (`get_num_crops` is 0 unless the image processor's `do_pan_and_scan`, off by default,
/// l.104-119) an image is one `image_size`² crop of
/// `num_channels` (`SiglipVisionConfig`'s defaults 224 and 3), and it yields
/// `mm_tokens_per_image` embeddings (`Gemma3Config`'s default 256) of the language model's
/// width (`_process_image_input`, l.567-580: the projector's output, split per image).
fn gemma3_encoder_profile(wrapper: &str, config: &Map<String, Value>, text: &Model) -> Option<EncoderProfile> {
    if wrapper != "gemma3" {
        return None;
    }
    let vision = config.get("vision_config").and_then(Value::as_object);
    let number = |map: Option<&Map<String, Value>>, key: &str, default: u64| {
        map.map_or(Some(default), |m| m.get(key).map_or(Some(default), Value::as_u64))
    };
    let image = number(vision, "image_size", 224)?;
    let channels = number(vision, "num_channels", 3)?;
    let tokens = number(Some(config), "mm_tokens_per_image", 256)?;
    (tokens > 0).then(|| EncoderProfile {
        tokens_per_item: tokens,
        input_elements_per_item: channels.saturating_mul(image).saturating_mul(image),
        output_width: text.hidden,
    })
}

/// `SiglipVisionConfig`'s fields (transformers 5.24 `models/siglip/configuration_siglip.py`).
/// The tower is counted from its stored tensors; these keys shape them.
const SIGLIP_VISION_KEYS: &[(&str, Grade)] = &[
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_hidden_layers", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_channels", Grade::Consumed),
    ("image_size", Grade::Consumed),
    ("patch_size", Grade::Consumed),
    ("vision_use_head", Grade::Consumed),
];

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, true)?;
    if cfg.opt_bool("use_bidirectional_attention") == Some(true) {
        cfg.unsupported(
            "use_bidirectional_attention",
            "bidirectional (encoder) Gemma is not a causal decoder the planner models",
        );
        return None;
    }
    let window = cfg.opt_u64("sliding_window");
    if model_type == "gemma" && window.is_some() {
        // vLLM 0.19 `models/gemma.py` attends every layer over the whole context; a window
        // in a Gemma 1 config is not a Gemma 1 the planner knows.
        cfg.unsupported(
            "sliding_window",
            "Gemma (1) attends every layer over the whole context; this config is not a plain gemma",
        );
        return None;
    }
    let spans_per_layer = match layer_types(cfg, dims.layers, window)? {
        // Gemma 1 has no sliding layers.
        None if model_type == "gemma" => (0..dims.layers).map(|_| Span::Full).collect(),
        Some(per_layer) => per_layer,
        None => {
            // transformers' defaults: Gemma 2 alternates from a sliding layer 0; Gemma 3
            // makes every `pattern`-th layer full.
            let pattern = match cfg
                .opt_u64("sliding_window_pattern")
                .or_else(|| cfg.opt_u64("_sliding_window_pattern"))
            {
                Some(p) => p.max(1),
                None if model_type == "gemma2" => 2,
                None => 6,
            };
            let Some(window) = window else {
                cfg.unsupported(
                    "sliding_window",
                    "Gemma interleaves sliding layers but sliding_window is not set",
                );
                return None;
            };
            (0..dims.layers)
                .map(|i| {
                    if (i + 1) % pattern != 0 {
                        Span::Sliding(window)
                    } else {
                        Span::Full
                    }
                })
                .collect()
        }
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    let mut model = dims.model(model_type, FAMILY.name, spans(&dims, spans_per_layer), None);
    // vLLM 0.19 `gemma3.py:167-178`: a transformers-4 config's rope is the global layers';
    // the sliding layers build their own default rope at `rope_local_base_freq`.
    let per_layer_type = cfg
        .value("rope_parameters")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("sliding_attention"));
    if model_type == "gemma3_text" && !per_layer_type {
        model.rope.push(Rope {
            scaling: RopeScaling::Plain,
            rotary_dim: dims.head_dim,
            ..dims.rope[0].clone()
        });
    }
    Some(with_llama_cpp_graph(Normalized { model, shapes }))
}

/// Gemma 2 and 3 are built by llama.cpp's `src/models/gemma2.cpp` and `gemma3.cpp`, both
/// replayed; Gemma (1)'s graph is not.
fn with_llama_cpp_graph(mut normalized: Normalized) -> Normalized {
    normalized.model.llama_cpp_graph = match normalized.model.model_type.as_str() {
        "gemma2" => Some(LlamaCppGraph::Gemma2),
        "gemma3_text" => Some(LlamaCppGraph::Gemma3),
        _ => None,
    };
    normalized
}
