//! Planning a GGUF file (or split GGUF): the architecture from its own key/values, read by
//! the family that claims its `general.architecture`; tensors placed by llama.cpp's names
//! into the same records as safetensors, and folded alike. GGUF block types store logical
//! elements directly, so parameters are exact.

use std::collections::BTreeMap;

use preflight_formats::facts::GgufFile;
use preflight_formats::gguf::{self, HeaderIssue, IssueKind, Value};

use crate::families::{self, Placement, ShapeRule, llama_cpp, pattern_matches};
use crate::findings::{Code, Findings};
use crate::gguf_reader::{GgufReader, as_u64, uint};
use crate::memory::WeightsLayout;
use crate::model::Model;
use crate::tensors::{self, DtypeNames, FastMap, Kind, Position, Record, ShapeCheck, ShapeId, Shapes};
use crate::verdict::{Component, Parameters, Quantization};

pub struct Planned {
    pub model: Option<Model>,
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
            model: None,
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
    let understood = understand(&first.header.kv, findings);
    let mut names = DtypeNames::default();
    let mut shapes = Shapes::default();
    let mut placed: FastMap<(ShapeId, bool), Option<(Component, Placement)>> = FastMap::default();
    let mut records = Vec::with_capacity(parts.iter().map(|p| p.header.tensors.len()).sum());
    // Duplicates within a part are the reader's to report; across parts, the planner's
    // (and only a split GGUF has several parts to compare).
    let mut seen: FastMap<&str, usize> = FastMap::default();
    for (index, part) in parts.iter().enumerate() {
        for tensor in &part.header.tensors {
            if parts.len() > 1
                && let Some(previous) = seen.insert(tensor.name.as_str(), index)
                && previous != index
            {
                findings.push(
                    Code::TensorDuplicate,
                    tensor.name.clone(),
                    format!("appears again in {}", part.name),
                );
            }
            let elements = tensor.elements();
            let ty = gguf::ggml_type(tensor.ggml_type);
            let dtype = match ty {
                Some(t) => names.intern(t.name),
                None => names.intern(&format!("type{}", tensor.ggml_type)),
            };
            let bytes = ty.map_or(0, |t| (elements / t.block_elements).saturating_mul(t.block_bytes));
            let shape = shapes.of(&tensor.name);
            let kind = match &understood {
                None => Kind::Unclassified {
                    params: elements,
                    dtype,
                },
                Some((family, normalized)) => {
                    let past_main = shape
                        .layer
                        .is_some_and(|l| u64::from(l) >= normalized.model.layers.len() as u64);
                    let class = *placed
                        .entry((shape.id, past_main))
                        .or_insert_with(|| classify(family, shapes.name(shape.id), past_main));
                    match class {
                        Some((component, placement)) => Kind::Param {
                            component,
                            placement,
                            params: if component == Component::Buffer { 0 } else { elements },
                            dtype,
                            // GGUF dims run innermost first; shapes are checked on safetensors.
                            checked: ShapeCheck::None,
                        },
                        None => Kind::Unplaced,
                    }
                }
            };
            records.push(Record {
                tensor: u32::try_from(records.len()).unwrap_or(u32::MAX),
                shape_id: shape.id,
                stored: dtype,
                elements,
                bytes,
                position: Position::new(shape.layer, shape.expert),
                kind,
            });
        }
    }
    tensors::unplaced_findings(&records, &shapes, "llama.cpp defines", findings);
    let elements_by_type = tensors::elements_by_dtype(&records, &names);
    let (mut model, rules) = match understood {
        Some((_, n)) => (Some(n.model), n.shapes),
        None => (None, Vec::new()),
    };
    if let Some(model) = model.as_mut() {
        gguf_layer_check(&records, model, findings);
        gguf_layer_kind_check(&records, &shapes, model, findings);
        let all: Vec<&gguf::TensorInfo> = parts.iter().flat_map(|p| &p.header.tensors).collect();
        // `deepseek2`'s selection bias is an optional tensor (models/deepseek2.cpp:132): its
        // graph adds it where the blocks hold it (llama-graph.cpp:2077-2082).
        if let Some(crate::model::LlamaCppGraph::Deepseek2(graph)) = model.llama_cpp_graph.as_mut() {
            graph.probs_bias = all.iter().any(|t| t.name.ends_with(".exp_probs_b.bias"));
        }
        // `glm4moe`'s Q and K norms are optional tensors too (models/glm4-moe.cpp:67-70, 331-338).
        if let Some(crate::model::LlamaCppGraph::Glm4Moe(graph)) = model.llama_cpp_graph.as_mut() {
            graph.qk_norm = all.iter().any(|t| t.name.ends_with(".attn_q_norm.weight"));
        }
        let tensor = |i: u32| all[i as usize];
        gguf_shape_check(&records, &shapes, model, &rules, &first.header.kv, tensor, findings);
        model.quantization = Some(Quantization {
            method: "gguf".into(),
            layout: type_mix(&first.header.kv, &elements_by_type),
            bits: None,
        });
    }
    let mut folded = tensors::fold(&records, &names, model.as_ref(), findings);
    // llama.cpp places tensors by name (its layer classes, `--override-tensor` patterns): the
    // names and bytes of a GGUF's tensors, no more than its header already holds.
    let all = (0u32..)
        .zip(parts)
        .flat_map(|(file, p)| p.header.tensors.iter().map(move |t| (file, t)));
    folded.layout.set_named(
        all.zip(&records)
            .map(|((file, t), r)| crate::memory::NamedTensor {
                name: t.name.as_str().into(),
                bytes: r.bytes,
                file,
                offset: t.offset,
                mtp: matches!(
                    r.kind,
                    Kind::Param {
                        component: Component::Mtp,
                        ..
                    }
                ),
            })
            .collect(),
    );
    Planned {
        model,
        parameters: folded.parameters,
        weights_bytes: folded.weights_bytes,
        tensor_elements_by_dtype: elements_by_type,
        layout: folded.layout,
    }
}

