//! Planning a safetensors checkpoint: headers and index checked against each other, config
//! read by its family (a multimodal wrapper as a language model plus encoders), every tensor
//! classified once into a record, then folded.

use std::collections::BTreeMap;

use preflight_formats::facts::{ArtifactFacts, SafetensorsFile};
use preflight_formats::index::Index;
use preflight_formats::safetensors::{HeaderIssue, IssueKind};
use serde_json::{Map, Value};

use crate::config::{ConfigReader, Grade};
use crate::config_keys::{self, Implementations};
use crate::families::{self, Encoder, Family, Normalized, Wrapper};
use crate::findings::{Code, Findings};
use crate::memory::WeightsLayout;
use crate::model::Model;
use crate::quant::{self, Role};
use crate::tensors::{
    self, Classifier, DtypeNames, FastMap, Kind, NAMED_PER_FINDING, Position, Record, ShapeCheck, ShapeId, Shapes,
};
use crate::verdict::{Component, Parameters};

/// What planning one safetensors artifact yields.
pub struct Planned {
    pub model: Option<Model>,
    pub parameters: Parameters,
    pub weights_bytes: u64,
    pub tensor_elements_by_dtype: BTreeMap<String, u64>,
    pub layout: WeightsLayout,
}

/// What the config says: the family, its reading, the quantization method, and the encoder
/// tensor prefixes of the wrapper.
struct Understood {
    family: &'static Family,
    normalized: Normalized,
    method: Option<quant::Method>,
    encoders: Vec<(&'static str, Component)>,
}

pub fn plan(
    facts: &ArtifactFacts,
    files: &[SafetensorsFile],
    index: Option<&Index>,
    missing: &[String],
    draft: bool,
    findings: &mut Findings,
) -> Planned {
    let tensors: usize = files.iter().map(|f| f.header.tensors.len()).sum();
    let mut checked = Findings::default();
    let mut read = Findings::default();
    let mut names = DtypeNames::default();
    let mut shapes = Shapes::default();
    // The header and index checks and the classification read the same tensors and share
    // nothing until the scale check below, so a large checkpoint runs them side by side.
    let (located, (understood, records, unmatched)) = side_by_side(
        tensors >= SIDE_BY_SIDE_FROM,
        || {
            // Where each tensor is, by name: needed to compare shards with each other and with
            // the index; one file without an index needs no such map (a million-tensor header
            // would spend tens of MB on it).
            let located = (files.len() > 1 || index.is_some()).then(|| locate(files, &mut checked));
            header_findings(files, &mut checked);
            if let (Some(index), Some(located)) = (index, &located) {
                index_findings(index, files, located, missing, &mut checked);
            }
            located
        },
        || {
            let understood = facts.config.as_ref().and_then(|config| {
                let quant_config = facts.quant_config.as_ref().map(|q| &q.raw);
                understand(&config.raw, quant_config, draft, &mut read)
            });
            if facts.config.is_none() {
                read.push(
                    Code::ConfigMissing,
                    "config.json",
                    "no config.json beside the weights: parameters are counted, the architecture is unknown",
                );
            }
            let (records, unmatched) = records(files, understood.as_ref(), &mut names, &mut shapes);
            (understood, records, unmatched)
        },
    );
    findings.append(checked);
    findings.append(read);
    if !unmatched.is_empty() {
        let located = located.unwrap_or_else(|| locate(files, &mut Findings::default()));
        orphan_scale_findings(&unmatched, &located, findings);
    }
    tensors::unplaced_findings(&records, &shapes, "of this architecture", findings);
    let mut model = understood.as_ref().map(|u| {
        let mut model = u.normalized.model.clone();
        let all: Vec<&preflight_formats::safetensors::TensorInfo> =
            files.iter().flat_map(|f| &f.header.tensors).collect();
        let tensor = |i: u32| {
            let t = all[i as usize];
            (t.name.as_str(), t.shape.as_slice())
        };
        tensors::check_shapes(&records, &shapes, &u.normalized.shapes, tensor, findings);
        model.quantization = u.method.as_ref().map(|m| m.summary.clone());
        model
    });
    match (model.as_mut(), draft) {
        (Some(_), true) => tensors::check_draft_head(&records, findings),
        (Some(model), false) => tensors::check_layers(&records, model, findings),
        (None, _) => {}
    }
    let folded = tensors::fold(&records, &names, model.as_ref(), findings);
    let elements = tensors::elements_by_dtype(&records, &names);
    Planned {
        model,
        parameters: folded.parameters,
        weights_bytes: folded.weights_bytes,
        tensor_elements_by_dtype: elements,
        layout: folded.layout,
    }
}

fn elements_of(shape: &[u64]) -> u64 {
    shape
        .iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(*d))
        .unwrap_or(u64::MAX)
}

