//! Zhipu's GLM MoE checkpoints.
//!
//! - `glm4_moe` (GLM-4.5, GLM-4.5-Air, GLM-4.6): GQA attention with q/k/v biases, partial
//!   rotary and an optional QK-norm; dense MLPs in the first `first_k_dense_replace` layers,
//!   then routed experts with shared experts and a sigmoid router whose
//!   `e_score_correction_bias` is a buffer; `num_nextn_predict_layers` MTP layers appended
//!   as `model.layers.N` with DeepSeek's `nextn` tensors (`enorm`, `hnorm`, `eh_proj`,
//!   `shared_head.*`, `embed_tokens`).
//! - `glm_moe_dsa` (GLM-5.x): DeepSeek's MLA with a DSA sparse-attention indexer. Per
//!   `indexer_types`, a `full` layer owns an indexer (and its key cache); a `shared` layer
//!   reuses the previous full layer's top-k and has neither (transformers
//!   `GlmMoeDsaAttention.__init__`: `indexer = None if indexer_types[i] == "shared"`).
//!   `mlp_layer_types` says which layers are dense. MTP appended as DeepSeek does.
//!
//! Grades cite transformers 5.24.0 (`configuration_glm4_moe.py` / `modeling_glm4_moe.py`,
//! `configuration_glm_moe_dsa.py` / `modeling_glm_moe_dsa.py`) and vLLM 0.19.0
//! (`glm4_moe.py`; `deepseek_v2.py`, which serves `GlmMoeDsaForCausalLM`).

use super::*;
use crate::model::Glm4MoeGraph;