/// The blocks present against the blocks declared (main stack plus `nextn` layers).
fn gguf_layer_check(records: &[Record], model: &Model, findings: &mut Findings) {
    let layers: std::collections::BTreeSet<u64> = records
        .iter()
        .filter_map(|r| r.position.layer())
        .map(u64::from)
        .collect();
    let declared = (model.layers.len() as u64).saturating_add(model.mtp_layers);
    let complete = layers.len() as u64 == declared && layers.iter().enumerate().all(|(i, l)| i as u64 == *l);
    if !complete {
        findings.mismatch(
            Code::ConfigLayerCountMismatch,
            "block_count",
            declared,
            layers.len(),
            "the blocks present are not the blocks the header declares",
        );
    }
}

/// Each main-stack block's tensors against the kind of layer the key/values make it: a
/// hybrid's keys decide per block which mixer it runs (Nemotron-H: `head_count_kv` and
/// `feed_forward_length` per block; Qwen3.5: `full_attention_interval`), and llama.cpp loads
/// per block only the tensors of that kind, so a header whose keys name another kind than its
/// tensors would be planned with the wrong cache. Softmax-attention, linear-attention and
/// Mamba tensors belong to layers of that mixer, and each such layer has some; routed experts
/// sit exactly in the MoE layers.
fn gguf_layer_kind_check(records: &[Record], shapes: &Shapes, model: &Model, findings: &mut Findings) {
    use crate::model::Mixer;
    let main = model.layers.len();
    // Latent attention (`deepseek2`) projects through `attn_*` tensors as softmax attention
    // does (`blk.N.attn_q_a`, `attn_kv_a_mqa`, `attn_k_b`, …): the same component.
    let kind_of = |mixer: &Mixer| -> Option<Component> {
        match mixer {
            Mixer::Attention { .. } | Mixer::Mla { .. } => Some(Component::Attention),
            Mixer::LinearAttention { .. } => Some(Component::LinearAttention),
            Mixer::Mamba { .. } => Some(Component::Mamba),
            _ => None,
        }
    };
    let is_moe = |layer: usize| {
        model
            .moe
            .as_ref()
            .is_some_and(|m| !m.dense_layers.contains(&(layer as u64)))
    };
    // Per block: which checked components it holds.
    let mut held: Vec<[bool; 4]> = vec![[false; 4]; main];
    const CHECKED: [Component; 4] = [
        Component::Attention,
        Component::LinearAttention,
        Component::Mamba,
        Component::Experts,
    ];
    // (block, component) of the first misplaced tensor of each component, and its name.
    let mut misplaced: BTreeMap<Component, (usize, &str)> = BTreeMap::new();
    for record in records {
        let Kind::Param { component, .. } = record.kind else {
            continue;
        };
        let Some(slot) = CHECKED.iter().position(|c| *c == component) else {
            continue;
        };
        let Some(layer) = record.position.layer().map(|l| l as usize).filter(|l| *l < main) else {
            continue;
        };
        held[layer][slot] = true;
        let fits = match component {
            Component::Experts => is_moe(layer),
            _ => kind_of(&model.layers[layer]) == Some(component),
        };
        if !fits {
            misplaced
                .entry(component)
                .or_insert((layer, shapes.name(record.shape_id)));
        }
    }
    // The wire names: `attention`, `mamba`, …; `full`, `none`, … for a layer's kind.
    let wire = |value: serde_json::Value, field: Option<&str>| {
        let value = match field {
            Some(field) => value.get(field).cloned().unwrap_or_default(),
            None => value,
        };
        value.as_str().unwrap_or("other").to_owned()
    };
    let name_of = |c: Component| wire(serde_json::to_value(c).unwrap_or_default(), None);
    for (component, (layer, name)) in misplaced {
        let kind = wire(
            serde_json::to_value(model.layers[layer].wire()).unwrap_or_default(),
            Some("kind"),
        );
        let what = match component {
            Component::Experts => "routed experts in a block the key/values do not make a MoE layer".to_owned(),
            _ => format!(
                "`{}` tensors in a block the key/values make a `{kind}` layer",
                name_of(component)
            ),
        };
        findings.push(
            Code::ConfigShapeMismatch,
            name.replacen(".N.", &format!(".{layer}."), 1),
            format!("{what}: llama.cpp loads a block's tensors by its kind"),
        );
    }
    let mut missing: BTreeMap<Component, (usize, u64)> = BTreeMap::new();
    for (layer, mixer) in model.layers.iter().enumerate() {
        let expected = [kind_of(mixer), is_moe(layer).then_some(Component::Experts)];
        for component in expected.into_iter().flatten() {
            let slot = CHECKED.iter().position(|c| *c == component).unwrap_or(0);
            if !held[layer][slot] {
                missing.entry(component).or_insert((layer, 0)).1 += 1;
            }
        }
    }
    for (component, (layer, count)) in missing {
        let finding = findings.push(
            Code::ConfigShapeMismatch,
            format!("blk.{layer}"),
            format!(
                "{count} block(s) whose key/values call for `{}` tensors hold none (the first: block {layer})",
                name_of(component)
            ),
        );
        finding.observed = Some(count.into());
    }
}