/// Tensors past which [`plan`] checks headers and classifies on two threads: below it the
/// whole plan takes well under a millisecond, less than starting a thread.
const SIDE_BY_SIDE_FROM: usize = 8_192;

/// `a` and `b`, on two threads when `parallel` (a panic in either is the caller's panic).
fn side_by_side<A: Send, B>(parallel: bool, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    if !parallel {
        return (a(), b());
    }
    std::thread::scope(|scope| {
        let other = scope.spawn(a);
        let b = b();
        let a = other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (a, b)
    })
}

/// Scales whose parameter was not the tensor before them, checked against every header's
/// names: a scale with no parameter anywhere is a layout the loader cannot use.
fn orphan_scale_findings(unmatched: &[&str], located: &FastMap<&str, &str>, findings: &mut Findings) {
    let mut scaled = String::new();
    let orphans: Vec<&str> = unmatched
        .iter()
        .copied()
        .filter(|scale| {
            let Some((stem, suffix)) = quant::scaled_tensor(scale) else {
                return false;
            };
            scaled.clear();
            scaled.push_str(stem);
            scaled.push_str(suffix);
            !located.contains_key(scaled.as_str())
        })
        .collect();
    group_finding(
        findings,
        Code::QuantizationLayoutInvalid,
        &orphans,
        "are scales for a tensor that is not there",
    );
}

/// Classify every tensor once; each distinct name shape is matched against the family once.
/// Also returns the scales whose parameter is not the tensor before them in their header
/// (writers sort names, so that is rare), for [`orphan_scale_findings`].
fn records<'a>(
    files: &'a [SafetensorsFile],
    understood: Option<&Understood>,
    names: &mut DtypeNames,
    shapes: &mut Shapes,
) -> (Vec<Record>, Vec<&'a str>) {
    let classifier = understood.map(|u| Classifier {
        family: u.family,
        model: &u.normalized.model,
        encoders: u.encoders.clone(),
    });
    let method = understood.and_then(|u| u.method.as_ref());
    type Placed = Option<(Component, crate::families::Placement)>;
    let mut params: FastMap<(ShapeId, bool), Placed> = FastMap::default();
    let mut scales: FastMap<(ShapeId, bool), Placed> = FastMap::default();
    let mut unmatched: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(files.iter().map(|f| f.header.tensors.len()).sum());
    // The tensor before this one in its header: writers sort names, so a scale's parameter
    // usually sits right before it and is found without hashing its name.
    let mut previous: Option<&str> = None;
    for tensor in files.iter().flat_map(|f| &f.header.tensors) {
        let elements = elements_of(&tensor.shape);
        let bytes = tensor.data_offsets[1].saturating_sub(tensor.data_offsets[0]);
        let (base, role) = quant::role(&tensor.name, &tensor.dtype, method);
        let stored = names.intern(&tensor.dtype);
        let shape = shapes.of(&base);
        let kind = match (role, &classifier) {
            (Role::Scale, _) => {
                if let Some((stem, suffix)) = quant::scaled_tensor(&tensor.name) {
                    let is = |name: &str| {
                        name.len() == stem.len() + suffix.len() && name.starts_with(stem) && name.ends_with(suffix)
                    };
                    if !previous.is_some_and(is) {
                        unmatched.push(&tensor.name);
                    }
                }
                let owner = match &classifier {
                    None => None,
                    Some(c) => match scales.get(&(shape.id, c.past_main_stack(shape.layer))) {
                        Some(placed) => *placed,
                        None => {
                            let placed = quant::scale_owner(&tensor.name).and_then(|owner| {
                                let owner = shapes.of(&owner);
                                let name = shapes.name(owner.id).to_owned();
                                c.classify(&name, c.past_main_stack(owner.layer))
                            });
                            scales.insert((shape.id, c.past_main_stack(shape.layer)), placed);
                            placed
                        }
                    },
                };
                Kind::Scale { owner }
            }
            (Role::Param { factor, dtype }, None) => Kind::Unclassified {
                params: elements.saturating_mul(factor),
                dtype: dtype.map_or(stored, |logical| names.intern(logical)),
            },
            (Role::Param { factor, dtype }, Some(c)) => {
                let in_mtp = c.past_main_stack(shape.layer);
                let placed = *params
                    .entry((shape.id, in_mtp))
                    .or_insert_with(|| c.classify(shapes.name(shape.id), in_mtp));
                match placed {
                    Some((component, placement)) => Kind::Param {
                        component,
                        placement,
                        params: match component {
                            Component::Buffer => 0,
                            _ => elements.saturating_mul(factor),
                        },
                        dtype: dtype.map_or(stored, |logical| names.intern(logical)),
                        // Packed storage reshapes: GPTQ/AWQ transpose, bitsandbytes flattens,
                        // NVFP4 halves the last dimension. MXFP4 blocks keep the experts first.
                        checked: match (factor, dtype) {
                            (1, _) => ShapeCheck::All,
                            (_, Some("MXFP4" | "NVFP4")) => ShapeCheck::Leading,
                            _ => ShapeCheck::None,
                        },
                    },
                    None => Kind::Unplaced,
                }
            }
        };
        out.push(Record {
            tensor: u32::try_from(out.len()).unwrap_or(u32::MAX),
            shape_id: shape.id,
            stored,
            elements,
            bytes,
            position: Position::new(shape.layer, shape.expert),
            kind,
        });
        previous = Some(&tensor.name);
    }
    (out, unmatched)
}

