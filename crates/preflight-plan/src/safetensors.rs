//! Planning a safetensors checkpoint: headers and index checked against each other, config
//! normalised by its family, every tensor placed in a component and counted.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use preflight_formats::facts::{ArtifactFacts, SafetensorsFile};
use preflight_formats::index::Index;
use preflight_formats::safetensors::HeaderIssue;
use serde_json::Value;

use crate::config::ConfigReader;
use crate::families::{self, Component, Family, Normalized, pattern_matches};
use crate::findings::{Code, Findings};
use crate::memory::WeightsLayout;
use crate::quant::{self, Role};
use crate::verdict::{Architecture, Parameters};

/// What planning one safetensors artifact yields.
pub struct Planned {
    pub architecture: Option<Architecture>,
    pub parameters: Parameters,
    pub weights_bytes: u64,
    pub tensor_elements_by_dtype: BTreeMap<String, u64>,
    pub layout: WeightsLayout,
}

pub fn plan(
    facts: &ArtifactFacts,
    files: &[SafetensorsFile],
    index: Option<&Index>,
    missing: &[String],
    findings: &mut Findings,
) -> Planned {
    header_findings(files, findings);
    if let Some(index) = index {
        index_findings(index, files, missing, findings);
    }
    let normalized = facts
        .config
        .as_ref()
        .and_then(|config| normalize_config(&config.raw, findings));
    if facts.config.is_none() {
        findings.push(
            Code::ConfigMissing,
            "config.json",
            "no config.json beside the weights: parameters are counted, the architecture is unknown",
        );
    }
    let (family, normalized, method) = match normalized {
        Some((family, normalized, method)) => (Some(family), Some(normalized), method),
        None => (None, None, None),
    };
    let mut tally = Tally::default();
    tally.count(files, family, normalized.as_ref(), method.as_ref(), findings);
    let mut architecture = normalized.map(|n| n.architecture);
    if let (Some(arch), Some(method)) = (architecture.as_mut(), method) {
        arch.quantization = Some(method.summary);
    }
    if let Some(arch) = &architecture {
        tally.check_layers(arch, findings);
    }
    let parameters = tally.parameters(architecture.as_ref(), findings);
    Planned {
        architecture,
        parameters,
        weights_bytes: tally.weights_bytes,
        tensor_elements_by_dtype: tally.elements_by_dtype,
        layout: tally.layout,
    }
}

/// The family, its reading of the config, and the quantization method, or `None` with
/// findings saying why. A multimodal wrapper's `text_config` is read as the model.
fn normalize_config(
    raw: &serde_json::Map<String, Value>,
    findings: &mut Findings,
) -> Option<(&'static Family, Normalized, Option<quant::Method>)> {
    let (map, prefix) = match raw.get("text_config").and_then(Value::as_object) {
        Some(text) => (text, "text_config."),
        None => (raw, ""),
    };
    let Some(model_type) = map.get("model_type").and_then(Value::as_str) else {
        findings.push(
            Code::ConfigMissingKey,
            format!("config.{prefix}model_type"),
            "model_type is required to know the architecture",
        );
        return None;
    };
    let Some(family) = families::for_model_type(model_type) else {
        let finding = findings.push(
            Code::ArchitectureUnknown,
            format!("config.{prefix}model_type"),
            format!("`{model_type}` is not an architecture the planner knows; it is refused rather than approximated"),
        );
        finding.observed = Some(model_type.into());
        return None;
    };
    if !prefix.is_empty() {
        // The wrapper's own keys: only identity and the nested text model are understood.
        let mut outer = ConfigReader::new(raw, "", findings);
        outer.grade_keys(&[("text_config", crate::config::Grade::Consumed)], &[]);
    }
    let method = match raw
        .get("quantization_config")
        .or_else(|| map.get("quantization_config"))
    {
        Some(q) => Some(quant::recognise(q, findings)?),
        None => None,
    };
    let mut reader = ConfigReader::new(map, prefix, findings);
    reader.grade_keys(family.keys, &[]);
    let normalized = (family.normalize)(model_type, &mut reader)?;
    Some((family, normalized, method))
}