/// The key/values against the tensors they size, as safetensors shapes are checked against
/// config.json: a header whose keys understate its tensors (one KV head of dimension 1 beside
/// K projections of 8 × 128) would otherwise plan a cache a thousand times too small. GGUF
/// dimensions run innermost first: a projection is `[inputs, outputs]`. A family's own rule
/// for a tensor and dimension (`rules`, in GGUF order, matched as patterns) replaces the
/// generic one (Qwen3.5's `attn_q` carries the output gate: twice the heads) or checks a
/// dimension nothing generic does (Nemotron-H's `ssm_*` tensors against `ssm.*`).
fn gguf_shape_check<'t>(
    records: &[Record],
    shapes: &Shapes,
    model: &Model,
    rules: &[ShapeRule],
    kv: &BTreeMap<String, Value>,
    tensor: impl Fn(u32) -> &'t gguf::TensorInfo,
    findings: &mut Findings,
) {
    use crate::model::Mixer;
    let arch = match kv.get("general.architecture") {
        Some(Value::String(s)) => s.as_str(),
        _ => return,
    };
    // The dense width per block, as the loader reads it (one value, or one per block).
    let ffn_key = format!("{arch}.feed_forward_length");
    let ffn_of = |layer: usize| -> Option<u64> {
        match kv.get(&ffn_key)? {
            Value::Array(values) => values.get(layer).and_then(as_u64),
            value => as_u64(value),
        }
    };
    let moe = model.moe.as_ref();
    let expert_width = moe.and_then(|m| m.expert_intermediate_size);
    let mut errors: BTreeMap<(String, usize), (u64, u64, &'static str, &str)> = BTreeMap::new();
    let mut family_rules: FastMap<ShapeId, Vec<(usize, u64, &'static str)>> = FastMap::default();
    for record in records {
        let Kind::Param { .. } = record.kind else {
            continue;
        };
        let name = shapes.name(record.shape_id);
        let layer = record.position.layer().map(|l| l as usize);
        let mixer = layer.and_then(|l| model.layers.get(l));
        let attention = match mixer {
            Some(Mixer::Attention {
                kv_heads,
                head_dim,
                v_head_dim,
                ..
            }) => Some((*kv_heads, *head_dim, *v_head_dim)),
            _ => None,
        };
        let mut expect: Vec<(usize, Option<u64>, &'static str)> = Vec::new();
        match name {
            "token_embd.weight" | "output.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                expect.push((1, Some(model.vocab), "vocab_size (or the token list's length)"));
            }
            "blk.N.attn_q.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                if let Some((_, head_dim, _)) = attention {
                    expect.push((
                        1,
                        Some(model.heads.saturating_mul(head_dim)),
                        "attention.head_count × key_length",
                    ));
                }
            }
            "blk.N.attn_k.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                if let Some((kv_heads, head_dim, _)) = attention {
                    expect.push((
                        1,
                        Some(kv_heads.saturating_mul(head_dim)),
                        "attention.head_count_kv × key_length",
                    ));
                }
            }
            "blk.N.attn_v.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                if let Some((kv_heads, _, v_head_dim)) = attention {
                    expect.push((
                        1,
                        Some(kv_heads.saturating_mul(v_head_dim)),
                        "attention.head_count_kv × value_length",
                    ));
                }
            }
            "blk.N.attn_qkv.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                if let Some((kv_heads, head_dim, _)) = attention {
                    let heads = model.heads.saturating_add(kv_heads.saturating_mul(2));
                    expect.push((
                        1,
                        Some(heads.saturating_mul(head_dim)),
                        "(head_count + 2 × head_count_kv) × key_length",
                    ));
                }
            }
            "blk.N.attn_output.weight" => {
                if let Some((_, _, v_head_dim)) = attention {
                    expect.push((
                        0,
                        Some(model.heads.saturating_mul(v_head_dim)),
                        "attention.head_count × value_length",
                    ));
                }
                expect.push((1, Some(model.hidden), "embedding_length"));
            }
            "blk.N.ffn_gate.weight" | "blk.N.ffn_up.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                expect.push((1, layer.and_then(ffn_of), "feed_forward_length"));
            }
            "blk.N.ffn_down.weight" => {
                expect.push((0, layer.and_then(ffn_of), "feed_forward_length"));
                expect.push((1, Some(model.hidden), "embedding_length"));
            }
            "blk.N.ffn_gate_inp.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                expect.push((1, moe.map(|m| m.experts), "expert_count"));
            }
            "blk.N.ffn_gate_exps.weight" | "blk.N.ffn_up_exps.weight" => {
                expect.push((0, Some(model.hidden), "embedding_length"));
                expect.push((1, expert_width, "expert_feed_forward_length"));
                expect.push((2, moe.map(|m| m.experts), "expert_count"));
            }
            "blk.N.ffn_down_exps.weight" => {
                expect.push((0, expert_width, "expert_feed_forward_length"));
                expect.push((1, Some(model.hidden), "embedding_length"));
                expect.push((2, moe.map(|m| m.experts), "expert_count"));
            }
            _ => {}
        }
        // The family's rules for this name, decided once per shape: each replaces the generic
        // check of its dimension, or adds one where there is none.
        let family = family_rules.entry(record.shape_id).or_insert_with(|| {
            rules
                .iter()
                .filter(|r| pattern_matches(r.pattern, name))
                .map(|r| (r.dim, r.value, r.keys))
                .collect()
        });
        for &(dim, value, keys) in family.iter() {
            match expect.iter_mut().find(|(d, _, _)| *d == dim) {
                Some(slot) => *slot = (dim, Some(value), keys),
                None => expect.push((dim, Some(value), keys)),
            }
        }
        for (dim, value, keys) in expect {
            let Some(value) = value else { continue };
            let found = tensor(record.tensor).dims.get(dim).copied();
            if found != Some(value) {
                errors.entry((name.to_owned(), dim)).or_insert((
                    value,
                    found.unwrap_or(0),
                    keys,
                    tensor(record.tensor).name.as_str(),
                ));
            }
        }
    }
    for ((_, dim), (declared, observed, keys, example)) in errors {
        findings.mismatch(
            Code::ConfigShapeMismatch,
            example,
            declared,
            observed,
            format!("dimension {dim} should be {keys}"),
        );
    }
}