/// Read the config: a wrapper's `text_config` as the language model and its encoders'
/// configs against their own registries; `None` with findings saying why.
fn understand(
    raw: &Map<String, Value>,
    quant_config: Option<&Map<String, Value>>,
    draft: bool,
    findings: &mut Findings,
) -> Option<Understood> {
    let top_type = raw.get("model_type").and_then(Value::as_str);
    let (map, prefix) = match raw.get("text_config").and_then(Value::as_object) {
        Some(text) => (text, "text_config."),
        None => (raw, ""),
    };
    let model_type = match map.get("model_type").and_then(Value::as_str) {
        Some(t) => t,
        None => {
            findings.push(
                Code::ConfigMissingKey,
                format!("config.{prefix}model_type"),
                "model_type is required to know the architecture",
            );
            return None;
        }
    };
    let family = match draft {
        // A draft head is read as one whatever its config calls itself.
        true => families::eagle3_draft(model_type),
        false => families::for_model_type(model_type),
    };
    let Some(family) = family else {
        if draft {
            let finding = findings.push(
                Code::ArchitectureUnknown,
                format!("config.{prefix}model_type"),
                format!("an EAGLE-3 draft head of model_type `{model_type}` is not modelled: vLLM 0.19 reads `llama` heads (Eagle3LlamaForCausalLM)"),
            );
            finding.observed = Some(model_type.into());
            return None;
        }
        let finding = findings.push(
            Code::ArchitectureUnknown,
            format!("config.{prefix}model_type"),
            format!("`{model_type}` is not an architecture the planner knows; it is refused rather than approximated"),
        );
        finding.observed = Some(model_type.into());
        return None;
    };
    // The implementations the data grades against: transformers' for the model types (a
    // wrapper's too, whose modeling reads its `text_config`), vLLM's for `architectures[0]`.
    let architecture = raw
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    let reference = Implementations {
        model_types: [Some(model_type), top_type.filter(|_| !prefix.is_empty())]
            .into_iter()
            .flatten()
            .collect(),
        architectures: architecture.into_iter().collect(),
    };
    let mut encoders = Vec::new();
    if !prefix.is_empty() {
        let wrapper = top_type
            .and_then(families::for_wrapper)
            .filter(|(f, _)| std::ptr::eq(*f, family))
            .map(|(_, w)| w);
        let wrapper_reference = Implementations {
            model_types: top_type.into_iter().collect(),
            architectures: reference.architectures.clone(),
        };
        encoders = grade_wrapper(raw, wrapper, &wrapper_reference, findings);
    }
    let method = match quant::declared(raw, map, quant_config) {
        Some(q) => Some(quant::recognise(&q, findings)?),
        None => None,
    };
    let defaulted = family.with_defaults(model_type, map);
    let mut reader = ConfigReader::new(defaulted.as_ref().unwrap_or(map), prefix, findings);
    reader.grade_keys_by(&[family.keys, family.more_keys].concat(), &reference);
    let mut normalized = (family.normalize)(model_type, &mut reader)?;
    normalized.model = normalized
        .model
        .checked(|key| format!("config.{prefix}{}", key.config), findings)?;
    if let Some(profile) = family.encoder_profile
        && !encoders.is_empty()
        && let Some(wrapper) = top_type
    {
        normalized.model.encoder_profile = profile(wrapper, raw, &normalized.model);
    }
    if !prefix.is_empty()
        && let Some(tie) = raw.get("tie_word_embeddings").and_then(Value::as_bool)
    {
        // A wrapper's own flag decides whether the built model shares its embeddings
        // (Qwen3-VL-MoE's text_config defaults to tied while the wrapper says untied).
        normalized.model.tie_word_embeddings = tie;
    }
    Some(Understood {
        family,
        normalized,
        method,
        encoders,
    })
}

