//! Qwen2 / Qwen3 (dense), Qwen2-MoE and Qwen3-MoE. Qwen3 adds QK-norm and declares
//! `head_dim` (128 on Qwen3-0.6B, where hidden/heads would say 64). Sliding attention
//! applies only when `use_sliding_window` is set, to layers from `max_window_layers` on.
//! Qwen2-MoE adds a gated shared expert beside the routed ones.

use super::*;

/// Keys of transformers' Qwen2Config / Qwen3Config (and the MoE configs' shared ones).
const KEYS: &[(&str, Grade)] = &[
    ("attention_bias", Grade::Consumed),
    ("use_sliding_window", Grade::Consumed),
    ("sliding_window", Grade::Consumed),
    ("max_window_layers", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    // MoE
    ("num_experts", Grade::Consumed),
    // transformers 5 writes the expert count under this name.
    ("num_local_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("decoder_sparse_step", Grade::Consumed),
    ("mlp_only_layers", Grade::Consumed),
    ("norm_topk_prob", Grade::Numerics),
];

/// Qwen3-MoE: Qwen3-Coder-480B-A35B carries `shared_expert_intermediate_size: 0`, which
/// `Qwen3MoeConfig` does not define and modeling_qwen3_moe.py never reads: Qwen3-MoE has no
/// shared expert. The extracted data counts it read by vLLM only because its module closure
/// takes in qwen2_moe.py whole, so the reading stays written here.
const QWEN3_MOE_KEYS: &[(&str, Grade)] = &[("shared_expert_intermediate_size", Grade::Ignored)];

/// Qwen2-MoE (configuration_qwen2_moe.py): `qkv_bias` sets the q/k/v biases, and a gated
/// shared expert is `shared_expert_intermediate_size` wide.
const QWEN2_MOE_KEYS: &[(&str, Grade)] = &[
    ("qkv_bias", Grade::Consumed),
    ("shared_expert_intermediate_size", Grade::Consumed),
];

pub static FAMILY: Family = Family {
    name: "qwen",
    model_types: &["qwen2", "qwen3"],
    architectures: &["Qwen2ForCausalLM", "Qwen3ForCausalLM"],
    keys: KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QKV_BIAS, QK_NORM, GATED_MLP],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("qwen2", "qwen2"), ("qwen3", "qwen3")],
        keys: &[],
        tensors: &[],
        normalize: |model_type, kv| llama_cpp::read_decoder(model_type, FAMILY.name, kv, 1).map(with_llama_cpp_graph),
    }),
    ..Family::BASE
};

const ROUTED: &[TensorGroup] = &[
    group("model.layers.N.mlp.gate.weight", Router),
    group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
];

pub static MOE_FAMILY: Family = Family {
    name: "qwen_moe",
    model_types: &["qwen3_moe"],
    architectures: &["Qwen3MoeForCausalLM"],
    keys: KEYS,
    more_keys: QWEN3_MOE_KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QKV_BIAS, QK_NORM, GATED_MLP, ROUTED],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("qwen3moe", "qwen3_moe")],
        keys: &[],
        tensors: &[],
        normalize: |model_type, kv| {
            llama_cpp::read_decoder(model_type, MOE_FAMILY.name, kv, 1).map(with_llama_cpp_graph)
        },
    }),
    ..Family::BASE
};

pub static QWEN2_MOE_FAMILY: Family = Family {
    name: "qwen2_moe",
    model_types: &["qwen2_moe"],
    architectures: &["Qwen2MoeForCausalLM"],
    keys: KEYS,
    more_keys: QWEN2_MOE_KEYS,
    tensors: &[
        EMBED_NORM_HEAD,
        QKVO,
        QKV_BIAS,
        GATED_MLP,
        ROUTED,
        &[
            group(
                "model.layers.N.mlp.shared_expert.{gate,up,down}_proj.weight",
                SharedExperts,
            ),
            group("model.layers.N.mlp.shared_expert_gate.weight", SharedExperts),
        ],
    ],
    normalize,
    gguf: Some(Gguf {
        architectures: &[("qwen2moe", "qwen2_moe")],
        keys: &[],
        tensors: &[],
        normalize: |model_type, kv| {
            // `n_ff_shexp`, or `n_ff` without it (qwen2moe.cpp:51).
            let shared_width = kv
                .opt("expert_shared_feed_forward_length")
                .or(kv.opt("feed_forward_length"));
            let mut normalized = llama_cpp::read_decoder(model_type, QWEN2_MOE_FAMILY.name, kv, 1)?;
            // Replayed where the experts' width is declared (the planner does not derive
            // llama.cpp's `n_ff / n_expert_used` fallback, l.43).
            let declared = normalized
                .model
                .moe
                .as_ref()
                .is_some_and(|m| m.expert_intermediate_size.is_some());
            normalized.model.llama_cpp_graph = shared_width
                .filter(|_| declared)
                .map(|shared_width| LlamaCppGraph::Qwen2Moe { shared_width });
            Some(normalized)
        },
    }),
    ..Family::BASE
};

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let family = match model_type {
        "qwen3_moe" => MOE_FAMILY.name,
        "qwen2_moe" => QWEN2_MOE_FAMILY.name,
        _ => FAMILY.name,
    };
    let moe = model_type.ends_with("_moe");
    read(model_type, family, moe, cfg)
}

