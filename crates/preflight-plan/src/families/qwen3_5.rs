//! Qwen3.5 (`qwen3_5`, dense) and Qwen3.5-MoE (`qwen3_5_moe`): a hybrid of gated DeltaNet
//! linear attention and gated full attention (`layer_types`), inside a vision-language
//! wrapper (`model.language_model.*` beside a ViT under `model.visual.*`), with MTP layers
//! under `mtp.*` that transformers drops and engines load for speculative decoding.
//!
//! Published layouts followed where transformers differs: MoE experts stored fused per
//! layer (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I]), the MTP
//! layer's experts stored per expert, `linear_attn.A_log` and `linear_attn.norm` in F32.

use super::*;

/// Keys of transformers' `Qwen3_5TextConfig` / `Qwen3_5MoeTextConfig` (configuration_qwen3_5*.py),
/// plus what vLLM reads beside them (qwen3_next.py, qwen3_5_mtp.py, models/config.py).
const KEYS: &[(&str, Grade)] = &[
    ("attention_bias", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("linear_conv_kernel_dim", Grade::Consumed),
    ("linear_key_head_dim", Grade::Consumed),
    ("linear_value_head_dim", Grade::Consumed),
    ("linear_num_key_heads", Grade::Consumed),
    ("linear_num_value_heads", Grade::Consumed),
    ("num_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("shared_expert_intermediate_size", Grade::Consumed),
    // vLLM's Qwen3NextSparseMoeBlock places experts by these (qwen3_next.py l.352).
    ("mlp_only_layers", Grade::Consumed),
    ("decoder_sparse_step", Grade::Consumed),
    // vLLM: q_proj doubles for the output gate when set (qwen3_next.py l.233).
    ("attn_output_gate", Grade::Consumed),
    // vLLM: how many MTP layers to load (qwen3_5_mtp.py l.71).
    ("mtp_num_hidden_layers", Grade::Consumed),
    ("mtp_use_dedicated_embeddings", Grade::Consumed),
    // vLLM keeps the recurrent state in this dtype (models/config.py
    // Qwen3_5ForConditionalGenerationConfig).
    ("mamba_ssm_dtype", Grade::Consumed),
    // The config class turns it into `layer_types` when those are absent.
    ("full_attention_interval", Grade::Consumed),
    ("partial_rotary_factor", Grade::Numerics),
    // The gated DeltaNet's output-gate activation (vLLM `qwen_gdn_linear_attn.py` l.659,
    // "swish"): values, not shapes or state.
    ("output_gate_type", Grade::Numerics),
];

/// The wrapper's own keys (transformers `Qwen3_5Config` / `Qwen3_5MoeConfig`).
const WRAPPER_KEYS: &[(&str, Grade)] = &[
    // Qwen3.6's flag for serving the language model alone. What is counted is what is stored:
    // with the vision tower's tensors present it is counted (an upper bound if an engine skips
    // it), and a text-only export has none to count.
    ("language_model_only", Grade::Metadata),
];

/// The Qwen vision tower's config (transformers `Qwen3_5VisionConfig`, `Qwen3VLVisionConfig`).
/// Its size is counted from its stored tensors; these keys shape nothing the planner sizes.
pub(super) const VISION_KEYS: &[(&str, Grade)] = &[
    ("model_type", Grade::Metadata),
    ("depth", Grade::Metadata),
    ("hidden_size", Grade::Metadata),
    ("hidden_act", Grade::Numerics),
    ("intermediate_size", Grade::Metadata),
    ("num_heads", Grade::Metadata),
    ("in_channels", Grade::Metadata),
    ("patch_size", Grade::Metadata),
    ("spatial_merge_size", Grade::Metadata),
    ("temporal_patch_size", Grade::Metadata),
    ("out_hidden_size", Grade::Metadata),
    ("num_position_embeddings", Grade::Metadata),
    ("deepstack_visual_indexes", Grade::Metadata),
    ("initializer_range", Grade::TrainingOnly),
    ("rope_parameters", Grade::Numerics),
];

/// The ViT, and the mergers that project its output into the language model.
pub(super) const VISION: Encoder = Encoder {
    config_key: "vision_config",
    keys: VISION_KEYS,
    tensors: &[
        ("model.visual.merger.", Projector),
        ("model.visual.deepstack_merger_list.", Projector),
        ("model.visual.", Vision),
    ],
};

const GATED_DELTANET: &[TensorGroup] = &[
    group(
        "model.layers.N.linear_attn.{in_proj_qkv,in_proj_z,in_proj_a,in_proj_b,out_proj,conv1d}.weight",
        LinearAttention,
    ),
    group("model.layers.N.linear_attn.{A_log,dt_bias}", LinearAttention),
    group("model.layers.N.linear_attn.norm.weight", Norm),
];

const SPARSE_MOE: &[TensorGroup] = &[
    group("model.layers.N.mlp.gate.weight", Router),
    // Main layers store experts fused; the MTP layer stores them one by one.
    group("model.layers.N.mlp.experts.{gate_up_proj,down_proj}", Experts),
    group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
    group(
        "model.layers.N.mlp.shared_expert.{gate,up,down}_proj.weight",
        SharedExperts,
    ),
    group("model.layers.N.mlp.shared_expert_gate.weight", SharedExperts),
];

/// The MTP block's own tensors beside its decoder layer (vLLM `Qwen3_5MultiTokenPredictor`).
const MTP_TENSORS: &[TensorGroup] = &[group(
    "mtp.{fc,norm,pre_fc_norm_embedding,pre_fc_norm_hidden}.weight",
    Mtp,
)];

pub static FAMILY: Family = Family {
    name: "qwen3_5",
    model_types: &["qwen3_5_text"],
    architectures: &["Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"],
    keys: KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QK_NORM, GATED_DELTANET, GATED_MLP],
    mtp: Some(MtpLayout::Prefixed("mtp.", "model.")),
    mtp_tensors: MTP_TENSORS,
    normalize,
    wrappers: &[Wrapper {
        model_type: "qwen3_5",
        keys: WRAPPER_KEYS,
        encoders: &[VISION],
    }],
    gguf: Some(Gguf {
        architectures: &[("qwen35", "qwen3_5_text")],
        keys: GGUF_KEYS,
        tensors: GGUF_TENSORS,
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

pub static MOE_FAMILY: Family = Family {
    name: "qwen3_5_moe",
    model_types: &["qwen3_5_moe_text"],
    architectures: &["Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"],
    keys: KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QK_NORM, GATED_DELTANET, SPARSE_MOE],
    mtp: Some(MtpLayout::Prefixed("mtp.", "model.")),
    mtp_tensors: MTP_TENSORS,
    normalize,
    wrappers: &[Wrapper {
        model_type: "qwen3_5_moe",
        keys: WRAPPER_KEYS,
        encoders: &[VISION],
    }],
    gguf: Some(Gguf {
        architectures: &[("qwen35moe", "qwen3_5_moe_text")],
        keys: GGUF_KEYS,
        tensors: GGUF_TENSORS,
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

/// llama.cpp's `qwen35` / `qwen35moe` keys beyond the common ones, as its loader reads them
/// (llama-cpp-python 0.3.36 `src/models/qwen35.cpp` l.4-31, `qwen35moe.cpp`): the gated
/// DeltaNet's geometry under `ssm.*` and the attention layers' spacing.
const GGUF_KEYS: &[(&str, Grade)] = &[
    ("ssm.conv_kernel", Grade::Consumed),
    // The key head width (`head_k_dim`).
    ("ssm.state_size", Grade::Consumed),
    // Key heads (`num_k_heads`).
    ("ssm.group_count", Grade::Consumed),
    // Value heads (`num_v_heads`).
    ("ssm.time_step_rank", Grade::Consumed),
    // `head_v_dim × num_v_heads`.
    ("ssm.inner_size", Grade::Consumed),
    ("full_attention_interval", Grade::Consumed),
    // Which blocks are recurrent, one bool a block; read before `full_attention_interval`,
    // which it overrides (`qwen35.cpp` l.17-24, `qwen35moe.cpp` l.20-27). The converter writes it from
    // `layer_types` (conversion/qwen.py:382-388).
    ("attention.recurrent_layers", Grade::Consumed),
];

/// llama.cpp's names for the gated DeltaNet's tensors (`LLM_TENSOR_SSM_*`, `ATTN_QKV` and
/// `ATTN_GATE` on the linear layers: transformers' `in_proj_qkv`, `in_proj_z`).
const GGUF_TENSORS: &[TensorGroup] = &[
    group("blk.N.{attn_qkv,attn_gate}.weight", LinearAttention),
    group("blk.N.{ssm_conv1d,ssm_beta,ssm_alpha,ssm_out}.weight", LinearAttention),
    group("blk.N.ssm_dt.bias", LinearAttention),
    group("blk.N.ssm_a", LinearAttention),
    group("blk.N.ssm_norm.weight", Norm),
];

/// A `qwen35` GGUF: llama.cpp's hybrid — the blocks `attention.recurrent_layers` flags, else
/// all but every `full_attention_interval`-th, gated DeltaNet whose recurrent state llama.cpp
/// keeps in F32 (`llama_memory_recurrent`'s r/s buffers); the others gated softmax attention.
fn normalize_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (mut dims, kv_per_layer, v_head_dim) = llama_cpp::read_dims(kv)?;
    // `block_count` counts the MTP blocks the converter appends (its default, `_QwenMtpMixin`,
    // conversion/qwen.py:296-306, 346-351): the main stack is the first `block_count −
    // nextn_predict_layers` blocks (`n_layer()`), the rest MTP blocks that only an MTP context
    // loads (`load_block_mtp`, `TENSOR_SKIP` otherwise: qwen35moe.cpp l.41, 106-139).
    let nextn = kv.opt("nextn_predict_layers").unwrap_or(0);
    if nextn >= dims.layers {
        kv.unsupported(
            "nextn_predict_layers",
            "as many MTP blocks as blocks: an MTP-only GGUF has no model to plan",
        );
        return None;
    }
    let all_blocks = dims.layers;
    dims.layers -= nextn;
    let conv_kernel = kv.required("ssm.conv_kernel");
    let key_dim = kv.required("ssm.state_size");
    let key_heads = kv.required("ssm.group_count");
    let value_heads = kv.required("ssm.time_step_rank");
    let inner = kv.required("ssm.inner_size");
    let interval = kv.opt("full_attention_interval").unwrap_or(4).max(1);
    let recurrent = match kv.per_layer_flags("attention.recurrent_layers", all_blocks) {
        Some(flags) => flags,
        // An array of the wrong length or type was a finding already.
        None if kv.has("attention.recurrent_layers") => return None,
        None => (0..dims.layers).map(|i| (i + 1) % interval != 0).collect(),
    };
    let (conv_kernel, key_dim, key_heads, value_heads, inner) =
        (conv_kernel?, key_dim?, key_heads?, value_heads?, inner?);
    if !inner.is_multiple_of(value_heads) {
        kv.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            format!("{model_type}.ssm.inner_size"),
            inner,
            value_heads,
            "ssm.inner_size is not a whole number of value heads (ssm.time_step_rank)",
        );
        return None;
    }
    let linear = Mixer::LinearAttention {
        conv_dim: key_heads
            .saturating_mul(key_dim)
            .saturating_mul(2)
            .saturating_add(inner),
        conv_kernel,
        heads: value_heads,
        key_dim,
        value_dim: inner / value_heads,
        state_dtype: StateDtype::F32,
    };
    let layers = (0..dims.layers)
        .map(|i| match !recurrent[i as usize] {
            true => llama_cpp::attention(&dims, kv_per_layer.as_ref(), v_head_dim, i, Span::Full),
            false => linear,
        })
        .collect();
    let family = if model_type == "qwen3_5_moe_text" {
        MOE_FAMILY.name
    } else {
        FAMILY.name
    };
    let mut normalized = llama_cpp::finish(model_type, family, kv, &dims, layers);
    // An MTP block is a full-attention block with the main stack's geometry.
    normalized.model.mtp_mixer = Some(dims.attention(Span::Full));
    // The converter writes no `expert_shared_count`: a shared-expert width is the one shared
    // expert `build_layer_ffn` adds beside the routed ones (qwen35moe.cpp:515-542), counted at
    // the experts' width as the config path counts it. At another width the graph is not
    // replayed (the planner keeps one width for all experts).
    let shared_width = kv.opt("expert_shared_feed_forward_length").unwrap_or(0);
    let mut replayed = true;
    if let Some(moe) = normalized.model.moe.as_mut()
        && shared_width > 0
    {
        moe.shared = moe.shared.max(1);
        replayed = moe.expert_intermediate_size == Some(shared_width);
    }
    if replayed {
        normalized.model.llama_cpp_graph = Some(LlamaCppGraph::Qwen35);
    }
    // `attn_q` holds the queries and the output gate side by side (qwen35.cpp: `n_embd_head_k
    // × n_head × 2`).
    normalized.shapes.push(ShapeRule {
        pattern: "blk.N.attn_q.weight",
        dim: 1,
        value: dims.heads.saturating_mul(dims.head_dim).saturating_mul(2),
        keys: "2 × attention.head_count × key_length (queries and output gate)",
    });
    Some(normalized)
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    let is_moe = model_type == "qwen3_5_moe_text";
    let spans = layer_spans(cfg, dims.layers)?;
    let key_dim = cfg.u64("linear_key_head_dim");
    let value_dim = cfg.u64("linear_value_head_dim");
    let key_heads = cfg.u64("linear_num_key_heads");
    let value_heads = cfg.u64("linear_num_value_heads");
    let conv_kernel = cfg.u64("linear_conv_kernel_dim");
    let state_dtype = match cfg.opt_str("mamba_ssm_dtype") {
        None => StateDtype::Model,
        Some(name) => match StateDtype::from_torch(name) {
            Some(dtype) => dtype,
            None => {
                cfg.unsupported("mamba_ssm_dtype", "not a dtype the planner can size");
                return None;
            }
        },
    };
    let gate = cfg.opt_bool("attn_output_gate").unwrap_or(true);
    let mtp_layers = cfg.opt_layers("mtp_num_hidden_layers")?;
    if cfg.opt_bool("mtp_use_dedicated_embeddings") == Some(true) {
        cfg.unsupported(
            "mtp_use_dedicated_embeddings",
            "MTP layers with their own embeddings are not a layout the planner has seen",
        );
        return None;
    }
    let (key_dim, value_dim, key_heads, value_heads, conv_kernel) =
        (key_dim?, value_dim?, key_heads?, value_heads?, conv_kernel?);
    // transformers Qwen3_5GatedDeltaNet: conv_dim = key_dim × 2 + value_dim, over all heads.
    let conv_dim = key_heads
        .saturating_mul(key_dim)
        .saturating_mul(2)
        .saturating_add(value_heads.saturating_mul(value_dim));
    let linear = Mixer::LinearAttention {
        conv_dim,
        conv_kernel,
        heads: value_heads,
        key_dim,
        value_dim,
        state_dtype,
    };
    let layers = spans
        .iter()
        .map(|kind| match kind {
            Some(span) => dims.attention(*span),
            None => linear,
        })
        .collect();
    let moe = match is_moe {
        true => Some(read_moe(cfg, dims.layers)?),
        false => None,
    };
    let mut shapes = dims.base_shapes();
    // q_proj is replaced by the gated rule below.
    shapes.extend(
        dims.qkv_shapes()
            .into_iter()
            .filter(|r| r.pattern != "model.layers.N.self_attn.q_proj.weight"),
    );
    let q_rows = dims.heads.saturating_mul(dims.head_dim);
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.q_proj.weight",
            dim: 0,
            value: if gate { q_rows.saturating_mul(2) } else { q_rows },
            keys: "num_attention_heads × head_dim (× 2 with attn_output_gate)",
        },
        ShapeRule {
            pattern: "model.layers.N.linear_attn.in_proj_qkv.weight",
            dim: 0,
            value: conv_dim,
            keys: "2 × linear_num_key_heads × linear_key_head_dim + linear_num_value_heads × linear_value_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.linear_attn.in_proj_z.weight",
            dim: 0,
            value: value_heads.saturating_mul(value_dim),
            keys: "linear_num_value_heads × linear_value_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.linear_attn.in_proj_{a,b}.weight",
            dim: 0,
            value: value_heads,
            keys: "linear_num_value_heads",
        },
        ShapeRule {
            pattern: "model.layers.N.linear_attn.A_log",
            dim: 0,
            value: value_heads,
            keys: "linear_num_value_heads",
        },
    ]);
    if let Some(moe) = &moe {
        let width = moe.expert_intermediate_size.unwrap_or(0);
        shapes.extend([
            ShapeRule {
                pattern: "model.layers.N.mlp.gate.weight",
                dim: 0,
                value: moe.experts,
                keys: "num_experts",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.{gate_up_proj,down_proj}",
                dim: 0,
                value: moe.experts,
                keys: "num_experts",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.gate_up_proj",
                dim: 1,
                value: width.saturating_mul(2),
                keys: "2 × moe_intermediate_size",
            },
            ShapeRule {
                pattern: "model.layers.N.mlp.experts.down_proj",
                dim: 2,
                value: width,
                keys: "moe_intermediate_size",
            },
        ]);
    }
    let family = if is_moe { MOE_FAMILY.name } else { FAMILY.name };
    let mut model = dims.model(model_type, family, layers, moe);
    if is_moe {
        model.intermediate = None;
    }
    model.mtp_layers = mtp_layers;
    model.mtp_mixer = Some(dims.attention(Span::Full));
    model.mtp_first_index = 0;
    Some(Normalized { model, shapes })
}

/// Per layer: `Some(span)` for softmax attention, `None` for linear attention. From
/// `layer_types`, else every `full_attention_interval`-th layer full (the config class's
/// default when `layer_types` is absent).
fn layer_spans(cfg: &mut ConfigReader, layers: u64) -> Option<Vec<Option<Span>>> {
    let Some(types) = cfg.opt_str_list("layer_types") else {
        let interval = cfg.opt_u64("full_attention_interval").unwrap_or(4).max(1);
        return Some(
            (0..layers)
                .map(|i| ((i + 1) % interval == 0).then_some(Span::Full))
                .collect(),
        );
    };
    if types.len() as u64 != layers {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.text_config.layer_types",
            layers,
            types.len(),
            "layer_types must have one entry per layer (num_hidden_layers)",
        );
        return None;
    }
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        match t {
            "full_attention" => out.push(Some(Span::Full)),
            "linear_attention" => out.push(None),
            other => {
                cfg.unsupported(
                    "layer_types",
                    format!("layer type `{other}` is not one Qwen3.5 defines"),
                );
                return None;
            }
        }
    }
    Some(out)
}

/// Routed experts on every layer but `mlp_only_layers` (and off the `decoder_sparse_step`),
/// as vLLM places them; one shared expert per MoE layer.
fn read_moe(cfg: &mut ConfigReader, layers: u64) -> Option<Moe> {
    let experts = cfg.u64("num_experts");
    let active = cfg.u64("num_experts_per_tok");
    let width = cfg.opt_positive("moe_intermediate_size");
    let shared = cfg.opt_positive("shared_expert_intermediate_size");
    let step = cfg.opt_u64("decoder_sparse_step").unwrap_or(1).max(1);
    let mlp_only = cfg.opt_u64_list("mlp_only_layers").unwrap_or_default();
    Some(Moe {
        experts: experts?,
        active: active?,
        shared: u64::from(shared.is_some()),
        dense_layers: (0..layers)
            .filter(|i| mlp_only.contains(i) || (i + 1) % step != 0)
            .collect(),
        expert_intermediate_size: width,
    })
}