/// The wrapper's own keys (its family's rules, then the data for the wrapper's model type),
/// and each encoder's config against the encoder's registry; returns the encoders' tensor
/// prefixes. A wrapper no family names (any known text model with any known encoder) takes
/// for each encoder config the known encoder whose registry grades most of its keys.
fn grade_wrapper(
    raw: &Map<String, Value>,
    wrapper: Option<&Wrapper>,
    reference: &Implementations,
    findings: &mut Findings,
) -> Vec<(&'static str, Component)> {
    let chosen: Vec<&'static Encoder> = match wrapper {
        Some(wrapper) => wrapper.encoders.iter().collect(),
        None => ENCODER_KEYS
            .iter()
            .filter_map(|key| {
                let config = raw.get(*key).and_then(Value::as_object)?;
                families::FAMILIES
                    .iter()
                    .flat_map(|f| f.wrappers)
                    .flat_map(|w| w.encoders)
                    .filter(|e| e.config_key == *key)
                    .enumerate()
                    .max_by_key(|(i, e)| {
                        let known = config
                            .keys()
                            .filter(|k| e.keys.iter().chain(crate::config::COMMON_KEYS).any(|(n, _)| n == *k))
                            .count();
                        // Ties go to the first registered (`max_by_key` keeps the last).
                        (known, std::cmp::Reverse(*i))
                    })
                    .map(|(_, e)| e)
            })
            .collect(),
    };
    // Without a data entry for the wrapper's model type, only `text_config` is understood.
    let known_wrapper = wrapper.is_some() || reference.model_types.iter().any(|t| config_keys::knows_model_type(t));
    let mut own: Vec<(&str, Grade)> = vec![("text_config", Grade::Consumed)];
    if let Some(wrapper) = wrapper {
        own.extend(wrapper.keys.iter().copied());
    }
    if known_wrapper {
        own.extend(chosen.iter().map(|e| (e.config_key, Grade::Consumed)));
        ConfigReader::new(raw, "", findings).grade_keys_by(&own, reference);
    } else {
        ConfigReader::new(raw, "", findings).grade_keys(&own, &[]);
        return Vec::new();
    }
    for encoder in &chosen {
        if let Some(config) = raw.get(encoder.config_key).and_then(Value::as_object) {
            ConfigReader::new(config, format!("{}.", encoder.config_key), findings).grade_keys(encoder.keys, &[]);
        }
    }
    chosen.iter().flat_map(|e| e.tensors.iter().copied()).collect()
}

/// The keys a wrapper keeps its encoders' configs under.
const ENCODER_KEYS: &[&str] = &["vision_config", "audio_config"];

/// The finding code for a header issue kind (as the reader counts them in `Repeated`).
fn issue_code(kind: IssueKind) -> Code {
    match kind {
        IssueKind::UnknownDtype => Code::DtypeUnknown,
        IssueKind::DuplicateTensor => Code::TensorDuplicate,
        IssueKind::OffsetsInvalid => Code::HeaderOffsetsInvalid,
        IssueKind::BeyondFile | IssueKind::TrailingBytes => Code::HeaderBeyondFile,
        // The data is not what the header says.
        IssueKind::SizeMismatch | IssueKind::ShapeOverflow | IssueKind::Repeated => Code::HeaderSizeMismatch,
    }
}

/// Where each tensor is (name → file), the map the cross-file checks look names up in; a
/// name in two files is a `tensor.duplicate` finding.
fn locate<'a>(files: &'a [SafetensorsFile], findings: &mut Findings) -> FastMap<&'a str, &'a str> {
    let mut seen: FastMap<&str, &str> = FastMap::default();
    seen.reserve(files.iter().map(|f| f.header.tensors.len()).sum());
    for file in files {
        for tensor in &file.header.tensors {
            if let Some(previous) = seen.insert(&tensor.name, &file.name)
                && previous != file.name
            {
                findings.push(
                    Code::TensorDuplicate,
                    tensor.name.clone(),
                    format!("in both {previous} and {}", file.name),
                );
            }
        }
    }
    seen
}