/// transformers `Glm4MoeConfig` fields, and the keys its modeling or vLLM's `glm4_moe.py`
/// reads.
const GLM4_MOE_KEYS: &[(&str, Grade)] = &[
    ("moe_intermediate_size", Grade::Consumed),
    // Not a class field, but modeling reads `getattr(config, "head_dim", …)`.
    ("attention_bias", Grade::Consumed),
    ("use_qk_norm", Grade::Consumed),
    ("n_routed_experts", Grade::Consumed),
    // attribute_map alias of n_routed_experts.
    ("num_local_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("first_k_dense_replace", Grade::Consumed),
    ("num_nextn_predict_layers", Grade::Consumed),
    // attribute_map alias of num_nextn_predict_layers.
    ("num_mtp_layers", Grade::Consumed),
    ("partial_rotary_factor", Grade::Numerics),
    ("n_group", Grade::Numerics),
    ("topk_group", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
];

/// transformers `GlmMoeDsaConfig` fields, the schedule keys its `__post_init__` reads, and
/// what vLLM's `deepseek_v2.py` reads for `GlmMoeDsaForCausalLM`.
const GLM_MOE_DSA_KEYS: &[(&str, Grade)] = &[
    ("moe_intermediate_size", Grade::Consumed),
    ("attention_bias", Grade::Consumed),
    ("q_lora_rank", Grade::Consumed),
    ("kv_lora_rank", Grade::Consumed),
    ("qk_rope_head_dim", Grade::Consumed),
    ("qk_nope_head_dim", Grade::Consumed),
    ("v_head_dim", Grade::Consumed),
    // `__post_init__` overwrites both from qk_rope/qk_nope: the stored values change nothing.
    ("head_dim", Grade::Metadata),
    ("qk_head_dim", Grade::Metadata),
    ("n_routed_experts", Grade::Consumed),
    ("num_local_experts", Grade::Consumed),
    ("n_shared_experts", Grade::Consumed),
    ("num_experts_per_tok", Grade::Consumed),
    ("first_k_dense_replace", Grade::Consumed),
    ("mlp_layer_types", Grade::Consumed),
    // vLLM deepseek_v2.py: a layer is MoE when `i >= first_k_dense_replace and i % freq == 0`.
    ("moe_layer_freq", Grade::Consumed),
    ("layer_types", Grade::Consumed),
    ("indexer_types", Grade::Consumed),
    ("index_topk_pattern", Grade::Consumed),
    ("index_topk_freq", Grade::Consumed),
    ("index_skip_topk_offset", Grade::Consumed),
    ("index_head_dim", Grade::Consumed),
    ("index_n_heads", Grade::Consumed),
    // Not a GlmMoeDsaConfig field; vLLM reads it for the appended MTP layers.
    ("num_nextn_predict_layers", Grade::Consumed),
    ("index_topk", Grade::Numerics),
    ("indexer_rope_interleave", Grade::Numerics),
    ("n_group", Grade::Numerics),
    ("topk_group", Grade::Numerics),
    ("norm_topk_prob", Grade::Numerics),
    ("routed_scaling_factor", Grade::Numerics),
    ("scoring_func", Grade::Numerics),
    ("topk_method", Grade::Numerics),
    // A class field modeling_glm_moe_dsa.py never reads (its MLPs have no bias).
    ("mlp_bias", Grade::Metadata),
    ("ep_size", Grade::Metadata),
    // Neither GlmMoeDsaConfig defines these nor modeling_glm_moe_dsa.py reads them; vLLM
    // 0.19.0's deepseek_v2.py does not read them either (checked by name; the extracted data
    // over-approximates vLLM's module closure and counts them read).
    ("moe_router_dtype", Grade::Ignored),
    ("index_share_for_mtp_iteration", Grade::Ignored),
];

/// Routed and shared experts as GLM stores them (DeepSeek's names).
const MOE: &[TensorGroup] = &[
    group("model.layers.N.mlp.gate.weight", Router),
    group("model.layers.N.mlp.gate.e_score_correction_bias", Buffer),
    group("model.layers.N.mlp.experts.N.{gate,up,down}_proj.weight", Experts),
    group(
        "model.layers.N.mlp.shared_experts.{gate,up,down}_proj.weight",
        SharedExperts,
    ),
];

pub static GLM4_MOE: Family = Family {
    name: "glm4_moe",
    model_types: &["glm4_moe"],
    architectures: &["Glm4MoeForCausalLM"],
    keys: GLM4_MOE_KEYS,
    tensors: &[EMBED_NORM_HEAD, QKVO, QKV_BIAS, QK_NORM, GATED_MLP, MOE],
    mtp: Some(MtpLayout::Appended),
    mtp_tensors: deepseek::MTP_TENSORS,
    normalize: normalize_glm4_moe,
    // llama.cpp `glm4moe` (llama-model.cpp `LLM_ARCH_GLM4_MOE` hparams): every key it reads
    // (expert_feed_forward_length, expert_count/used/shared, leading_dense_block_count,
    // expert_weights_scale/norm, expert_gating_func, rope.dimension_sections,
    // nextn_predict_layers) is one of gguf_reader::KEYS; the nextn block's own tensors are
    // `blk.N.nextn.*` (LLM_TENSOR_NEXTN_*).
    gguf: Some(Gguf {
        architectures: &[("glm4moe", "glm4_moe")],
        keys: &[],
        tensors: &[group(
            "blk.N.nextn.{eh_proj,embed_tokens,enorm,hnorm,shared_head_head,shared_head_norm}.weight",
            Mtp,
        )],
        normalize: normalize_glm4_moe_gguf,
    }),
    ..Family::BASE
};

/// llama.cpp's `glm4moe`: convert_hf_to_gguf writes `block_count` = decoder layers + nextn
/// layers, and llama.cpp caches KV for the first `n_layer − nextn_predict_layers` only (the
/// memory's layer filter, llama-model.cpp:2796-2804): the main stack is the difference.
fn normalize_glm4_moe_gguf(model_type: &str, kv: &mut GgufReader) -> Option<Normalized> {
    let (mut dims, kv_per_layer, v_head_dim) = llama_cpp::read_dims(kv)?;
    let nextn = kv.opt("nextn_predict_layers").unwrap_or(0);
    if nextn >= dims.layers {
        let finding = kv.findings.push(
            crate::findings::Code::ConfigInvalidValue,
            "glm4moe.nextn_predict_layers",
            "nextn_predict_layers leaves no decoder layer in block_count",
        );
        finding.observed = Some(nextn.into());
        return None;
    }
    dims.layers -= nextn;
    let layers = (0..dims.layers)
        .map(|i| llama_cpp::attention(&dims, kv_per_layer.as_ref(), v_head_dim, i, Span::Full))
        .collect();
    let dense_lead = kv.opt("leading_dense_block_count").unwrap_or(0);
    // Unset gating means sigmoid (glm4-moe.cpp:15-18); softmax is the same one op on the
    // logits (llama-graph.cpp:2054-2061), the other functions shape the graph otherwise.
    let routing = llama_cpp::read_routing(kv).filter(|_| kv.opt("expert_gating_func").unwrap_or(0) <= 2);
    let mut normalized = llama_cpp::finish(model_type, GLM4_MOE.name, kv, &dims, layers);
    normalized.model.llama_cpp_graph = routing.map(|routing| {
        LlamaCppGraph::Glm4Moe(Glm4MoeGraph {
            dense_lead,
            qk_norm: false,
            routing,
        })
    });
    Some(normalized)
}

pub static GLM_MOE_DSA: Family = Family {
    name: "glm_moe_dsa",
    model_types: &["glm_moe_dsa"],
    architectures: &["GlmMoeDsaForCausalLM"],
    keys: GLM_MOE_DSA_KEYS,
    tensors: deepseek::TENSORS,
    mtp: Some(MtpLayout::Appended),
    mtp_tensors: deepseek::MTP_TENSORS,
    tp_replicated: deepseek::TP_REPLICATED,
    normalize: normalize_glm_moe_dsa,
    ..Family::BASE
};

/// Routed experts with the class's own defaults (both classes default `n_shared_experts`
/// to 1; `first_k_dense_replace` defaults to 1 in Glm4MoeConfig, 3 in GlmMoeDsaConfig).
fn read_experts(cfg: &mut ConfigReader, dense_layers: Vec<u64>) -> Option<Moe> {
    let experts = match cfg.value("n_routed_experts") {
        Some(_) => cfg.u64("n_routed_experts"),
        None => cfg.u64("num_local_experts"),
    };
    let active = cfg.u64("num_experts_per_tok");
    let shared = cfg.opt_u64("n_shared_experts").unwrap_or(1);
    let expert_intermediate_size = cfg.opt_positive("moe_intermediate_size");
    Some(Moe {
        experts: experts?,
        active: active?,
        shared,
        dense_layers,
        expert_intermediate_size,
    })
}

fn router_shape(experts: u64) -> ShapeRule {
    ShapeRule {
        pattern: "model.layers.N.mlp.gate.weight",
        dim: 0,
        value: experts,
        keys: "n_routed_experts",
    }
}

fn normalize_glm4_moe(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let dims = read_dims(cfg, false)?;
    // Glm4MoeDecoderLayer: MoE when `layer_idx >= config.first_k_dense_replace`.
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(1);
    let mtp_layers = match cfg.value("num_nextn_predict_layers") {
        Some(_) => cfg.opt_layers("num_nextn_predict_layers")?,
        None => cfg.opt_layers("num_mtp_layers")?,
    };
    let moe = read_experts(cfg, (0..dims.layers.min(first_dense)).collect())?;
    let mut shapes = dims.base_shapes();
    shapes.extend(dims.qkv_shapes());
    shapes.push(router_shape(moe.experts));
    let has_dense = !moe.dense_layers.is_empty();
    let mut model = dims.model(
        model_type,
        GLM4_MOE.name,
        uniform(dims.layers, dims.attention(Span::Full)),
        Some(moe),
    );
    // The MTP layer is one more decoder layer of the same attention (plus its nextn parts).
    model.mtp_layers = mtp_layers;
    model.mtp_mixer = Some(dims.attention(Span::Full));
    if !has_dense {
        model.intermediate = None;
    }
    Some(Normalized { model, shapes })
}

/// One entry per layer of a `"a"`/`"b"` list, as booleans (`true` for `yes`).
fn two_valued(
    cfg: &mut ConfigReader,
    key: &str,
    list: Vec<&str>,
    layers: u64,
    yes: &str,
    no: &str,
) -> Option<Vec<bool>> {
    if list.len() as u64 != layers {
        cfg.findings.mismatch(
            crate::findings::Code::ConfigInvalidValue,
            format!("config.{key}"),
            layers,
            list.len(),
            format!("{key} must have one entry per layer (num_hidden_layers)"),
        );
        return None;
    }
    let mut out = Vec::with_capacity(list.len());
    for entry in list {
        match entry {
            e if e == yes => out.push(true),
            e if e == no => out.push(false),
            other => {
                cfg.unsupported(key, format!("`{other}` is neither `{yes}` nor `{no}`"));
                return None;
            }
        }
    }
    Some(out)
}

/// Which layers own an indexer: `indexer_types`, else the schedule GlmMoeDsaConfig's
/// `__post_init__` derives (`index_topk_pattern`, else `index_topk_freq` /
/// `index_skip_topk_offset`, defaults 1 and 2: every layer).
fn indexer_layers(cfg: &mut ConfigReader, layers: u64) -> Option<Vec<bool>> {
    if cfg.value("indexer_types").is_some() {
        let list = cfg.opt_str_list("indexer_types")?;
        return two_valued(cfg, "indexer_types", list, layers, "full", "shared");
    }
    if let Some(pattern) = cfg.value("index_topk_pattern") {
        let list: Vec<&str> = match pattern.as_str() {
            Some(s) => {
                let mut list = Vec::with_capacity(s.len());
                for c in s.chars() {
                    match c {
                        'F' => list.push("full"),
                        'S' => list.push("shared"),
                        _ => {
                            cfg.unsupported("index_topk_pattern", format!("`{c}` is neither F nor S"));
                            return None;
                        }
                    }
                }
                list
            }
            None => cfg.opt_str_list("index_topk_pattern")?,
        };
        return two_valued(cfg, "index_topk_pattern", list, layers, "full", "shared");
    }
    let freq = cfg.opt_u64("index_topk_freq").unwrap_or(1).max(1);
    let offset = cfg.opt_u64("index_skip_topk_offset").unwrap_or(2);
    Some(
        (0..layers)
            .map(|i| (i + 1).saturating_sub(offset).is_multiple_of(freq))
            .collect(),
    )
}

fn normalize_glm_moe_dsa(model_type: &str, cfg: &mut ConfigReader) -> Option<Normalized> {
    let mla = deepseek::read_mla(cfg)?;
    let layers = mla.dims.layers;
    let indexed = indexer_layers(cfg, layers)?;
    let index_head_dim = cfg.opt_positive("index_head_dim").unwrap_or(128);
    let index_heads = cfg.opt_positive("index_n_heads").unwrap_or(32);
    if let Some(types) = cfg.opt_str_list("layer_types")
        && let Some(other) = types.iter().find(|t| **t != "indexed_attention")
    {
        cfg.unsupported(
            "layer_types",
            format!("layer type `{other}`: GlmMoeDsa layers are all `indexed_attention`"),
        );
        return None;
    }
    // transformers builds the MLPs from `mlp_layer_types` (default: the first
    // `first_k_dense_replace` dense); vLLM from first_k_dense_replace and moe_layer_freq.
    let first_dense = cfg.opt_u64("first_k_dense_replace").unwrap_or(3);
    let freq = cfg.opt_u64("moe_layer_freq").unwrap_or(1).max(1);
    let sparse = match cfg.value("mlp_layer_types") {
        Some(_) => {
            let list = cfg.opt_str_list("mlp_layer_types")?;
            two_valued(cfg, "mlp_layer_types", list, layers, "sparse", "dense")?
        }
        None => (0..layers).map(|i| i >= first_dense).collect(),
    };
    let vllm_sparse: Vec<bool> = (0..layers).map(|i| i >= first_dense && i % freq == 0).collect();
    if sparse != vllm_sparse {
        cfg.unsupported(
            "mlp_layer_types",
            "the dense/MoE layers mlp_layer_types names differ from first_k_dense_replace and moe_layer_freq, which vLLM builds from",
        );
        return None;
    }
    let dense_layers = (0..layers).filter(|i| !sparse[*i as usize]).collect();
    let moe = read_experts(cfg, dense_layers)?;
    let mut shapes = mla.shapes(moe.experts);
    shapes.extend([
        ShapeRule {
            pattern: "model.layers.N.self_attn.indexer.wk.weight",
            dim: 0,
            value: index_head_dim,
            keys: "index_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.indexer.wq_b.weight",
            dim: 0,
            value: index_heads.saturating_mul(index_head_dim),
            keys: "index_n_heads × index_head_dim",
        },
        ShapeRule {
            pattern: "model.layers.N.self_attn.indexer.weights_proj.weight",
            dim: 0,
            value: index_heads,
            keys: "index_n_heads",
        },
    ]);
    let mixers = indexed
        .iter()
        .map(|own| mla.mixer(own.then_some(index_head_dim)))
        .collect();
    let has_dense = !moe.dense_layers.is_empty();
    let mut model = mla.dims.model(model_type, GLM_MOE_DSA.name, mixers, Some(moe));
    model.mtp_layers = mla.mtp_layers;
    // The published MTP layer carries its own indexer (GLM-5.2's layer 78).
    model.mtp_mixer = Some(mla.mixer(Some(index_head_dim)));
    model.mla = Some(mla.shape());
    if !has_dense {
        model.intermediate = None;
    }
    Some(Normalized { model, shapes })
}