fn header_findings(files: &[SafetensorsFile], findings: &mut Findings) {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for file in files {
        for issue in &file.header.issues {
            let (code, subject, detail) = match issue {
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
}

/// At most this many tensors are named one by one in an index finding; the rest are counted.
const NAMED_PER_FINDING: usize = 5;

fn index_findings(index: &Index, files: &[SafetensorsFile], missing: &[String], findings: &mut Findings) {
    for shard in missing {
        findings.push(
            Code::IndexMissingShard,
            shard.clone(),
            "the index names this shard but it is not there",
        );
    }
    let mut located: HashMap<&str, &str> = HashMap::new();
    for file in files {
        for tensor in &file.header.tensors {
            located.insert(&tensor.name, &file.name);
        }
    }
    let mut absent = Vec::new();
    for (tensor, shard) in &index.weight_map {
        match located.get(tensor.as_str()) {
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
    let unlisted: Vec<&str> = located
        .keys()
        .copied()
        .filter(|t| !index.weight_map.contains_key(*t))
        .collect();
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
            .sum();
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

/// A tensor name with wrapper prefixes folded onto the plain decoder's names and every
/// numeric segment replaced by `N`, plus its layer and expert indices.
struct NameShape {
    normalized: String,
    layer: Option<u64>,
    expert: Option<u64>,
}

fn shape_of_name(name: &str) -> NameShape {
    let folded = name
        .strip_prefix("model.language_model.")
        .or_else(|| name.strip_prefix("language_model.model."))
        .map(|rest| format!("model.{rest}"))
        .or_else(|| {
            name.strip_prefix("language_model.lm_head.")
                .map(|rest| format!("lm_head.{rest}"))
        });
    let name = folded.as_deref().unwrap_or(name);
    let mut normalized = String::with_capacity(name.len());
    let (mut layer, mut expert) = (None, None);
    let mut previous = "";
    for (i, segment) in name.split('.').enumerate() {
        if i > 0 {
            normalized.push('.');
        }
        match segment.parse::<u64>() {
            Ok(n) if !segment.is_empty() => {
                normalized.push('N');
                match previous {
                    "layers" if layer.is_none() => layer = Some(n),
                    "experts" if expert.is_none() => expert = Some(n),
                    _ => {}
                }
            }
            _ => normalized.push_str(segment),
        }
        previous = segment;
    }
    NameShape {
        normalized,
        layer,
        expert,
    }
}

/// Running totals over every tensor of an artifact.
#[derive(Default)]
struct Tally {
    by_component: BTreeMap<Component, u64>,
    by_dtype: BTreeMap<String, u64>,
    elements_by_dtype: BTreeMap<String, u64>,
    weights_bytes: u64,
    /// Main-stack layers seen, and MTP layers seen.
    layers: BTreeSet<u64>,
    /// Layers holding routed experts, and the distinct expert indices seen per layer.
    expert_layers: BTreeSet<u64>,
    experts_seen: HashSet<(u64, u64)>,
    embedding_stored: bool,
    /// lm_head's parameters by dtype, to take back out when embeddings are tied.
    lm_head_by_dtype: BTreeMap<String, u64>,
    buffers: u64,
    /// Bytes by component and tensor-parallel placement, for memory planning.
    layout: WeightsLayout,
}

impl Tally {
    fn count(
        &mut self,
        files: &[SafetensorsFile],
        family: Option<&Family>,
        normalized: Option<&Normalized>,
        method: Option<&quant::Method>,
        findings: &mut Findings,
    ) {
        let main_layers = normalized.map(|n| n.architecture.layers);
        let mut names: HashSet<&str> = HashSet::new();
        for file in files {
            names.extend(file.header.tensors.iter().map(|t| t.name.as_str()));
        }
        let mut unplaced: BTreeMap<String, u64> = BTreeMap::new();
        let mut orphan_scales: Vec<&str> = Vec::new();
        let mut shape_errors: BTreeMap<(&'static str, usize), (u64, u64, &'static str, String)> = BTreeMap::new();
        for file in files {
            for tensor in &file.header.tensors {
                let elements = tensor
                    .shape
                    .iter()
                    .try_fold(1u64, |acc, d| acc.checked_mul(*d))
                    .unwrap_or(u64::MAX);
                add(
                    self.elements_by_dtype.entry(tensor.dtype.clone()).or_default(),
                    elements,
                );
                let bytes = tensor.data_offsets[1].saturating_sub(tensor.data_offsets[0]);
                add(&mut self.weights_bytes, bytes);
                let (base, role) = quant::role(&tensor.name, &tensor.dtype, method);
                let shape = shape_of_name(&base);
                let Role::Param { factor, dtype } = role else {
                    if let Some(scaled) = quant::scaled_tensor(&tensor.name)
                        && !names.contains(scaled.as_str())
                    {
                        orphan_scales.push(&tensor.name);
                    }
                    if let Some(family) = family {
                        self.place_scale(family, &tensor.name, bytes, main_layers);
                    }
                    continue;
                };
                let Some(family) = family else {
                    // No architecture: count everything as parameters of no known component.
                    add(
                        self.by_dtype
                            .entry(dtype.unwrap_or(&tensor.dtype).to_owned())
                            .or_default(),
                        elements.saturating_mul(factor),
                    );
                    continue;
                };
                let is_mtp = matches!((shape.layer, main_layers), (Some(l), Some(main)) if l >= main);
                let Some(component) = family.classify(&shape.normalized, is_mtp) else {
                    self.layout.add_unplaced(bytes);
                    *unplaced.entry(shape.normalized).or_default() += 1;
                    continue;
                };
                if let Some(layer) = shape.layer {
                    self.layers.insert(layer);
                }
                let params = match component {
                    Component::Buffer => 0,
                    _ => elements.saturating_mul(factor),
                };
                let placement = family.placement(&shape.normalized, component);
                self.layout.add(component, placement, params, bytes);
                match component {
                    Component::Buffer => {
                        self.buffers += 1;
                        continue;
                    }
                    Component::Experts => {
                        if let Some(layer) = shape.layer {
                            self.expert_layers.insert(layer);
                            if let Some(expert) = shape.expert {
                                self.experts_seen.insert((layer, expert));
                            }
                        }
                    }
                    Component::Embedding => self.embedding_stored = true,
                    _ => {}
                }
                if let Some(rules) = normalized.map(|n| &n.shapes) {
                    for rule in rules.iter().filter(|r| pattern_matches(r.pattern, &shape.normalized)) {
                        // Packed storage reshapes: GPTQ/AWQ transpose, bitsandbytes flattens.
                        // Only MXFP4 blocks keep a logical leading dimension (the experts).
                        let unchecked = factor != 1 && !(dtype == Some("MXFP4") && rule.dim == 0);
                        match tensor.shape.get(rule.dim) {
                            Some(found) if *found == rule.value || unchecked => {}
                            found => {
                                shape_errors.entry((rule.pattern, rule.dim)).or_insert((
                                    rule.value,
                                    found.copied().unwrap_or(0),
                                    rule.keys,
                                    tensor.name.clone(),
                                ));
                            }
                        }
                    }
                }
                let dtype = dtype.unwrap_or(&tensor.dtype);
                add(self.by_component.entry(component).or_default(), params);
                add(self.by_dtype.entry(dtype.to_owned()).or_default(), params);
                if component == Component::LmHead {
                    add(self.lm_head_by_dtype.entry(dtype.to_owned()).or_default(), params);
                }
            }
        }
        for (pattern, count) in unplaced {
            let finding = findings.push(
                Code::TensorUnplaced,
                pattern.clone(),
                format!("{count} tensor(s) named like `{pattern}` belong to no component of this architecture"),
            );
            finding.observed = Some(count.into());
        }
        group_finding(
            findings,
            Code::QuantizationLayoutInvalid,
            &orphan_scales,
            "are scales for a tensor that is not there",
        );
        for ((_, dim), (declared, observed, keys, example)) in shape_errors {
            findings.mismatch(
                Code::ConfigShapeMismatch,
                example,
                declared,
                observed,
                format!("dimension {dim} should be {keys}"),
            );
        }
        if self.buffers > 0 {
            findings.push(
                Code::TensorBuffersExcluded,
                "buffers",
                format!(
                    "{} stored buffer tensor(s) are not parameters and are not counted in parameters",
                    self.buffers
                ),
            );
        }
    }

    /// Count a scale's bytes with the parameter it scales; a scale of nothing the family
    /// places is unplaced (conservatively replicated).
    fn place_scale(&mut self, family: &Family, name: &str, bytes: u64, main_layers: Option<u64>) {
        let placed = quant::scale_owner(name).and_then(|owner| {
            let shape = shape_of_name(&owner);
            let is_mtp = matches!((shape.layer, main_layers), (Some(l), Some(main)) if l >= main);
            let component = family.classify(&shape.normalized, is_mtp)?;
            Some((component, family.placement(&shape.normalized, component)))
        });
        match placed {
            Some((component, placement)) => self.layout.add(component, placement, 0, bytes),
            None => self.layout.add_unplaced(bytes),
        }
    }

    fn check_layers(&self, arch: &Architecture, findings: &mut Findings) {
        let declared = arch.layers.saturating_add(arch.mtp_layers);
        if !Architecture::layers_complete(&self.layers, declared) {
            let main = self.layers.iter().filter(|l| **l < arch.layers).count();
            let extra: Vec<u64> = self
                .layers
                .iter()
                .copied()
                .filter(|l| *l >= declared)
                .take(NAMED_PER_FINDING)
                .collect();
            let absent: Vec<u64> = (0..declared)
                .filter(|l| !self.layers.contains(l))
                .take(NAMED_PER_FINDING)
                .collect();
            findings.mismatch(
                Code::ConfigLayerCountMismatch,
                "config.num_hidden_layers",
                declared,
                self.layers.len(),
                format!("{main} main layers present; missing layers {absent:?}, unexpected layers {extra:?} (first {NAMED_PER_FINDING} of each)"),
            );
        }
        if let Some(moe) = &arch.moe {
            let expected: BTreeSet<u64> = (0..arch.layers).filter(|l| !moe.dense_layers.contains(l)).collect();
            let found: BTreeSet<u64> = self
                .expert_layers
                .iter()
                .copied()
                .filter(|l| *l < arch.layers)
                .collect();
            if found != expected {
                findings.mismatch(
                    Code::ConfigShapeMismatch,
                    "experts",
                    expected.len(),
                    found.len(),
                    "the layers holding routed experts are not the MoE layers the config declares",
                );
            }
            let mut per_layer: BTreeMap<u64, u64> = BTreeMap::new();
            for (layer, _) in &self.experts_seen {
                *per_layer.entry(*layer).or_default() += 1;
            }
            if let Some((layer, count)) = per_layer.iter().find(|(l, c)| **l < arch.layers && **c != moe.experts) {
                findings.mismatch(
                    Code::ConfigShapeMismatch,
                    format!("model.layers.{layer}.experts"),
                    moe.experts,
                    *count,
                    "routed experts stored in this layer differ from the config's expert count",
                );
            }
        }
        if !self.embedding_stored {
            findings.push(
                Code::TensorMissing,
                "model.embed_tokens.weight",
                "the checkpoint has no token embedding",
            );
        }
        if !arch.tie_word_embeddings && self.lm_head_by_dtype.is_empty() {
            findings.push(
                Code::TensorMissing,
                "lm_head.weight",
                "embeddings are not tied, yet the checkpoint has no lm_head",
            );
        }
    }

    fn parameters(&mut self, arch: Option<&Architecture>, findings: &mut Findings) -> Parameters {
        let mut by_component: BTreeMap<String, u64> = self
            .by_component
            .iter()
            .map(|(c, n)| (c.as_str().to_owned(), *n))
            .collect();
        let mut by_dtype = self.by_dtype.clone();
        if let Some(arch) = arch
            && arch.tie_word_embeddings
            && !self.lm_head_by_dtype.is_empty()
            && self.embedding_stored
        {
            // Tied: the stored lm_head is the embedding again; count it once.
            findings.push(
                Code::WeightsTiedStored,
                "lm_head.weight",
                "tie_word_embeddings is set and lm_head is stored too; counted once",
            );
            by_component.remove("lm_head");
            self.layout.remove(Component::LmHead);
            for (dtype, n) in &self.lm_head_by_dtype {
                if let Some(total) = by_dtype.get_mut(dtype) {
                    *total = total.saturating_sub(*n);
                }
            }
            by_dtype.retain(|_, n| *n > 0);
        }
        // Without an architecture nothing is placed in a component; the dtype tally is the total.
        let counted = if arch.is_some() { &by_component } else { &by_dtype };
        let total = counted.values().fold(0u64, |acc, n| acc.saturating_add(*n));
        let mtp = by_component.get("mtp").copied().unwrap_or(0);
        if mtp > 0 {
            findings.push(
                Code::MtpLayersPresent,
                "mtp",
                format!("{mtp} parameters in multi-token-prediction layers; excluded from active_per_token"),
            );
        }
        let active_per_token = arch.map(|arch| arch.active_per_token(total, &by_component));
        Parameters {
            total,
            by_dtype,
            by_component,
            active_per_token,
        }
    }
}

/// Totals saturate rather than wrap: a hostile shape must not panic or flip a figure small.
fn add(total: &mut u64, n: u64) {
    *total = total.saturating_add(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_with_layer_and_expert() {
        let s = shape_of_name("model.layers.12.mlp.experts.7.up_proj.weight");
        assert_eq!(s.normalized, "model.layers.N.mlp.experts.N.up_proj.weight");
        assert_eq!((s.layer, s.expert), (Some(12), Some(7)));
        let s = shape_of_name("model.language_model.layers.0.self_attn.q_proj.weight");
        assert_eq!(s.normalized, "model.layers.N.self_attn.q_proj.weight");
    }
}