/// A llama.cpp tensor's component: the family's own names first, then the common ones;
/// blocks past the main stack are MTP (`nextn`) layers.
fn classify(family: &families::Family, normalized: &str, past_main: bool) -> Option<(Component, Placement)> {
    let extra = family.gguf.as_ref().map_or(&[][..], |g| g.tensors);
    let group = extra
        .iter()
        .chain(llama_cpp::TENSORS)
        .find(|g| pattern_matches(g.pattern, normalized))?;
    let component = match past_main && group.component != Component::Buffer {
        true => Component::Mtp,
        false => group.component,
    };
    let replicated =
        component.is_replicated() || llama_cpp::TP_REPLICATED.iter().any(|p| pattern_matches(p, normalized));
    Some((
        component,
        if replicated {
            Placement::Replicated
        } else {
            Placement::Sharded
        },
    ))
}

/// The family's reading of the key/values, with every key graded; `None` with findings.
fn understand(
    kv: &BTreeMap<String, Value>,
    findings: &mut Findings,
) -> Option<(&'static families::Family, families::Normalized)> {
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
    let Some((family, model_type)) = families::for_gguf_architecture(arch_name) else {
        let finding = findings.push(
            Code::ArchitectureUnknown,
            "general.architecture",
            format!("`{arch_name}` is not an architecture the planner knows; it is refused rather than approximated"),
        );
        finding.observed = Some(arch_name.into());
        return None;
    };
    let gguf = family.gguf.as_ref()?;
    let mut reader = GgufReader::new(kv, arch_name, findings);
    reader.grade(gguf.keys);
    let mut normalized = (gguf.normalize)(model_type, &mut reader)?;
    normalized.model = normalized
        .model
        .checked(|key| format!("{arch_name}.{}", key.gguf), findings)?;
    Some((family, normalized))
}