/// Each header's own issues as findings.
fn header_findings(files: &[SafetensorsFile], findings: &mut Findings) {
    for file in files {
        for issue in &file.header.issues {
            let (code, subject, detail) = match issue {
                HeaderIssue::Repeated { of, count } => {
                    findings.count_more(issue_code(*of), *count);
                    continue;
                }
                HeaderIssue::UnknownDtype { tensor, dtype } => (
                    Code::DtypeUnknown,
                    tensor.clone(),
                    format!("dtype `{dtype}` has no known width"),
                ),
                HeaderIssue::DuplicateTensor { tensor } => (
                    Code::TensorDuplicate,
                    tensor.clone(),
                    "declared twice in one header".to_owned(),
                ),
                HeaderIssue::OffsetsInvalid { tensor, detail } => {
                    (Code::HeaderOffsetsInvalid, tensor.clone(), detail.clone())
                }
                HeaderIssue::SizeMismatch {
                    tensor,
                    declared,
                    expected,
                } => {
                    findings.mismatch(
                        Code::HeaderSizeMismatch,
                        format!("{}:{tensor}", file.name),
                        *declared,
                        *expected,
                        "byte range is not elements × dtype width",
                    );
                    continue;
                }
                HeaderIssue::BeyondFile { data_end, file_size } => {
                    findings.mismatch(
                        Code::HeaderBeyondFile,
                        file.name.clone(),
                        *data_end,
                        *file_size,
                        "the header's data section does not match the file size",
                    );
                    continue;
                }
                HeaderIssue::ShapeOverflow { tensor } => (
                    Code::HeaderSizeMismatch,
                    tensor.clone(),
                    "the shape's size does not fit in 64 bits".to_owned(),
                ),
                HeaderIssue::TrailingBytes { data_end, file_size } => {
                    findings.mismatch(
                        Code::HeaderBeyondFile,
                        file.name.clone(),
                        *data_end,
                        *file_size,
                        "the file is longer than its header and data: bytes no tensor accounts for",
                    );
                    continue;
                }
            };
            findings.push(code, format!("{}:{subject}", file.name), detail);
        }
    }
}

fn index_findings(
    index: &Index,
    files: &[SafetensorsFile],
    located: &FastMap<&str, &str>,
    missing: &[String],
    findings: &mut Findings,
) {
    for shard in missing {
        findings.push(
            Code::IndexMissingShard,
            shard.clone(),
            "the index names this shard but it is not there",
        );
    }
    let mut absent = Vec::new();
    let mut listed_and_present = 0usize;
    for (tensor, shard) in &index.weight_map {
        let found = located.get(tensor.as_str());
        listed_and_present += usize::from(found.is_some());
        match found {
            None if !missing.contains(shard) => absent.push(tensor.as_str()),
            Some(found) if found != shard => {
                findings.mismatch(
                    Code::IndexWrongShard,
                    tensor.clone(),
                    shard.as_str(),
                    *found,
                    "the index places this tensor in another shard",
                );
            }
            _ => {}
        }
    }
    group_finding(
        findings,
        Code::IndexMissingTensor,
        &absent,
        "listed in the index but in no shard header",
    );
    // Every present tensor the index lists was counted above; only when some are left over
    // is it worth finding which.
    let unlisted: Vec<&str> = match listed_and_present == located.len() {
        true => Vec::new(),
        false => located
            .keys()
            .copied()
            .filter(|t| !index.weight_map.contains_key(*t))
            .collect(),
    };
    group_finding(
        findings,
        Code::IndexUnlistedTensor,
        &unlisted,
        "in a shard header but not in the index",
    );
    if let Some(total) = index.total_size
        && missing.is_empty()
    {
        let data: u64 = files
            .iter()
            .map(|f| f.header.tensors.iter().map(|t| t.data_offsets[1]).max().unwrap_or(0))
            .fold(0u64, u64::saturating_add);
        if data != total {
            findings.mismatch(
                Code::IndexTotalSizeMismatch,
                "model.safetensors.index.json:metadata.total_size",
                total,
                data,
                "differs from the sum of the shards' data sections",
            );
        }
    }
}

fn group_finding(findings: &mut Findings, code: Code, names: &[&str], what: &str) {
    if names.is_empty() {
        return;
    }
    let mut names = names.to_vec();
    names.sort_unstable();
    let shown = names
        .iter()
        .take(NAMED_PER_FINDING)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = names.len().saturating_sub(NAMED_PER_FINDING);
    let detail = if more > 0 {
        format!("{} tensors {what}: {shown} and {more} more", names.len())
    } else {
        format!("{} tensor(s) {what}: {shown}", names.len())
    };
    let finding = findings.push(code, names[0].to_owned(), detail);
    finding.observed = Some(names.len().into());
}
