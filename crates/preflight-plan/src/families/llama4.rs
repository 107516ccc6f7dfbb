//! Llama 4 (`llama4` wrapper, `llama4_text` language model): chunked local attention on the
//! RoPE layers and full attention on the NoPE ones, MoE every `interleave_moe_layer_step`-th
//! layer with one shared expert, routed experts stored fused (`gate_up_proj` [E, H, 2I],
//! `down_proj` [E, I, H]), and a vision model with its projector.
//!
//! The GGUF form is llama.cpp's `llama4` (`normalize_gguf`), whose graph preflight replays.
//!
//! Reference: transformers 5.24 `models/llama4/configuration_llama4.py` (`Llama4TextConfig`
//! `__post_init__` l.169-190 derives `no_rope_layers`, `moe_layers` and `layer_types`),
//! `modeling_llama4.py` (`Llama4TextExperts` l.55-63, `Llama4TextAttention` l.301-332,
//! `Llama4TextDecoderLayer` l.394-407); vLLM 0.19 `model_executor/models/llama4.py` l.258
//! (`ChunkedLocalAttention` when the layer uses RoPE and `attention_chunk_size` is set).

use super::*;
use crate::model::Llama4Graph;

/// `Llama4TextConfig`'s fields, graded.
const KEYS: &[(&str, Grade)] = &[
    // The routed and shared experts' width.
    // The dense MLP's width (layers outside `moe_layers`).
    ("intermediate_size_mlp", Grade::Consumed),
    ("attention_bias", Grade::Consumed),
    ("num_local_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("moe_layers", Grade::Consumed),
    ("interleave_moe_layer_step", Grade::Consumed),
    ("no_rope_layers", Grade::Consumed),
    ("no_rope_layer_interval", Grade::Consumed),
    ("attention_chunk_size", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    // `Llama4TextL2Norm` has no weights: a value change, not a shape.
    ("use_qk_norm", Grade::Numerics),
    ("attn_temperature_tuning", Grade::Numerics),
    ("floor_scale", Grade::Numerics),
    ("attn_scale", Grade::Numerics),
    ("router_jitter_noise", Grade::TrainingOnly),
];

/// `Llama4VisionConfig`'s fields. The vision model is counted from its stored tensors;
/// these keys shape them.
const VISION_KEYS: &[(&str, Grade)] = &[
    ("hidden_size", Grade::Consumed),
    ("num_hidden_layers", Grade::Consumed),
    ("num_attention_heads", Grade::Consumed),
    ("num_channels", Grade::Consumed),
    ("intermediate_size", Grade::Consumed),
    ("vision_output_dim", Grade::Consumed),
    ("image_size", Grade::Consumed),
    ("patch_size", Grade::Consumed),
    ("pixel_shuffle_ratio", Grade::Consumed),
    ("projector_input_dim", Grade::Consumed),
    ("projector_output_dim", Grade::Consumed),
    ("multi_modal_projector_bias", Grade::Consumed),
    ("norm_eps", Grade::Numerics),
    ("vision_feature_select_strategy", Grade::Numerics),
    ("projector_dropout", Grade::TrainingOnly),
    // Not a `Llama4VisionConfig` field and never read by `modeling_llama4.py` (the model
    // takes the last hidden state).
    ("vision_feature_layer", Grade::Ignored),
];

pub static FAMILY: Family = Family {
    name: "llama4",
    model_types: &["llama4_text"],
    architectures: &["Llama4ForConditionalGeneration", "Llama4ForCausalLM"],
    keys: KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        &[
            group("model.layers.N.self_attn.{q,k,v,o}_proj.bias", Attention),
            group("model.layers.N.feed_forward.router.weight", Router),
            group("model.layers.N.feed_forward.experts.{gate_up_proj,down_proj}", Experts),
            // Per-expert storage, as quantized releases keep it.
            group(
                "model.layers.N.feed_forward.experts.N.{gate,up,down}_proj.weight",
                Experts,
            ),
            group(
                "model.layers.N.feed_forward.shared_expert.{gate,up,down}_proj.weight",
                SharedExperts,
            ),
            group("model.layers.N.feed_forward.{gate,up,down}_proj.weight", Mlp),
        ],
    ],
    normalize,
    wrappers: &[Wrapper {
        model_type: "llama4",
        // `Llama4Config`'s token ids and their `attribute_map` aliases.
        keys: &[],
        encoders: &[Encoder {
            config_key: "vision_config",
            keys: VISION_KEYS,
            tensors: &[
                ("vision_model.", Component::Vision),
                ("multi_modal_projector.", Component::Projector),
            ],
        }],
    }],
    // llama.cpp `llama4` (`src/models/llama4.cpp`): interleave_moe_layer_step is its own key;
    // the swa base is a value, not a shape.
    gguf: Some(Gguf {
        architectures: &[("llama4", "llama4_text")],
        keys: &[
            ("interleave_moe_layer_step", Grade::Consumed),
            ("rope.freq_base_swa", Grade::Numerics),
        ],
        tensors: &[],
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

/// llama4.cpp:14: the chunk every Llama 4 was trained with, whatever a `llama4` GGUF says.
const LLAMA_CPP_CHUNK: u64 = 8192;

/// llama.cpp's `llama4` hparams (llama4.cpp:3-41): unless `attention.sliding_window` is
/// written as 0, the window is 8192 whatever the file says, chunked, on 3 of every 4 layers
/// (`sliding_window_pattern` may say otherwise; `set_swa_pattern`, llama-hparams.cpp:8-17), and
/// the NoPE layers are every 4th (`n_no_rope_layer_step`'s default, llama-hparams.h:258) —
/// with no window, the last layer alone. Every `interleave_moe_layer_step`-th layer routes to
/// the experts and one shared expert of their width; the others run the dense MLP.
fn normalize_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (dims, kv_per_layer, v_head_dim) = llama_cpp::read_dims(kv)?;
    let moe_step = kv.required("interleave_moe_layer_step")?;
    // llama.cpp refuses a `llama4` without experts (llama4.cpp:47-49).
    kv.required("expert_count")?;
    let windowed = kv.opt("attention.sliding_window") != Some(0);
    let pattern = kv.opt("attention.sliding_window_pattern").unwrap_or(4);
    let layers = (0..dims.layers)
        .map(|i| {
            let span = match windowed && (pattern == 0 || i % pattern < pattern - 1) {
                true => Span::Chunked(LLAMA_CPP_CHUNK),
                false => Span::Full,
            };
            llama_cpp::attention(&dims, kv_per_layer.as_ref(), v_head_dim, i, span)
        })
        .collect();
    let mut normalized = llama_cpp::finish(model_type, FAMILY.name, kv, &dims, layers);
    let model = &mut normalized.model;
    let moe = model.moe.as_mut()?;
    moe.shared = 1;
    moe.dense_layers = (0..dims.layers).filter(|i| !(i + 1).is_multiple_of(moe_step)).collect();
    if !moe.dense_layers.is_empty() {
        model.intermediate = dims.intermediate;
    }
    model.llama_cpp_graph = Some(LlamaCppGraph::Llama4(Llama4Graph {
        moe_step,
        no_rope_step: if windowed { 4 } else { dims.layers },
        // `use_kq_norm` is off for the 128-expert Maverick alone (llama4.cpp:41).
        kq_norm: moe.experts != 128,
    }));
    Some(normalized)
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let n = dims.layers as usize;
    let chunk = cfg.opt_u64("attention_chunk_size");
    // `no_rope_layers[i]` is 1 where layer i uses RoPE; empty or absent → a NoPE layer every
    // `no_rope_layer_interval` (4).
    let rope = match cfg.opt_u64_list("no_rope_layers").filter(|l| !l.is_empty()) {
        Some(list) if list.len() >= n => list[..n].iter().map(|v| *v != 0).collect::<Vec<_>>(),
        Some(list) => {
            cfg.unsupported(
                "no_rope_layers",
                format!(
                    "{} entries for {} layers: one per layer is needed",
                    list.len(),
                    dims.layers
                ),
            );
            return None;
        }
        None => {
            let interval = cfg.opt_u64("no_rope_layer_interval").unwrap_or(4).max(1);
            (0..dims.layers).map(|i| (i + 1) % interval != 0).collect()
        }
    };
    let per_layer: Vec<Span> = match cfg.opt_str_list("layer_types") {
        Some(types) => {
            if types.len() != n {
                cfg.unsupported(
                    "layer_types",
                    format!(
                        "{} entries for {} layers: one per layer is needed",
                        types.len(),
                        dims.layers
                    ),
                );
                return None;
            }
            let mut out = Vec::with_capacity(n);
            for t in types {
                match (t, chunk) {
                    ("full_attention", _) => out.push(Span::Full),
                    ("chunked_attention", Some(c)) if c > 0 => out.push(Span::Chunked(c)),
                    ("chunked_attention", _) => {
                        cfg.unsupported(
                            "attention_chunk_size",
                            "layer_types names chunked layers but attention_chunk_size is not a positive size",
                        );
                        return None;
                    }
                    (other, _) => {
                        cfg.unsupported("layer_types", format!("layer type `{other}` is not one Llama 4 has"));
                        return None;
                    }
                }
            }
            out
        }
        // `chunked_attention` where the layer uses RoPE and a chunk size is set.
        None => rope
            .iter()
            .map(|r| match chunk {
                Some(c) if *r && c > 0 => Span::Chunked(c),
                _ => Span::Full,
            })
            .collect(),
    };
    let experts = cfg.u64("num_local_experts")?;
    let active = cfg.u64("num_experts_per_tok")?;
    let moe_layers: Vec<u64> = match cfg.opt_u64_list("moe_layers") {
        Some(list) => list,
        None => {
            let step = cfg.opt_u64("interleave_moe_layer_step").unwrap_or(1).max(1);
            (step - 1..dims.layers).step_by(step as usize).collect()
        }
    };
    // convert_hf_to_gguf writes a `llama4` file that llama.cpp builds by its own rules
    // (`normalize_gguf`): a config that says the same plans llama.cpp's graph.
    let moe_step = cfg.opt_u64("interleave_moe_layer_step").unwrap_or(1).max(1);
    let as_llama_cpp_builds = (0..dims.layers).all(|i| {
        let nope = (i + 1).is_multiple_of(4);
        let span = if nope {
            Span::Full
        } else {
            Span::Chunked(LLAMA_CPP_CHUNK)
        };
        rope.get(i as usize) == Some(&!nope)
            && per_layer.get(i as usize) == Some(&span)
            && moe_layers.contains(&i) == (i + 1).is_multiple_of(moe_step)
    });
    let dense_layers: Vec<u64> = (0..dims.layers).filter(|l| !moe_layers.contains(l)).collect();
    let expert_width = cfg.u64("intermediate_size")?;
    let dense_width = match dense_layers.is_empty() {
        true => None,
        false => Some(cfg.u64("intermediate_size_mlp")?),
    };
    let moe = Moe {
        experts,
        active,
        shared: 1,
        dense_layers,
        expert_intermediate_size: Some(expert_width),
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.feed_forward.router.weight",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
        ShapeRule {
            pattern: "model.layers.N.feed_forward.experts.{gate_up_proj,down_proj}",
            dim: 0,
            value: experts,
            keys: "num_local_experts",
        },
        ShapeRule {
            pattern: "model.layers.N.feed_forward.experts.gate_up_proj",
            dim: 2,
            value: expert_width.saturating_mul(2),
            keys: "2 × intermediate_size",
        },
        ShapeRule {
            pattern: "model.layers.N.feed_forward.experts.down_proj",
            dim: 1,
            value: expert_width,
            keys: "intermediate_size",
        },
        ShapeRule {
            pattern: "model.layers.N.feed_forward.shared_expert.{gate,up}_proj.weight",
            dim: 0,
            value: expert_width,
            keys: "intermediate_size",
        },
    ]);
    if let Some(width) = dense_width {
        shapes.push(ShapeRule {
            pattern: "model.layers.N.feed_forward.{gate,up}_proj.weight",
            dim: 0,
            value: width,
            keys: "intermediate_size_mlp",
        });
    }
    let mut model = dims.model(model_type, FAMILY.name, spans(&dims, per_layer), Some(moe));
    model.intermediate = dense_width;
    if as_llama_cpp_builds {
        model.llama_cpp_graph = Some(LlamaCppGraph::Llama4(Llama4Graph {
            moe_step,
            no_rope_step: 4,
            kq_norm: experts != 128,
        }));
    }
    // SGLang's hybrid SWA list names `Llama4ForConditionalGeneration`, every published Llama 4
    // checkpoint's class (a text-only `Llama4ForCausalLM` would get SGLang's one pool).
    model.sglang_hybrid_swa = true;
    Some(Normalized { model, shapes })
}