/// A Qwen decoder (Qwen2, Qwen3, their MoE forms, Qwen3-VL's language model): spans from
/// `layer_types` or the sliding-window keys, experts on every `decoder_sparse_step`-th layer
/// but `mlp_only_layers`, a shared expert when `shared_expert_intermediate_size` is read.
pub(super) fn read(model_type: &str, family: &'static str, is_moe: bool, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let window = cfg.opt_u64("sliding_window");
    let spans_per_layer = match layer_types(cfg, dims.layers, window)? {
        Some(per_layer) => per_layer,
        None if cfg.opt_bool("use_sliding_window").unwrap_or(false) => {
            let Some(window) = window else {
                cfg.unsupported(
                    "use_sliding_window",
                    "use_sliding_window is set but sliding_window is not",
                );
                return None;
            };
            let from = cfg.opt_u64("max_window_layers").unwrap_or(dims.layers);
            (0..dims.layers)
                .map(|i| if i >= from { Span::Sliding(window) } else { Span::Full })
                .collect()
        }
        None => vec![Span::Full; dims.layers as usize],
    };
    let windowless = spans_per_layer.iter().all(|span| matches!(span, Span::Full));
    let moe = if is_moe {
        let experts = match cfg.value("num_experts") {
            Some(_) => cfg.u64("num_experts")?,
            None => cfg.u64("num_local_experts")?,
        };
        let active = cfg.u64("num_experts_per_tok")?;
        let step = cfg.opt_u64("decoder_sparse_step").unwrap_or(1).max(1);
        let mlp_only = cfg.opt_u64_list("mlp_only_layers").unwrap_or_default();
        let dense_layers = (0..dims.layers)
            .filter(|i| mlp_only.contains(i) || (i + 1) % step != 0)
            .collect();
        let shared = match family == QWEN2_MOE_FAMILY.name {
            true => u64::from(cfg.opt_positive("shared_expert_intermediate_size").is_some()),
            false => 0,
        };
        Some(Moe {
            experts,
            active,
            shared,
            dense_layers,
            expert_intermediate_size: cfg.opt_positive("moe_intermediate_size"),
        })
    } else {
        None
    };
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    if let Some(moe) = &moe {
        shapes.push(ShapeRule {
            pattern: "model.layers.N.mlp.gate.weight",
            dim: 0,
            value: moe.experts,
            keys: "num_experts",
        });
    }
    // `intermediate_size` is the dense width: only meaningful when some layer is dense.
    let dense = moe.as_ref().is_none_or(|m| !m.dense_layers.is_empty());
    let mut model = dims.model(model_type, family, spans(&dims, spans_per_layer), moe);
    if !dense {
        model.intermediate = None;
    }
    // Qwen2-MoE converts to llama.cpp's `qwen2moe` graph, which routes every layer and slides
    // none (qwen2moe.cpp:16-58): replayed where the config says the same.
    let routed_everywhere = model
        .moe
        .as_ref()
        .is_some_and(|m| m.dense_layers.is_empty() && m.expert_intermediate_size.is_some());
    if family == QWEN2_MOE_FAMILY.name && windowless && routed_everywhere {
        model.llama_cpp_graph = cfg
            .opt_positive("shared_expert_intermediate_size")
            .map(|shared_width| LlamaCppGraph::Qwen2Moe { shared_width });
    }
    Some(with_llama_cpp_graph(Normalized { model, shapes }))
}

/// Qwen3 and Qwen3-MoE are built by llama.cpp's `src/models/qwen3.cpp` and `qwen3moe.cpp`:
/// Llama's graph with Q and K normed per head before rope; Qwen2 by `qwen2.cpp`, Llama's with
/// Q, K and V biases, which keeps no window (a config that slides is not that graph).
/// (Qwen2-MoE's is set in `read`.)
fn with_llama_cpp_graph(mut normalized: Normalized) -> Normalized {
    let model = &mut normalized.model;
    let windowed = model.layers.iter().any(|l| {
        matches!(
            l,
            Mixer::Attention {
                span: Span::Sliding(_),
                ..
            }
        )
    });
    model.llama_cpp_graph = match model.model_type.as_str() {
        "qwen3" | "qwen3_moe" => Some(LlamaCppGraph::Qwen3),
        "qwen2" if !windowed => Some(LlamaCppGraph::Qwen2),
        _ => model.llama_cpp_graph,
    };
    normalized
}
