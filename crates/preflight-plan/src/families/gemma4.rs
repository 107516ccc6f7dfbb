//! Gemma 4 (`gemma4` wrapper, `gemma4_text` language model): sliding layers and full layers
//! with **their own KV geometry** — full layers use `global_head_dim` (512 on 31B) and, when
//! `attention_k_eq_v`, `num_global_key_value_heads` and no `v_proj` (K is reused as V; engines
//! still cache both) — sandwich norms, a stored `layer_scalar` buffer per layer, tied
//! embeddings, an optional MoE block beside the dense MLP, and a vision tower with stored
//! `std_bias`/`std_scale` buffers.
//!
//! Reference: transformers 5.24 `models/gemma4/configuration_gemma4.py` (`Gemma4TextConfig`,
//! `Gemma4VisionConfig`, `Gemma4Config`) and `modeling_gemma4.py` (`Gemma4TextAttention`
//! l.1141-1190, `Gemma4TextDecoderLayer` l.1331-1360, `Gemma4VisionModel` l.2048-2066).
//! Per-layer embeddings (`hidden_size_per_layer_input` > 0) and KV sharing
//! (`num_kv_shared_layers` > 0), the E2B/E4B layouts, are refused, not approximated.

use super::*;

/// `Gemma4TextConfig`'s fields, graded. Keys marked `Ignored` are neither fields of the class
/// nor read by `modeling_gemma4.py` (checked by grep of both files).
const KEYS: &[(&str, Grade)] = &[
    ("attention_bias", Grade::Consumed),
    ("sliding_window", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("use_bidirectional_attention", Grade::Consumed),
    ("attention_k_eq_v", Grade::Consumed),
    // Popped in `Gemma4TextConfig.__post_init__` into `per_layer_config` for full layers.
    ("global_head_dim", Grade::Consumed),
    ("num_global_key_value_heads", Grade::Consumed),
    ("per_layer_config", Grade::Consumed),
    ("num_kv_shared_layers", Grade::Consumed),
    ("hidden_size_per_layer_input", Grade::Consumed),
    ("vocab_size_per_layer_input", Grade::Consumed),
    ("use_double_wide_mlp", Grade::Consumed),
    ("enable_moe_block", Grade::Consumed),
    ("num_experts", Grade::Consumed),
    ("top_k_experts", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("final_logit_softcapping", Grade::Numerics),
    // Not a `Gemma4TextConfig` field and not read by `modeling_gemma4.py` (which sizes experts
    // from `moe_intermediate_size`); vLLM's gemma4.py falls back to it only when
    // `moe_intermediate_size` is absent, and MoE layouts here are sized from that key.
    ("expert_intermediate_size", Grade::Ignored),
];

/// `Gemma4VisionConfig`'s fields. The tower is counted from its stored tensors; these keys
/// shape them.
const VISION_KEYS: &[(&str, Grade)] = &[
    ("hidden_size", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("num_hidden_layers", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_key_value_heads", Grade::Consumed),
    ("head_dim", Grade::Consumed),
    ("max_position_embeddings", Grade::Consumed),
    ("attention_bias", Grade::Consumed),
    ("pooling_kernel_size", Grade::Consumed),
    ("patch_size", Grade::Consumed),
    ("position_embedding_size", Grade::Consumed),
    ("use_clipped_linears", Grade::Consumed),
    ("standardize", Grade::Consumed),
    // Neither `Gemma4VisionConfig` fields nor read by `modeling_gemma4.py` (the vision
    // attention sizes heads from `head_dim`). vLLM's gemma4_mm.py reads
    // `default_output_length` / `image_seq_length` only to budget image tokens.
    ("global_head_dim", Grade::Ignored),
    ("default_output_length", Grade::Ignored),
    ("image_seq_length", Grade::Ignored),
    ("video_seq_length", Grade::Ignored),
];

pub static FAMILY: Family = Family {
    name: "gemma4",
    model_types: &["gemma4_text"],
    architectures: &["Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QK_NORM,
        GATED_MLP,
        &[
            group(
                "model.layers.N.{pre_feedforward_layernorm,post_feedforward_layernorm}.weight",
                Norm,
            ),
            // `nn.Buffer(torch.ones(1))`, persistent: stored, not a parameter.
            group("model.layers.N.layer_scalar", Buffer),
            // The MoE block beside the dense MLP (`enable_moe_block`): experts fused as
            // transformers and the checkpoint hold them ([E, 2I, H] and [E, H, I]).
            group("model.layers.N.experts.{gate_up_proj,down_proj}", Experts),
            group("model.layers.N.router.{proj.weight,scale,per_expert_scale}", Router),
            group(
                "model.layers.N.{post_feedforward_layernorm_1,post_feedforward_layernorm_2,pre_feedforward_layernorm_2}.weight",
                Norm,
            ),
            // Vision-tower buffers (`Gemma4VisionModel` with `standardize`;
            // `Gemma4ClippableLinear` with `use_clipped_linears`).
            group("model.vision_tower.{std_bias,std_scale}", Buffer),
            group(
                "model.vision_tower.encoder.layers.N.{self_attn,mlp}.{q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj}.{input_min,input_max,output_min,output_max}",
                Buffer,
            ),
        ],
    ],
    normalize,
    wrappers: &[Wrapper {
        model_type: "gemma4",
        // `Gemma4Config`'s own fields: token ids.
        keys: &[
            // The audio tower is not modelled: its tensors (`model.audio_tower.*`,
            // `model.embed_audio.*`) belong to no component and block the plan.
            ("audio_config", Grade::Consumed),
            // Neither `Gemma4Config` fields nor read by `modeling_gemma4.py`; vLLM's
            // gemma4_mm.py uses `eoa_token_id` as a prompt token only.
            ("vision_soft_tokens_per_image", Grade::Ignored),
        ],
        encoders: &[Encoder {
            config_key: "vision_config",
            keys: VISION_KEYS,
            tensors: &[
                ("model.vision_tower.", Component::Vision),
                ("model.embed_vision.", Component::Projector),
            ],
        }],
    }],
    ..Family::BASE
};

/// transformers' default `global_head_dim` (`kwargs.pop("global_head_dim", 512)`).
const DEFAULT_GLOBAL_HEAD_DIM: u64 = 512;

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, true)?;
    match cfg.opt_str("use_bidirectional_attention") {
        None | Some("vision") => {}
        Some(_) => {
            cfg.unsupported(
                "use_bidirectional_attention",
                "bidirectional attention over all tokens is an encoder, not a causal decoder the planner models",
            );
            return None;
        }
    }
    if cfg.opt_u64("num_kv_shared_layers").unwrap_or(0) > 0 {
        cfg.unsupported(
            "num_kv_shared_layers",
            "layers reusing another layer's KV cache (Gemma 4 E2B/E4B) are not modelled",
        );
        return None;
    }
    if cfg.opt_u64("hidden_size_per_layer_input").unwrap_or(0) > 0 {
        cfg.unsupported(
            "hidden_size_per_layer_input",
            "per-layer input embeddings (Gemma 4 E2B/E4B) are not modelled",
        );
        return None;
    }
    // Only KV-shared layers widen their MLP (`Gemma4TextMLP`), and none are shared here.
    let _ = cfg.opt_bool("use_double_wide_mlp");
    let window = cfg.opt_u64("sliding_window");
    let mut spans_per_layer = match layer_types(cfg, dims.layers, window)? {
        Some(per_layer) => per_layer,
        // `__post_init__`: five sliding layers per full one.
        None => {
            let Some(window) = window.filter(|w| *w > 0) else {
                cfg.unsupported(
                    "sliding_window",
                    "Gemma 4 interleaves sliding layers but sliding_window is not set",
                );
                return None;
            };
            (0..dims.layers)
                .map(|i| {
                    if (i + 1) % 6 != 0 {
                        Span::Sliding(window)
                    } else {
                        Span::Full
                    }
                })
                .collect()
        }
    };
    // `__post_init__` forces the last layer to full attention.
    if let Some(last) = spans_per_layer.last_mut() {
        *last = Span::Full;
    }
    let k_eq_v = cfg.opt_bool("attention_k_eq_v").unwrap_or(false);
    let global_head_dim = match cfg.value("global_head_dim") {
        Some(_) => cfg.u64("global_head_dim")?,
        None => DEFAULT_GLOBAL_HEAD_DIM,
    };
    let global_kv_heads = match cfg.value("num_global_key_value_heads") {
        Some(_) if k_eq_v => cfg.u64("num_global_key_value_heads")?,
        _ => dims.kv_heads,
    };
    // Full layers' overrides: `per_layer_config` when the config carries it, else the two
    // keys `__post_init__` turns into it.
    let overrides = match cfg.value("per_layer_config") {
        Some(_) => per_layer_overrides(cfg, dims.layers)?,
        None => spans_per_layer
            .iter()
            .map(|s| (*s == Span::Full).then_some((Some(global_head_dim), Some(global_kv_heads))))
            .collect(),
    };
    let layers: Vec<Mixer> = spans_per_layer
        .iter()
        .zip(&overrides)
        .map(|(span, o)| {
            let (head_dim, kv_heads) = o.unwrap_or((None, None));
            let head_dim = head_dim.unwrap_or(dims.head_dim);
            Mixer::Attention {
                kv_heads: kv_heads.unwrap_or(dims.kv_heads),
                head_dim,
                v_head_dim: head_dim,
                span: *span,
                // `use_alternative_attention = attention_k_eq_v and not is_sliding`.
                shared_kv: k_eq_v && *span == Span::Full,
            }
        })
        .collect();
    if layers
        .iter()
        .any(|m| matches!(m, Mixer::Attention { kv_heads, .. } if *kv_heads == 0 || dims.heads % kv_heads != 0))
    {
        cfg.unsupported(
            "num_global_key_value_heads",
            "num_attention_heads is not a multiple of a layer's KV heads",
        );
        return None;
    }
    let moe = if cfg.opt_bool("enable_moe_block").unwrap_or(false) {
        Some(Moe {
            experts: cfg.u64("num_experts")?,
            active: cfg.u64("top_k_experts")?,
            shared: 0,
            // Every layer carries the experts beside its dense MLP.
            dense_layers: Vec::new(),
            expert_intermediate_size: Some(cfg.u64("moe_intermediate_size")?),
        })
    } else {
        None
    };
    let mut shapes = dims.base_shapes();
    shapes.push(ShapeRule {
        pattern: "model.layers.N.self_attn.q_proj.weight",
        dim: 1,
        value: dims.hidden,
        keys: "hidden_size",
    });
    if let Some(moe) = &moe {
        shapes.push(ShapeRule {
            pattern: "model.layers.N.experts.{gate_up_proj,down_proj}",
            dim: 0,
            value: moe.experts,
            keys: "num_experts",
        });
    }
    let mut model = dims.model(model_type, FAMILY.name, layers, moe);
    // Full layers rope their own, wider heads (vLLM 0.19 `gemma4.py:365`).
    model.rope = read_rope(cfg, dims.context, |layer_type| match layer_type {
        Some("full_attention") => global_head_dim,
        _ => dims.head_dim,
    });
    // SGLang's hybrid SWA list names `Gemma4ForCausalLM` and `Gemma4ForConditionalGeneration`.
    model.sglang_hybrid_swa = true;
    Some(Normalized { model, shapes })
}

/// A layer's `(head_dim, num_key_value_heads)` overrides.
type Override = (Option<u64>, Option<u64>);

/// `per_layer_config` as `__post_init__` writes it: a sparse map from layer index to the
/// attributes that layer overrides. Only `head_dim` and `num_key_value_heads` are modelled;
/// any other override is refused.
fn per_layer_overrides(cfg: &mut ConfigReader, layers: u64) -> Option<Vec<Option<Override>>> {
    let map = cfg.opt_object("per_layer_config")?;
    let mut out = vec![None; layers as usize];
    for (index, value) in map {
        let (Ok(i), Some(attrs)) = (index.parse::<u64>(), value.as_object()) else {
            cfg.unsupported(
                "per_layer_config",
                "expected a map from layer index to attribute overrides",
            );
            return None;
        };
        if i >= layers {
            cfg.unsupported("per_layer_config", format!("layer {i} is past num_hidden_layers"));
            return None;
        }
        let mut head_dim = None;
        let mut kv_heads = None;
        for (key, v) in attrs {
            let n = v.as_u64().filter(|n| *n > 0);
            match (key.as_str(), n) {
                ("head_dim", Some(n)) => head_dim = Some(n),
                ("num_key_value_heads", Some(n)) => kv_heads = Some(n),
                _ => {
                    cfg.unsupported(
                        "per_layer_config",
                        format!("layer {i} overrides `{key}`, which the planner does not model per layer"),
                    );
                    return None;
                }
            }
        }
        out[i as usize] = Some((head_dim, kv_heads));
    }
    Some(out)
}
