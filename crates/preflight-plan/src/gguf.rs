//! Planning a GGUF file (or split GGUF): the architecture from its own key/values, tensors
//! placed by llama.cpp's uniform tensor names, elements counted per ggml type.
//! GGUF block types store logical elements directly, so parameters are exact.

use std::collections::{BTreeMap, BTreeSet};

use preflight_formats::facts::GgufFile;
use preflight_formats::gguf::{self, HeaderIssue, Value};

use crate::families::{Component, Placement, pattern_matches};
use crate::findings::{Code, Findings};
use crate::memory::WeightsLayout;
use crate::verdict::{Architecture, Attention, Moe, Parameters, Quantization};

/// `general.architecture` values the planner models, with the transformers `model_type`
/// and family each corresponds to.
const ARCHITECTURES: &[(&str, &str, &str)] = &[
    ("llama", "llama", "llama"),
    ("mistral", "mistral", "llama"),
    ("qwen2", "qwen2", "qwen"),
    ("qwen3", "qwen3", "qwen"),
    ("qwen3moe", "qwen3_moe", "qwen_moe"),
    ("gemma2", "gemma2", "gemma"),
    ("gemma3", "gemma3_text", "gemma"),
    ("phi3", "phi3", "phi3"),
    ("deepseek2", "deepseek_v3", "deepseek"),
    ("gpt-oss", "gpt_oss", "gpt_oss"),
];

/// Keys under `<arch>.` the planner reads.
const CONSUMED: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
    "leading_dense_block_count",
    "expert_count",
    "expert_used_count",
    "expert_shared_count",
    "vocab_size",
    "nextn_predict_layers",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "attention.causal",
    "rope.dimension_count",
];

/// Keys under `<arch>.` that change values, not shapes or memory.
const NUMERICS: &[&str] = &[
    "attention.layer_norm_epsilon",
    "attention.layer_norm_rms_epsilon",
    "attention.clamp_kqv",
    "attention.max_alibi_bias",
    "attention.scale",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "logit_scale",
    "embedding_scale",
    "residual_scale",
    "expert_weights_scale",
    "expert_weights_norm",
    "expert_gating_func",
    "expert_group_count",
    "expert_group_used_count",
    "rope.freq_base",
    "rope.scale_linear",
    "rope.dimension_sections",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.attn_factor",
    "rope.scaling.original_context_length",
    "rope.scaling.finetuned",
    "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow",
    "use_parallel_residual",
    "tensor_data_layout",
    "pooling_type",
];

/// Namespaces that never affect shape or memory (identity, tokenizer, quantizer records).
const METADATA_NAMESPACES: &[&str] = &["general.", "tokenizer.", "quantize.", "split."];

/// llama.cpp tensor names (numeric segments as `N`) and their components.
const TENSORS: &[(&str, Component)] = &[
    ("token_embd.weight", Component::Embedding),
    ("output.weight", Component::LmHead),
    ("output_norm.{weight,bias}", Component::Norm),
    ("rope_freqs.weight", Component::Buffer),
    (
        "blk.N.{attn_norm,attn_q_norm,attn_k_norm,ffn_norm,post_attention_norm,post_ffw_norm,attn_post_norm,ffn_post_norm,attn_q_a_norm,attn_kv_a_norm}.{weight,bias}",
        Component::Norm,
    ),
    (
        "blk.N.{attn_q,attn_k,attn_v,attn_output,attn_qkv,attn_q_a,attn_q_b,attn_kv_a_mqa,attn_kv_b,attn_k_b,attn_v_b}.{weight,bias}",
        Component::Attention,
    ),
    ("blk.N.attn_sinks.weight", Component::Attention),
    ("blk.N.attn_sinks", Component::Attention),
    ("blk.N.{ffn_gate,ffn_up,ffn_down}.{weight,bias}", Component::Mlp),
    ("blk.N.ffn_gate_inp.{weight,bias}", Component::Router),
    (
        "blk.N.{ffn_gate_exps,ffn_up_exps,ffn_down_exps,ffn_gate_up_exps}.{weight,bias}",
        Component::Experts,
    ),
    (
        "blk.N.{ffn_gate_shexp,ffn_up_shexp,ffn_down_shexp,ffn_gate_inp_shexp}.{weight,bias}",
        Component::SharedExperts,
    ),
    ("blk.N.exp_probs_b.bias", Component::Buffer),
    (
        "blk.N.nextn.{eh_proj,embed_tokens,enorm,hnorm,shared_head_head,shared_head_norm}.weight",
        Component::Mtp,
    ),
];

