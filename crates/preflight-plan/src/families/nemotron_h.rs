//! NVIDIA Nemotron-H (`nemotron_h`: Nemotron-H 8B/47B/56B, Nemotron-Nano-9B-v2, the
//! Nemotron-3 MoE hybrids): a stack of blocks, each one RMSNorm plus one mixer, the kind per
//! block from `hybrid_override_pattern` (or transformers 5's `layers_block_type`):
//! `M` Mamba2, `*` GQA attention, `-` an MLP (`up_proj`/`down_proj`, relu²), `E` a routed
//! MoE. MLP and MoE blocks mix no tokens: their layer kind is `none`.
//!
//! Tensors as the published checkpoints name them (`backbone.embeddings`,
//! `backbone.layers.N.mixer.*`, `backbone.norm_f`, `lm_head`); transformers renames
//! `backbone.` to `model.` on load, so `model.` is accepted too.
//!
//! Mamba state as vLLM 0.19.0 keeps it: conv state `(conv_kernel − 1) × conv_dim` with
//! `conv_dim = mamba_num_heads × mamba_head_dim + 2 × n_groups × ssm_state_size` in the model
//! dtype, SSM state `mamba_num_heads × mamba_head_dim × ssm_state_size`
//! (`mamba_utils.py` `mamba2_state_shape`) in `mamba_ssm_cache_dtype` — the config's, else
//! float16 (`model_executor/models/config.py` `NemotronHForCausalLMConfig`: vLLM's own
//! NemotronHConfig has no such field, so `getattr(hf_config, "mamba_ssm_cache_dtype",
//! "float16")` falls back).
//!
//! Grades cite transformers 5.24.0 (`configuration_nemotron_h.py`,
//! `modeling_nemotron_h.py`) and vLLM 0.19.0 (`nemotron_h.py`,
//! `transformers_utils/configs/nemotron_h.py`).
//!
//! GGUF form: llama.cpp's `nemotron_h` and `nemotron_h_moe` (one loader for both,
//! `llama_model_nemotron_h`; `_moe` reuses it, `src/models/models.h:1545-1549`), read from the
//! keys that loader reads; see [`normalize_gguf`].

use super::*;
use crate::model::{LlamaCppGraph, NemotronH, StateDtype};