fn issue_findings(part: &GgufFile, findings: &mut Findings) {
    for issue in &part.header.issues {
        let subject = |t: &str| format!("{}:{t}", part.name);
        match issue {
            HeaderIssue::Repeated { of, count } => {
                let code = match of {
                    IssueKind::UnknownType => Code::DtypeUnknown,
                    IssueKind::BlockMismatch => Code::GgufBlockMismatch,
                    IssueKind::OffsetsInvalid => Code::HeaderOffsetsInvalid,
                    IssueKind::DuplicateTensor => Code::TensorDuplicate,
                    IssueKind::BeyondFile => Code::HeaderBeyondFile,
                    IssueKind::ShapeOverflow | IssueKind::Repeated => Code::HeaderSizeMismatch,
                };
                findings.count_more(code, *count);
            }
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

/// `Q4_K_M; Q4_K 80.4%, Q6_K 19.6%, F32 0.0%`: the mix by elements, led by the file type
/// by llama.cpp's name when declared.
fn type_mix(kv: &BTreeMap<String, Value>, elements: &BTreeMap<String, u64>) -> String {
    // Element counts are as declared: a hostile header's sum can pass 2^64.
    let total = elements.values().fold(0u64, |acc, n| acc.saturating_add(*n)).max(1);
    let mut mix: Vec<_> = elements.iter().collect();
    mix.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
    let mix = mix
        .iter()
        .map(|(t, n)| format!("{t} {:.1}%", **n as f64 * 100.0 / total as f64))
        .collect::<Vec<_>>()
        .join(", ");
    match uint(kv, "general.file_type") {
        Some(ft) => match llama_cpp::file_type_name(ft) {
            Some(name) => format!("{name}; {mix}"),
            None => format!("file type {ft}; {mix}"),
        },
        None => mix,
    }
}