/// llama.cpp names of tensors every tensor-parallel rank holds whole, beyond norms, routers
/// and buffers: the MLA latent down-projections (vLLM's `ReplicatedLinear`).
const TP_REPLICATED: &[&str] = &["blk.N.{attn_q_a,attn_kv_a_mqa}.weight"];

pub struct Planned {
    pub architecture: Option<Architecture>,
    pub parameters: Parameters,
    pub weights_bytes: u64,
    pub tensor_elements_by_dtype: BTreeMap<String, u64>,
    pub layout: WeightsLayout,
}

pub fn plan(parts: &[GgufFile], missing: &[String], findings: &mut Findings) -> Planned {
    for part in missing {
        findings.push(
            Code::GgufMissingPart,
            part.clone(),
            "this split GGUF part is declared but not there",
        );
    }
    for part in parts {
        issue_findings(part, findings);
    }
    let Some(first) = parts.first() else {
        return Planned {
            architecture: None,
            parameters: Parameters::default(),
            weights_bytes: 0,
            tensor_elements_by_dtype: BTreeMap::new(),
            layout: WeightsLayout::default(),
        };
    };
    if let Some(count) = uint(&first.header.kv, "split.count")
        && count != (parts.len() + missing.len()) as u64
    {
        findings.mismatch(
            Code::GgufMissingPart,
            format!("{}:split.count", first.name),
            count,
            parts.len(),
            "split.count disagrees with the parts found",
        );
    }
    let architecture = architecture(&first.header.kv, findings);
    let mut elements_by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_dtype: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_component: BTreeMap<String, u64> = BTreeMap::new();
    let mut weights_bytes = 0u64;
    let mut layout = WeightsLayout::default();
    let mut layers = BTreeSet::new();
    let mut unplaced: BTreeMap<String, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for part in parts {
        for tensor in &part.header.tensors {
            if !seen.insert(tensor.name.as_str()) {
                findings.push(
                    Code::TensorDuplicate,
                    tensor.name.clone(),
                    format!("appears again in {}", part.name),
                );
            }
            let elements = tensor.elements();
            let ty = gguf::ggml_type(tensor.ggml_type);
            let type_name = ty.map_or_else(|| format!("type{}", tensor.ggml_type), |t| t.name.to_owned());
            let sum = |total: &mut u64, n: u64| *total = total.saturating_add(n);
            sum(elements_by_type.entry(type_name.clone()).or_default(), elements);
            let bytes = ty.map_or(0, |t| (elements / t.block_elements).saturating_mul(t.block_bytes));
            sum(&mut weights_bytes, bytes);
            let (normalized, layer) = normalize(&tensor.name);
            let Some((_, component)) = TENSORS.iter().find(|(p, _)| pattern_matches(p, &normalized)) else {
                layout.add_unplaced(bytes);
                *unplaced.entry(normalized).or_default() += 1;
                continue;
            };
            let component = match (layer, &architecture) {
                (Some(l), Some(arch)) if l >= arch.layers && *component != Component::Buffer => Component::Mtp,
                _ => *component,
            };
            if let Some(l) = layer {
                layers.insert(l);
            }
            let placement =
                if component.is_replicated() || TP_REPLICATED.iter().any(|p| pattern_matches(p, &normalized)) {
                    Placement::Replicated
                } else {
                    Placement::Sharded
                };
            let params = if component == Component::Buffer { 0 } else { elements };
            layout.add(component, placement, params, bytes);
            if component == Component::Buffer {
                continue;
            }
            sum(by_component.entry(component.as_str().to_owned()).or_default(), elements);
            sum(by_dtype.entry(type_name).or_default(), elements);
        }
    }
    for (pattern, count) in unplaced {
        let finding = findings.push(
            Code::TensorUnplaced,
            pattern.clone(),
            format!("{count} tensor(s) named like `{pattern}` belong to no component llama.cpp defines"),
        );
        finding.observed = Some(count.into());
    }
    let total = by_component.values().fold(0u64, |acc, n| acc.saturating_add(*n));
    let mut architecture = architecture;
    if let Some(arch) = architecture.as_mut() {
        let declared = arch.layers + arch.mtp_layers;
        if !Architecture::layers_complete(&layers, declared) {
            findings.mismatch(
                Code::ConfigLayerCountMismatch,
                "block_count",
                declared,
                layers.len(),
                "the blocks present are not the blocks the header declares",
            );
        }
        arch.quantization = Some(Quantization {
            method: "gguf".into(),
            layout: type_mix(&first.header.kv, &elements_by_type),
            bits: None,
        });
    }
    let active_per_token = architecture
        .as_ref()
        .map(|arch| arch.active_per_token(total, &by_component));
    Planned {
        architecture,
        parameters: Parameters {
            total,
            by_dtype,
            by_component,
            active_per_token,
        },
        weights_bytes,
        tensor_elements_by_dtype: elements_by_type,
        layout,
    }
}