const KEYS: &[(&str, Grade)] = &[
    ("hybrid_override_pattern", Grade::Consumed),
    ("layers_block_type", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    // Attention blocks.
    // NVIDIA's own config class (shipped through `auto_map`) names the head width so;
    // transformers' class defaults `head_dim` to the same 128. Read when `head_dim` is absent,
    // and the attention projections' shapes are checked against it.
    ("attention_head_dim", Grade::Consumed),
    ("attention_bias", Grade::Consumed),
    // transformers defines it and never reads it; a window would change the cache, so a
    // non-null value is refused.
    ("sliding_window", Grade::Consumed),
    // MLP blocks.
    ("mlp_bias", Grade::Consumed),
    ("mlp_hidden_act", Grade::Numerics),
    // Mamba2 blocks (and the legacy names `__post_init__` maps onto them).
    ("mamba_num_heads", Grade::Consumed),
    ("mamba_head_dim", Grade::Consumed),
    ("ssm_state_size", Grade::Consumed),
    ("n_groups", Grade::Consumed),
    ("mamba_n_groups", Grade::Consumed),
    ("conv_kernel", Grade::Consumed),
    ("mamba_d_conv", Grade::Consumed),
    ("use_conv_bias", Grade::Consumed),
    ("mamba_conv_bias", Grade::Consumed),
    ("use_bias", Grade::Consumed),
    ("mamba_proj_bias", Grade::Consumed),
    ("mamba_ssm_cache_dtype", Grade::Consumed),
    // The Mamba width is mamba_num_heads × mamba_head_dim in both references; `expand` is
    // defined and never read by modeling_nemotron_h.py.
    ("expand", Grade::Metadata),
    ("mamba_expand", Grade::Metadata),
    ("mamba_hidden_act", Grade::Numerics),
    ("chunk_size", Grade::Numerics),
    ("mamba_chunk_size", Grade::Numerics),
    ("use_mamba_kernels", Grade::Numerics),
    ("time_step_limit", Grade::Numerics),
    ("mamba_dt_limit", Grade::Numerics),
    // Initialisation of dt_bias only (NemotronHMamba2Mixer.init_nemotron_h_weights).
    ("time_step_min", Grade::TrainingOnly),
    ("time_step_max", Grade::TrainingOnly),
    ("time_step_floor", Grade::TrainingOnly),
    ("mamba_dt_min", Grade::TrainingOnly),
    ("mamba_dt_max", Grade::TrainingOnly),
    ("mamba_dt_init_floor", Grade::TrainingOnly),
    // MoE blocks.
    ("n_routed_experts", Grade::Consumed),
    ("num_local_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("moe_intermediate_size", Grade::Consumed),
    ("moe_shared_expert_intermediate_size", Grade::Consumed),
    ("moe_latent_size", Grade::Consumed),
    ("moe_shared_expert_overlap", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
    ("n_group", Grade::Numerics),
    ("topk_group", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    // MTP: `num_nextn_predict_layers` steps, each the blocks `mtp_layers_block_type` names.
    ("num_nextn_predict_layers", Grade::Consumed),
    ("mtp_layers_block_type", Grade::Consumed),
    ("mtp_hybrid_override_pattern", Grade::Consumed),
    ("layer_norm_epsilon", Grade::Numerics),
    ("residual_in_fp32", Grade::Numerics),
    ("num_logits_to_keep", Grade::Generation),
    ("rescale_prenorm_residual", Grade::TrainingOnly),
    // Nemotron-3 configs carry these; NemotronHConfig defines neither and neither
    // modeling_nemotron_h.py nor vLLM's nemotron_h.py / nemotron_h_mtp.py reads them (the
    // norms use `layer_norm_epsilon`; the attention blocks build no rope).
    ("norm_eps", Grade::Ignored),
    ("partial_rotary_factor", Grade::Ignored),
    ("rope_theta", Grade::Ignored),
];

pub static FAMILY: Family = Family {
    name: "nemotron_h",
    model_types: &["nemotron_h"],
    architectures: &["NemotronHForCausalLM"],
    keys: KEYS,
    tensors: &[&[
        group("{backbone,model}.embeddings.weight", Embedding),
        group("{backbone,model}.norm_f.weight", Norm),
        group("lm_head.weight", LmHead),
        group("{backbone,model}.layers.N.norm.weight", Norm),
        // Attention blocks.
        group(
            "{backbone,model}.layers.N.mixer.{q,k,v,o}_proj.{weight,bias}",
            Attention,
        ),
        // Mamba2 blocks.
        group(
            "{backbone,model}.layers.N.mixer.{in_proj,out_proj,conv1d}.{weight,bias}",
            Mamba,
        ),
        group("{backbone,model}.layers.N.mixer.{A_log,D,dt_bias}", Mamba),
        group("{backbone,model}.layers.N.mixer.norm.weight", Norm),
        // MLP blocks.
        group("{backbone,model}.layers.N.mixer.{up,down}_proj.{weight,bias}", Mlp),
        // MoE blocks: experts per expert as published, or fused as transformers holds them.
        group(
            "{backbone,model}.layers.N.mixer.experts.N.{up,down}_proj.weight",
            Experts,
        ),
        group("{backbone,model}.layers.N.mixer.experts.{up,down}_proj", Experts),
        group("{backbone,model}.layers.N.mixer.gate.weight", Router),
        group("{backbone,model}.layers.N.mixer.gate.e_score_correction_bias", Buffer),
        group(
            "{backbone,model}.layers.N.mixer.shared_experts.{up,down}_proj.{weight,bias}",
            SharedExperts,
        ),
        group(
            "{backbone,model}.layers.N.mixer.{fc1,fc2}_latent_proj.{weight,bias}",
            Mlp,
        ),
    ]],
    mtp: Some(MtpLayout::Prefixed("mtp.", "model.")),
    // The MTP step's own tensors: its input projections on the first block, its final norm
    // on the last (vLLM nemotron_h_mtp.py `has_start_projections`, `has_end_norm`).
    mtp_tensors: &[group(
        "model.layers.N.{eh_proj,enorm,hnorm,final_layernorm}.weight",
        Mtp,
    )],
    normalize,
    gguf: Some(Gguf {
        // `llm_arch_name` (llama-arch.cpp:94-95). Both are the transformers `nemotron_h`: the
        // converter picks `_moe` when the config has `num_experts_per_tok`
        // (conversion/nemotron.py:221-227).
        architectures: &[("nemotron_h", "nemotron_h"), ("nemotron_h_moe", "nemotron_h")],
        keys: GGUF_KEYS,
        tensors: GGUF_TENSORS,
        normalize: normalize_gguf,
    }),
    ..Family::BASE
};

/// Keys under `<arch>.` beyond llama.cpp's common ones that `load_arch_hparams` reads
/// (llama-cpp-python 0.3.36 `src/models/nemotron-h.cpp:5-47`).
const GGUF_KEYS: &[(&str, Grade)] = &[
    // `ssm_d_conv`, `ssm_d_inner` (Mamba heads × head width), `ssm_d_state`, `ssm_dt_rank`
    // (the Mamba heads: the converter writes `mamba_num_heads` there,
    // conversion/granite.py:501-503), `ssm_n_group` (l.6-10).
    ("ssm.conv_kernel", Grade::Consumed),
    ("ssm.inner_size", Grade::Consumed),
    ("ssm.state_size", Grade::Consumed),
    ("ssm.time_step_rank", Grade::Consumed),
    ("ssm.group_count", Grade::Consumed),
    // The routed experts' width over `moe_latent_size` instead of the hidden size (l.29, 64).
    ("moe_latent_size", Grade::Consumed),
];

/// llama.cpp's names for the Mamba2 blocks' tensors (`LLM_TENSOR_SSM_*`, llama-arch.cpp), the
/// routed experts' latent projections and the MTP block's own (`LLM_TENSOR_NEXTN_*`).
const GGUF_TENSORS: &[TensorGroup] = &[
    group("blk.N.{ssm_in,ssm_conv1d,ssm_out}.weight", Mamba),
    group("blk.N.{ssm_conv1d,ssm_dt}.bias", Mamba),
    group("blk.N.{ssm_a,ssm_d}", Mamba),
    group("blk.N.ssm_norm.weight", Norm),
    group("blk.N.{ffn_latent_down,ffn_latent_up}.weight", Mlp),
];

/// A `nemotron_h` / `nemotron_h_moe` GGUF, as `llama_model_nemotron_h` reads it
/// (llama-cpp-python 0.3.36, `src/models/nemotron-h.cpp`). Each block's kind is not a key of
/// its own: it follows from the per-block `attention.head_count_kv` and
/// `feed_forward_length` arrays (`load_hparams`, llama-model.cpp:1387-1396), as the converter
/// writes them (0 where a block has no attention, 0 where it has no MLP:
/// conversion/granite.py:505-512, conversion/nemotron.py:336-346):
/// - recurrent (Mamba2) when both are 0 (`is_recr_impl`, nemotron-h.cpp:12-16);
/// - attention when only `feed_forward_length` is 0 (l.102);
/// - else a feed-forward block: routed experts with a shared expert when `expert_count` is
///   set, a dense relu² MLP when not (l.111-136). Neither mixes tokens: kind `none`.
///
/// Memory is llama.cpp's hybrid (`llama_memory_hybrid`, llama-model.cpp:2691-2697 and
/// 2756-2773): a KV cache for the attention blocks, and for the Mamba2 blocks r/s rows in F32
/// of `(ssm_d_conv − 1) × (ssm_d_inner + 2 × ssm_n_group × ssm_d_state)` conv and
/// `ssm_d_state × ssm_d_inner` state elements (`n_embd_r`/`n_embd_s`, llama-hparams.cpp:229,
/// 257; `llama_memory_recurrent`, llama-memory-recurrent.cpp:101-103), one row a sequence.
fn normalize_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (mut dims, per_layer, v_head_dim) = llama_cpp::read_dims_per_layer(kv)?;
    let layers = dims.layers as usize;
    // An array of the wrong length was a finding already; absent, llama.cpp's defaults:
    // `n_head_kv` as `n_head`, `n_ff` 0 (llama-model.cpp:1378-1394).
    let kv_heads = match per_layer.kv_heads {
        Some(v) => v,
        None if kv.has("attention.head_count_kv") => return None,
        None => vec![dims.heads; layers],
    };
    let ffn = match per_layer.ffn {
        Some(v) => v,
        None if kv.has("feed_forward_length") => return None,
        None => vec![0; layers],
    };
    // The graph asserts one head width for K and V (nemotron-h.cpp:190-191).
    if v_head_dim != dims.head_dim {
        kv.unsupported(
            "attention.value_length",
            "llama.cpp's nemotron_h graph asserts value_length == key_length",
        );
        return None;
    }
    // The MTP block is a separate context's (`graph_mtp`, nemotron-h-moe.cpp) and its own
    // KV cache; not modelled.
    if kv.opt("nextn_predict_layers").unwrap_or(0) > 0 {
        kv.unsupported(
            "nextn_predict_layers",
            "a Nemotron-H GGUF with an MTP block (a trailing nextn block): not modelled",
        );
        return None;
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Mamba,
        Attention,
        Ffn,
    }
    let blocks: Vec<Kind> = (0..layers)
        .map(|i| match (kv_heads[i], ffn[i]) {
            (0, 0) => Kind::Mamba,
            (_, 0) => Kind::Attention,
            _ => Kind::Ffn,
        })
        .collect();
    let has = |kind: Kind| blocks.contains(&kind);
    let mut shapes = Vec::new();
    let mamba = match has(Kind::Mamba) {
        true => Some(read_gguf_mamba(kv, dims.hidden, &mut shapes)?),
        false => None,
    };
    let experts = kv.opt("expert_count").unwrap_or(0);
    let ffn_layers: Vec<usize> = (0..layers).filter(|i| blocks[*i] == Kind::Ffn).collect();
    let moe = match experts > 0 && !ffn_layers.is_empty() {
        true => Some(read_gguf_moe(kv, &dims, &ffn, &ffn_layers, &mut shapes)?),
        false => None,
    };
    let mixers = blocks
        .iter()
        .zip(&kv_heads)
        .map(|(block, kv_heads)| match block {
            Kind::Mamba => mamba.unwrap_or(Mixer::None),
            Kind::Attention => Mixer::Attention {
                kv_heads: *kv_heads,
                head_dim: dims.head_dim,
                v_head_dim,
                span: Span::Full,
                shared_kv: false,
            },
            Kind::Ffn => Mixer::None,
        })
        .collect();
    // The dense MLP's width: the widest MLP block (a MoE model has none).
    dims.intermediate = match moe {
        Some(_) => None,
        None => ffn_layers.iter().map(|i| ffn[*i]).max(),
    };
    let mut model = dims.model(model_type, FAMILY.name, mixers, moe);
    let attention: Vec<u64> = (0..layers)
        .filter(|i| blocks[*i] == Kind::Attention)
        .map(|i| kv_heads[i])
        .collect();
    let dense: Vec<u64> = match experts {
        0 => ffn_layers.iter().map(|i| ffn[*i]).collect(),
        _ => Vec::new(),
    };
    // The graph is replayed over one attention geometry and one MLP width, as the shape
    // holds them; models whose blocks differ keep the estimate.
    if attention.windows(2).all(|w| w[0] == w[1]) && dense.windows(2).all(|w| w[0] == w[1]) {
        model.llama_cpp_graph = llama_cpp_graph(kv);
    }
    Some(Normalized { model, shapes })
}

/// llama.cpp's graph for these blocks: the Mamba2 dimensions and the MoE options
/// `nemotron-h.cpp` builds with (l.6-10, 24-29). Expert groups (`expert_group_count` > 1)
/// would add group selection to the routing (llama-graph.cpp:2097-2118): not replayed.
fn llama_cpp_graph(kv: &GgufReader) -> Option<LlamaCppGraph> {
    let routing = llama_cpp::read_routing(kv).filter(|r| r.groups < 2)?;
    Some(LlamaCppGraph::NemotronH(NemotronH {
        conv_kernel: kv.opt("ssm.conv_kernel").unwrap_or(0),
        inner: kv.opt("ssm.inner_size").unwrap_or(0),
        state: kv.opt("ssm.state_size").unwrap_or(0),
        heads: kv.opt("ssm.time_step_rank").unwrap_or(0),
        groups: kv.opt("ssm.group_count").unwrap_or(0),
        shared_width: kv.opt("expert_shared_feed_forward_length").unwrap_or(0),
        latent: kv.opt("moe_latent_size").unwrap_or(0),
        routing,
    }))
}

/// The Mamba2 blocks' geometry from `ssm.*`, and the shapes it gives their tensors
/// (GGUF order, innermost first: nemotron-h.cpp:60-101).
fn read_gguf_mamba(kv: &mut GgufReader, hidden: u64, shapes: &mut Vec<ShapeRule>) -> Option<Mixer> {
    let conv_kernel = kv.required("ssm.conv_kernel");
    let inner = kv.required("ssm.inner_size");
    let state = kv.required("ssm.state_size");
    let heads = kv.required("ssm.time_step_rank");
    let groups = kv.required("ssm.group_count");
    let (conv_kernel, inner, state, heads, groups) = (conv_kernel?, inner?, state?, heads?, groups?);
    // `build_mamba2_layer` asserts both (mamba-base.cpp:177-178).
    for (key, divisor) in [("ssm.time_step_rank", heads), ("ssm.group_count", groups)] {
        if !inner.is_multiple_of(divisor) {
            kv.unsupported(
                key,
                format!("ssm.inner_size ({inner}) is not a multiple of it: llama.cpp's Mamba2 layer asserts it is"),
            );
            return None;
        }
    }
    let conv_dim = inner.saturating_add(groups.saturating_mul(state).saturating_mul(2));
    shapes.extend([
        ShapeRule {
            pattern: "blk.N.ssm_in.weight",
            dim: 0,
            value: hidden,
            keys: "embedding_length",
        },
        ShapeRule {
            pattern: "blk.N.ssm_in.weight",
            dim: 1,
            value: inner
                .saturating_mul(2)
                .saturating_add(conv_dim - inner)
                .saturating_add(heads),
            keys: "2 × ssm.inner_size + 2 × ssm.group_count × ssm.state_size + ssm.time_step_rank",
        },
        ShapeRule {
            pattern: "blk.N.ssm_conv1d.weight",
            dim: 0,
            value: conv_kernel,
            keys: "ssm.conv_kernel",
        },
        ShapeRule {
            pattern: "blk.N.ssm_conv1d.weight",
            dim: 1,
            value: conv_dim,
            keys: "ssm.inner_size + 2 × ssm.group_count × ssm.state_size",
        },
        ShapeRule {
            pattern: "blk.N.ssm_conv1d.bias",
            dim: 0,
            value: conv_dim,
            keys: "ssm.inner_size + 2 × ssm.group_count × ssm.state_size",
        },
        ShapeRule {
            pattern: "blk.N.ssm_dt.bias",
            dim: 0,
            value: heads,
            keys: "ssm.time_step_rank",
        },
        ShapeRule {
            pattern: "blk.N.{ssm_a,ssm_d}",
            dim: 0,
            value: 1,
            keys: "1 (one value a head)",
        },
        ShapeRule {
            pattern: "blk.N.{ssm_a,ssm_d}",
            dim: 1,
            value: heads,
            keys: "ssm.time_step_rank",
        },
        ShapeRule {
            pattern: "blk.N.ssm_norm.weight",
            dim: 0,
            value: inner / groups,
            keys: "ssm.inner_size / ssm.group_count",
        },
        ShapeRule {
            pattern: "blk.N.ssm_norm.weight",
            dim: 1,
            value: groups,
            keys: "ssm.group_count",
        },
        ShapeRule {
            pattern: "blk.N.ssm_out.weight",
            dim: 0,
            value: inner,
            keys: "ssm.inner_size",
        },
        ShapeRule {
            pattern: "blk.N.ssm_out.weight",
            dim: 1,
            value: hidden,
            keys: "embedding_length",
        },
    ]);
    Some(Mixer::Mamba {
        conv_dim,
        conv_kernel,
        heads,
        head_dim: inner / heads,
        state_size: state,
        // llama.cpp's r/s rows (llama-model.cpp:2765-2766).
        state_dtype: StateDtype::F32,
    })
}

/// The routed experts of the feed-forward blocks (nemotron-h.cpp:111-130): top-k and the
/// expert width per block (`get_key_or_arr`: one value, or one per block), the shared expert's
/// width, and the latent the experts run over when `moe_latent_size` is set. Per-block top-k or
/// widths that differ (NVIDIA's Puzzle models) are refused: one expert shape is modelled.
fn read_gguf_moe(
    kv: &mut GgufReader,
    dims: &Dims,
    ffn: &[u64],
    ffn_layers: &[usize],
    shapes: &mut Vec<ShapeRule>,
) -> Option<Moe> {
    let layers = dims.layers;
    let experts = kv.opt("expert_count").unwrap_or(0);
    let uniform = |kv: &mut GgufReader, key: &str, per_block: Option<Vec<u64>>| -> Option<Option<u64>> {
        let Some(values) = per_block else {
            return match kv.has(key) {
                true => None,
                false => Some(None),
            };
        };
        let mut seen = ffn_layers.iter().map(|i| values[*i]);
        let first = seen.next();
        if seen.any(|v| Some(v) != first) {
            kv.unsupported(
                key,
                "differs between the MoE blocks: one expert shape a model is modelled",
            );
            return None;
        }
        Some(first)
    };
    let used = kv.per_layer("expert_used_count", layers);
    let active = uniform(kv, "expert_used_count", used)?;
    let width = kv.per_layer("expert_feed_forward_length", layers);
    let width = uniform(kv, "expert_feed_forward_length", width)?;
    let Some(active) = active.filter(|n| *n > 0) else {
        match kv.has("expert_used_count") {
            true => kv.unsupported("expert_used_count", "MoE blocks that use no expert"),
            false => _ = kv.required("expert_used_count"),
        }
        return None;
    };
    // Without `expert_feed_forward_length`, llama.cpp takes `n_ff / n_expert_used` (l.113-115).
    let width = match width {
        Some(width) if width > 0 => width,
        _ => {
            let fallback = uniform(kv, "feed_forward_length", Some(ffn.to_vec()))?.unwrap_or(0);
            fallback / active
        }
    };
    let shared_width = kv.opt("expert_shared_feed_forward_length").unwrap_or(0);
    let latent = kv.opt("moe_latent_size").filter(|n| *n > 0).unwrap_or(dims.hidden);
    shapes.extend([
        ShapeRule {
            pattern: "blk.N.ffn_up_exps.weight",
            dim: 0,
            value: latent,
            keys: "moe_latent_size, else embedding_length",
        },
        ShapeRule {
            pattern: "blk.N.ffn_down_exps.weight",
            dim: 1,
            value: latent,
            keys: "moe_latent_size, else embedding_length",
        },
        ShapeRule {
            pattern: "blk.N.exp_probs_b.bias",
            dim: 0,
            value: experts,
            keys: "expert_count",
        },
        ShapeRule {
            pattern: "blk.N.ffn_up_shexp.weight",
            dim: 0,
            value: dims.hidden,
            keys: "embedding_length",
        },
        ShapeRule {
            pattern: "blk.N.ffn_up_shexp.weight",
            dim: 1,
            value: shared_width,
            keys: "expert_shared_feed_forward_length",
        },
        ShapeRule {
            pattern: "blk.N.ffn_down_shexp.weight",
            dim: 0,
            value: shared_width,
            keys: "expert_shared_feed_forward_length",
        },
        ShapeRule {
            pattern: "blk.N.ffn_down_shexp.weight",
            dim: 1,
            value: dims.hidden,
            keys: "embedding_length",
        },
        ShapeRule {
            pattern: "blk.N.ffn_latent_down.weight",
            dim: 1,
            value: latent,
            keys: "moe_latent_size",
        },
        ShapeRule {
            pattern: "blk.N.ffn_latent_up.weight",
            dim: 0,
            value: latent,
            keys: "moe_latent_size",
        },
    ]);
    Some(Moe {
        experts,
        active,
        // The graph builds one shared-expert branch in every MoE block (l.324-332).
        shared: kv.opt("expert_shared_count").unwrap_or(1),
        dense_layers: (0..layers).filter(|i| !ffn_layers.contains(&(*i as usize))).collect(),
        expert_intermediate_size: Some(width),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Mamba,
    Attention,
    Mlp,
    Moe,
}

/// The block kinds: `layers_block_type` (or its alias `layer_types`), else
/// `hybrid_override_pattern` (transformers `NemotronHConfig._pattern_to_list`).
fn blocks(cfg: &mut ConfigReader) -> Option<Vec<Block>> {
    let key = ["layers_block_type", "layer_types"]
        .into_iter()
        .find(|k| cfg.value(k).is_some());
    if let Some(key) = key {
        let list = cfg.opt_str_list(key)?;
        let mut out = Vec::with_capacity(list.len());
        for entry in list {
            out.push(match entry {
                "linear_attention" | "mamba" => Block::Mamba,
                "full_attention" | "attention" => Block::Attention,
                "mlp" => Block::Mlp,
                "moe" => Block::Moe,
                other => {
                    cfg.unsupported(key, format!("block type `{other}` is not one NemotronH builds"));
                    return None;
                }
            });
        }
        return Some(out);
    }
    let Some(pattern) = cfg.opt_str("hybrid_override_pattern") else {
        cfg.missing("hybrid_override_pattern");
        return None;
    };
    let mut out = Vec::with_capacity(pattern.len());
    for c in pattern.chars() {
        out.push(match c {
            'M' => Block::Mamba,
            '*' => Block::Attention,
            '-' => Block::Mlp,
            'E' => Block::Moe,
            other => {
                cfg.unsupported(
                    "hybrid_override_pattern",
                    format!("`{other}` is none of M (Mamba2), * (attention), - (MLP), E (MoE)"),
                );
                return None;
            }
        });
    }
    Some(out)
}

/// The first of `keys` the config declares, as a required positive integer; `default`
/// (the class's) when none is.
fn either(cfg: &mut ConfigReader, keys: &[&str], default: Option<u64>) -> Option<u64> {
    match keys.iter().find(|k| cfg.value(k).is_some()) {
        Some(key) => cfg.u64(key),
        None => {
            if default.is_none() {
                cfg.missing(keys[0]);
            }
            default
        }
    }
}

fn normalize(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let blocks = blocks(cfg)?;
    if blocks.is_empty() || blocks.len() as u64 > crate::config::MAX_LAYERS {
        cfg.unsupported(
            "hybrid_override_pattern",
            "the block pattern must name 1 to 4096 blocks",
        );
        return None;
    }
    let layers = blocks.len() as u64;
    // vLLM builds `num_hidden_layers` blocks from the pattern; a disagreement is a broken config.
    if let Some(declared) = cfg.opt_u64("num_hidden_layers")
        && declared != layers
    {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            "config.num_hidden_layers",
            declared,
            layers,
            "num_hidden_layers differs from the blocks hybrid_override_pattern names",
        );
        return None;
    }
    let mtp_attention = mtp_attention_blocks(cfg)?;
    if cfg.value("sliding_window").is_some() {
        cfg.unsupported("sliding_window", "Nemotron-H attention with a window is not modelled");
        return None;
    }
    let has = |kind: Block| blocks.contains(&kind);
    let hidden = cfg.u64("hidden_size");
    let vocab = cfg.u64("vocab_size");
    let context = cfg.u64("max_position_embeddings");
    let tie = cfg.opt_bool("tie_word_embeddings").unwrap_or(false);
    let dtype = cfg
        .opt_str("torch_dtype")
        .or_else(|| cfg.opt_str("dtype"))
        .map(str::to_owned);
    // Attention geometry (needed only when there are attention blocks).
    let heads = cfg.u64("num_attention_heads");
    let kv_heads = either(cfg, &["num_key_value_heads"], heads);
    let head_dim = either(cfg, &["head_dim", "attention_head_dim"], Some(128));
    let intermediate = match has(Block::Mlp) {
        true => Some(cfg.u64("intermediate_size")?),
        false => cfg.opt_positive("intermediate_size"),
    };
    let dims = Dims {
        layers,
        hidden: hidden?,
        heads: heads?,
        kv_heads: kv_heads?,
        head_dim: head_dim?,
        vocab: vocab?,
        context: context?,
        tie,
        dtype,
        intermediate,
        // Nemotron-H's attention layers have no positional embedding (vLLM 0.19
        // `nemotron_h.py` builds no rope).
        rope: Vec::new(),
    };
    if !dims.heads.is_multiple_of(dims.kv_heads) {
        cfg.unsupported(
            "num_key_value_heads",
            "num_attention_heads is not a multiple of num_key_value_heads",
        );
        return None;
    }
    let mut shapes = vec![
        ShapeRule {
            pattern: "{backbone,model}.embeddings.weight",
            dim: 0,
            value: dims.vocab,
            keys: "vocab_size",
        },
        ShapeRule {
            pattern: "{backbone,model}.embeddings.weight",
            dim: 1,
            value: dims.hidden,
            keys: "hidden_size",
        },
        ShapeRule {
            pattern: "lm_head.weight",
            dim: 0,
            value: dims.vocab,
            keys: "vocab_size",
        },
        ShapeRule {
            pattern: "lm_head.weight",
            dim: 1,
            value: dims.hidden,
            keys: "hidden_size",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.q_proj.weight",
            dim: 0,
            value: dims.heads.saturating_mul(dims.head_dim),
            keys: "num_attention_heads × head_dim",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.{k,v}_proj.weight",
            dim: 0,
            value: dims.kv_heads.saturating_mul(dims.head_dim),
            keys: "num_key_value_heads × head_dim",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.o_proj.weight",
            dim: 1,
            value: dims.heads.saturating_mul(dims.head_dim),
            keys: "num_attention_heads × head_dim",
        },
    ];
    if let Some(width) = intermediate.filter(|_| has(Block::Mlp)) {
        shapes.push(ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.up_proj.weight",
            dim: 0,
            value: width,
            keys: "intermediate_size",
        });
    }
    let mamba = match has(Block::Mamba) {
        true => Some(read_mamba(cfg, &mut shapes)?),
        false => None,
    };
    let moe = match has(Block::Moe) {
        true => Some(read_moe(cfg, &blocks, &mut shapes)?),
        false => None,
    };
    let mixers = blocks
        .iter()
        .map(|b| match b {
            Block::Mamba => mamba.unwrap_or(Mixer::None),
            Block::Attention => dims.attention(Span::Full),
            Block::Mlp | Block::Moe => Mixer::None,
        })
        .collect();
    let mut model = dims.model(model_type, FAMILY.name, mixers, moe);
    if !has(Block::Mlp) {
        model.intermediate = None;
    }
    // Each MTP attention block is one more full-attention layer in the cache; its MoE
    // blocks cache nothing.
    model.mtp_layers = mtp_attention;
    model.mtp_mixer = Some(dims.attention(Span::Full));
    model.mtp_first_index = 0;
    Some(Normalized { model, shapes })
}

/// MTP attention blocks in all: `num_nextn_predict_layers` steps of the blocks
/// `mtp_layers_block_type` (or the legacy `mtp_hybrid_override_pattern`) names. vLLM
/// 0.19's nemotron_h_mtp.py builds attention (`*`) and MoE (`E`) blocks only, and one step.
fn mtp_attention_blocks(cfg: &mut ConfigReader) -> Option<u64> {
    let steps = cfg.opt_layers("num_nextn_predict_layers")?;
    if steps == 0 {
        return Some(0);
    }
    let kinds: Vec<String> = match cfg.opt_str_list("mtp_layers_block_type") {
        Some(list) => list.into_iter().map(str::to_owned).collect(),
        None => match cfg.opt_str("mtp_hybrid_override_pattern") {
            Some(pattern) => pattern.chars().map(String::from).collect(),
            // NemotronHConfig's default.
            None => vec!["attention".into(), "moe".into()],
        },
    };
    let mut attention = 0u64;
    for kind in &kinds {
        match kind.as_str() {
            "attention" | "full_attention" | "*" => attention += 1,
            "moe" | "E" => {}
            other => {
                cfg.unsupported(
                    "mtp_layers_block_type",
                    format!("MTP block type `{other}` is not one vLLM's Nemotron-H MTP builds (attention, moe)"),
                );
                return None;
            }
        }
    }
    if steps != 1 || kinds.is_empty() {
        cfg.unsupported(
            "num_nextn_predict_layers",
            "vLLM's Nemotron-H MTP builds exactly one step of a non-empty block pattern",
        );
        return None;
    }
    Some(steps.saturating_mul(attention))
}

/// The Mamba2 mixer's geometry and the shapes it implies.
fn read_mamba(cfg: &mut ConfigReader, shapes: &mut Vec<ShapeRule>) -> Option<Mixer> {
    let heads = cfg.u64("mamba_num_heads");
    let head_dim = cfg.u64("mamba_head_dim");
    let state_size = cfg.u64("ssm_state_size");
    let groups = either(cfg, &["n_groups", "mamba_n_groups"], Some(8));
    let conv_kernel = either(cfg, &["conv_kernel", "mamba_d_conv"], Some(4));
    // vLLM NemotronHForCausalLMConfig: the config's mamba_ssm_cache_dtype, else float16.
    let state_dtype = match cfg.opt_str("mamba_ssm_cache_dtype") {
        None => StateDtype::F16,
        Some(name) => match StateDtype::from_torch(name) {
            Some(dtype) => dtype,
            None => {
                cfg.unsupported(
                    "mamba_ssm_cache_dtype",
                    "not float32, bfloat16 or float16: a state dtype the planner cannot size",
                );
                return None;
            }
        },
    };
    let (heads, head_dim, state_size, groups, conv_kernel) = (heads?, head_dim?, state_size?, groups?, conv_kernel?);
    let inner = heads.saturating_mul(head_dim);
    let conv_dim = inner.saturating_add(groups.saturating_mul(state_size).saturating_mul(2));
    shapes.extend([
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.in_proj.weight",
            dim: 0,
            value: inner.saturating_add(conv_dim).saturating_add(heads),
            keys: "2 × mamba_num_heads × mamba_head_dim + 2 × n_groups × ssm_state_size + mamba_num_heads",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.conv1d.weight",
            dim: 0,
            value: conv_dim,
            keys: "mamba_num_heads × mamba_head_dim + 2 × n_groups × ssm_state_size",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.conv1d.weight",
            dim: 2,
            value: conv_kernel,
            keys: "conv_kernel",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.out_proj.weight",
            dim: 1,
            value: inner,
            keys: "mamba_num_heads × mamba_head_dim",
        },
        ShapeRule {
            pattern: "{backbone,model}.layers.N.mixer.{A_log,D,dt_bias}",
            dim: 0,
            value: heads,
            keys: "mamba_num_heads",
        },
    ]);
    Some(Mixer::Mamba {
        conv_dim,
        conv_kernel,
        heads,
        head_dim,
        state_size,
        state_dtype,
    })
}

/// The MoE blocks: every non-`E` block counts as "dense" for the expert-layer check.
fn read_moe(cfg: &mut ConfigReader, blocks: &[Block], shapes: &mut Vec<ShapeRule>) -> Option<Moe> {
    let experts = either(cfg, &["n_routed_experts", "num_local_experts"], None);
    let active = cfg.u64("num_experts_per_tok");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(1);
    let width = cfg.opt_positive("moe_intermediate_size");
    let experts = experts?;
    shapes.push(ShapeRule {
        pattern: "{backbone,model}.layers.N.mixer.gate.weight",
        dim: 0,
        value: experts,
        keys: "n_routed_experts",
    });
    Some(Moe {
        experts,
        active: active?,
        shared,
        dense_layers: (0..blocks.len() as u64)
            .filter(|i| blocks[*i as usize] != Block::Moe)
            .collect(),
        expert_intermediate_size: width,
    })
}