fn issue_findings(part: &GgufFile, findings: &mut Findings) {
    for issue in &part.header.issues {
        let subject = |t: &str| format!("{}:{t}", part.name);
        match issue {
            HeaderIssue::UnknownType { tensor, ggml_type } => {
                findings.push(
                    Code::DtypeUnknown,
                    subject(tensor),
                    format!("ggml type {ggml_type} is unknown"),
                );
            }
            HeaderIssue::BlockMismatch { tensor, detail } => {
                findings.push(Code::GgufBlockMismatch, subject(tensor), detail.clone());
            }
            HeaderIssue::OffsetsInvalid { tensor, detail } => {
                findings.push(Code::HeaderOffsetsInvalid, subject(tensor), detail.clone());
            }
            HeaderIssue::ShapeOverflow { tensor } => {
                findings.push(
                    Code::HeaderSizeMismatch,
                    subject(tensor),
                    "the shape's size does not fit in 64 bits",
                );
            }
            HeaderIssue::DuplicateTensor { tensor } => {
                findings.push(Code::TensorDuplicate, subject(tensor), "declared twice in one header");
            }
            HeaderIssue::BeyondFile { data_end, file_size } => {
                findings.mismatch(
                    Code::HeaderBeyondFile,
                    part.name.clone(),
                    *data_end,
                    *file_size,
                    "tensor data runs past the end of the file",
                );
            }
        }
    }
}

/// `blk.12.attn_q.weight` → (`blk.N.attn_q.weight`, Some(12)).
fn normalize(name: &str) -> (String, Option<u64>) {
    let mut layer = None;
    let normalized = name
        .split('.')
        .enumerate()
        .map(|(i, segment)| match segment.parse::<u64>() {
            Ok(n) => {
                if i == 1 && name.starts_with("blk.") {
                    layer = Some(n);
                }
                "N"
            }
            Err(_) => segment,
        })
        .collect::<Vec<_>>()
        .join(".");
    (normalized, layer)
}

fn uint(kv: &BTreeMap<String, Value>, key: &str) -> Option<u64> {
    as_u64(kv.get(key)?)
}

fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::UInt(n) => Some(*n),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A per-layer value may be one number or an array of one number per layer.
fn per_layer(kv: &BTreeMap<String, Value>, key: &str, layers: u64) -> Option<Vec<u64>> {
    match kv.get(key)? {
        Value::Array(values) => {
            let values: Option<Vec<u64>> = values.iter().map(as_u64).collect();
            values.filter(|v| v.len() as u64 == layers)
        }
        _ => uint(kv, key).map(|n| vec![n; layers as usize]),
    }
}

fn architecture(kv: &BTreeMap<String, Value>, findings: &mut Findings) -> Option<Architecture> {
    let arch_name = match kv.get("general.architecture") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            findings.push(
                Code::GgufMissingKey,
                "general.architecture",
                "a GGUF must name its architecture",
            );
            return None;
        }
    };
    let Some((_, model_type, family)) = ARCHITECTURES.iter().find(|(a, _, _)| *a == arch_name) else {
        let finding = findings.push(
            Code::ArchitectureUnknown,
            "general.architecture",
            format!("`{arch_name}` is not an architecture the planner knows; it is refused rather than approximated"),
        );
        finding.observed = Some(arch_name.into());
        return None;
    };
    let prefix = format!("{arch_name}.");
    for key in kv.keys() {
        let graded = match key.strip_prefix(&prefix) {
            Some(rest) => CONSUMED.contains(&rest) || NUMERICS.contains(&rest),
            None => METADATA_NAMESPACES.iter().any(|ns| key.starts_with(ns)),
        };
        if !graded {
            findings.push(
                Code::GgufUnknownKey,
                key.clone(),
                "not in the planner's GGUF key registry; it may change what the model computes",
            );
        }
    }
    let mut required = |key: &str| {
        let full = format!("{prefix}{key}");
        let value = uint(kv, &full).filter(|n| *n > 0);
        if value.is_none() {
            findings.push(Code::GgufMissingKey, full, "required to know the architecture");
        }
        value
    };
    let layers = required("block_count");
    let hidden = required("embedding_length");
    let heads = required("attention.head_count");
    let context = required("context_length");
    if layers.is_some_and(|n| n > crate::config::MAX_LAYERS) {
        findings.push(
            Code::GgufMissingKey,
            format!("{prefix}block_count"),
            format!("more than {} blocks is not a real model", crate::config::MAX_LAYERS),
        );
        return None;
    }
    let (layers, hidden, heads, context) = (layers?, hidden?, heads?, context?);
    let key = |k: &str| format!("{prefix}{k}");
    let kv_per_layer = per_layer(kv, &key("attention.head_count_kv"), layers);
    let kv_heads = kv_per_layer
        .as_ref()
        .and_then(|v| v.iter().copied().max())
        .unwrap_or(heads);
    // Kept only when layers differ; uniform arrays say no more than `kv_heads`.
    let kv_heads_per_layer = kv_per_layer.filter(|v| v.iter().any(|n| *n != kv_heads));
    let head_dim = uint(kv, &key("attention.key_length")).unwrap_or(hidden / heads);
    let v_head_dim = uint(kv, &key("attention.value_length")).filter(|v| *v != head_dim);
    let widest = |k: &str| per_layer(kv, &key(k), layers).and_then(|v| v.into_iter().max());
    let vocab = uint(kv, &key("vocab_size")).or_else(|| match kv.get("tokenizer.ggml.tokens") {
        Some(Value::SkippedArray { len, .. }) => Some(*len),
        Some(Value::Array(a)) => Some(a.len() as u64),
        _ => None,
    });
    let Some(vocab) = vocab else {
        findings.push(
            Code::GgufMissingKey,
            key("vocab_size"),
            "neither the vocab size nor the token list is present",
        );
        return None;
    };
    let window = uint(kv, &key("attention.sliding_window"));
    let attention = match (*model_type, uint(kv, &key("attention.kv_lora_rank")), window) {
        ("deepseek_v3", Some(kv_lora_rank), _) => {
            let rope = uint(kv, &key("rope.dimension_count")).unwrap_or(0);
            (0..layers)
                .map(|_| Attention::Mla {
                    kv_lora_rank,
                    qk_rope_head_dim: rope,
                })
                .collect()
        }
        (_, _, Some(window)) if window > 0 => {
            let pattern = uint(kv, &key("attention.sliding_window_pattern")).unwrap_or(match *model_type {
                "gemma2" | "gpt_oss" => 2,
                "gemma3_text" => 6,
                _ => 1,
            });
            // llama.cpp: layer il slides when il % pattern < pattern - 1 (pattern 1: all slide).
            (0..layers)
                .map(|i| {
                    if pattern <= 1 || i % pattern < pattern - 1 {
                        Attention::Sliding { window }
                    } else {
                        Attention::Full
                    }
                })
                .collect()
        }
        _ => (0..layers).map(|_| Attention::Full).collect(),
    };
    let moe = uint(kv, &key("expert_count")).filter(|n| *n > 0).map(|experts| {
        let dense = uint(kv, &key("leading_dense_block_count")).unwrap_or(0);
        Moe {
            experts,
            active: uint(kv, &key("expert_used_count")).unwrap_or(0),
            shared: uint(kv, &key("expert_shared_count")).unwrap_or(0),
            dense_layers: (0..dense.min(layers)).collect(),
            expert_intermediate_size: uint(kv, &key("expert_feed_forward_length")),
        }
    });
    // `feed_forward_length` is the dense width; a MoE without dense layers has none.
    let intermediate_size = match &moe {
        Some(m) if m.dense_layers.is_empty() => None,
        _ => widest("feed_forward_length").filter(|n| *n > 0),
    };
    Some(Architecture {
        model_type: (*model_type).to_owned(),
        family: (*family).to_owned(),
        layers,
        hidden_size: hidden,
        heads,
        kv_heads,
        head_dim,
        v_head_dim,
        kv_heads_per_layer,
        intermediate_size,
        vocab_size: vocab,
        context,
        attention,
        moe,
        quantization: None,
        mtp_layers: uint(kv, &key("nextn_predict_layers"))
            .unwrap_or(0)
            .min(crate::config::MAX_LAYERS),
        tie_word_embeddings: false,
        dtype: None,
    })
}

/// `Q4_K 80.4%, Q6_K 19.6%, F32 0.0%` by elements, led by the file type when declared.
fn type_mix(kv: &BTreeMap<String, Value>, elements: &BTreeMap<String, u64>) -> String {
    let total: u64 = elements.values().sum::<u64>().max(1);
    let mut mix: Vec<_> = elements.iter().collect();
    mix.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
    let mix = mix
        .iter()
        .map(|(t, n)| format!("{t} {:.1}%", **n as f64 * 100.0 / total as f64))
        .collect::<Vec<_>>()
        .join(", ");
    match uint(kv, "general.file_type") {
        Some(ft) => format!("file type {ft}; {mix}"),
        None => mix,
    }
}
