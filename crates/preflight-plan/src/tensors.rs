//! Per-tensor records and the folds over them. Each stored tensor is classified once —
//! component, layer, expert, role, placement, parameters, bytes — into a [`Record`]; then
//! separate folds turn the records into parameters, the memory layout, shape checks and
//! layer checks. Safetensors and GGUF produce records differently and share every fold.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::families::{Family, Placement, ShapeRule, pattern_matches};
use crate::findings::{Code, Findings};
use crate::memory::WeightsLayout;
use crate::model::Model;
use crate::verdict::{Component, Parameters};

/// At most this many names are listed one by one in a grouped finding; the rest are counted.
pub const NAMED_PER_FINDING: usize = 5;

/// Hash maps and sets over names from untrusted headers: foldhash is several times faster
/// than SipHash on short keys, and seeded per process, so crafted names cannot be aimed at
/// one bucket.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// An interned name shape (see [`Shapes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShapeId(u32);

/// Tensor names interned by shape: every name with its indices replaced by `N` (and wrapper
/// prefixes folded) gets one id, so a 92k-tensor checkpoint of ~60 shapes classifies,
/// places and shape-checks ~60 names, and records carry 4 bytes instead of a string.
///
/// Each name is stored once: the index is keyed by the name's 64-bit hash (seeded per
/// process, so no input can aim at collisions) and checked against the stored name; the rare
/// name whose hash another already holds is kept in `collided`. A hostile header of a million
/// distinct names costs one string and one small bucket each, not two strings.
#[derive(Debug, Default)]
pub struct Shapes {
    names: Vec<Box<str>>,
    ids: FastMap<u64, ShapeId>,
    collided: FastMap<Box<str>, ShapeId>,
    hasher: foldhash::fast::RandomState,
    buffer: String,
}

impl Shapes {
    /// The shape of `name`, with its layer and expert indices.
    pub fn of(&mut self, name: &str) -> NameShape {
        use std::hash::BuildHasher;
        let (layer, expert) = normalize_into(name, &mut self.buffer);
        let hash = self.hasher.hash_one(self.buffer.as_str());
        let next = ShapeId(self.names.len() as u32);
        let id = match self.ids.get(&hash) {
            Some(id) if *self.names[id.0 as usize] == *self.buffer => *id,
            Some(_) => match self.collided.get(self.buffer.as_str()) {
                Some(id) => *id,
                None => {
                    self.collided.insert(self.buffer.as_str().into(), next);
                    next
                }
            },
            None => {
                self.ids.insert(hash, next);
                next
            }
        };
        if id == next {
            self.names.push(self.buffer.as_str().into());
        }
        NameShape { id, layer, expert }
    }

    pub fn name(&self, id: ShapeId) -> &str {
        &self.names[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// One stored tensor, classified. Its name and dimensions stay in the header it came from
/// (`tensor` is its position in the artifact's header order): a record is a few numbers, so
/// a million-tensor header costs a million small records, not a second copy of its names.
#[derive(Debug, Clone)]
pub struct Record {
    /// Position in the artifact's tensors, in header order (every file's, in file order).
    pub tensor: u32,
    /// The name with wrapper prefixes folded and every index replaced by `N`: the key shape
    /// rules and unplaced groups are reported under.
    pub shape_id: ShapeId,
    /// The dtype as stored (raw element counts are by this).
    pub stored: DtypeName,
    /// Elements as stored.
    pub elements: u64,
    pub bytes: u64,
    /// Layer and expert indices, saturated to 32 bits (a real one is far below).
    pub position: Position,
    pub kind: Kind,
}

/// A tensor's layer and expert indices, packed: two `Option<u32>`s take 16 bytes, this 12.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    layer: u32,
    expert: u32,
    /// Bit 0: a layer index is present; bit 1: an expert index is.
    present: u8,
}

impl Position {
    pub fn new(layer: Option<u32>, expert: Option<u32>) -> Position {
        Position {
            layer: layer.unwrap_or(0),
            expert: expert.unwrap_or(0),
            present: u8::from(layer.is_some()) | u8::from(expert.is_some()) << 1,
        }
    }

    pub fn layer(self) -> Option<u32> {
        (self.present & 1 != 0).then_some(self.layer)
    }

    pub fn expert(self) -> Option<u32> {
        (self.present & 2 != 0).then_some(self.expert)
    }
}

/// What a record is, for the folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Parameters of a component: `params` logical values (packed storage unpacked), counted
    /// under `dtype`. `checked` is false for packed storage whose shape is not the logical one.
    Param {
        component: Component,
        placement: Placement,
        params: u64,
        dtype: DtypeName,
        checked: ShapeCheck,
    },
    /// Quantization metadata, counted in bytes beside the parameter it scales (`None`: that
    /// parameter is unplaced).
    Scale { owner: Option<(Component, Placement)> },
    /// No component of the architecture claims it (a blocking finding says so).
    Unplaced,
    /// No architecture is known: counted as parameters of no component.
    Unclassified { params: u64, dtype: DtypeName },
}

/// Which dimensions of a packed tensor still follow the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShapeCheck {
    All,
    /// Only the leading dimension (MXFP4 blocks keep the experts dimension).
    Leading,
    None,
}

/// A dtype, stored or logical (the type a packed format stands for), interned per
/// artifact: records carry an index, and the folds compare numbers, not names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DtypeName(u32);

/// Dtype names scanned linearly before a map takes over: real headers have a handful, a
/// hostile one may have a million.
const DTYPES_SCANNED: usize = 8;

/// Interns dtype names for one artifact.
#[derive(Debug, Default)]
pub struct DtypeNames {
    names: Vec<String>,
    beyond_scan: FastMap<String, DtypeName>,
}

impl DtypeNames {
    pub fn intern(&mut self, name: &str) -> DtypeName {
        if let Some(i) = self.names.iter().take(DTYPES_SCANNED).position(|n| n == name) {
            return DtypeName(i as u32);
        }
        if let Some(id) = self.beyond_scan.get(name) {
            return *id;
        }
        let id = DtypeName(self.names.len() as u32);
        self.names.push(name.to_owned());
        if self.names.len() > DTYPES_SCANNED {
            self.beyond_scan.insert(name.to_owned(), id);
        }
        id
    }

    pub fn name(&self, dtype: DtypeName) -> &str {
        self.names.get(dtype.0 as usize).map_or("?", String::as_str)
    }
}

/// A tensor name's shape and its layer and expert indices.
pub struct NameShape {
    pub id: ShapeId,
    pub layer: Option<u32>,
    pub expert: Option<u32>,
}

/// Prefixes under which multimodal wrappers keep the language model, and what they fold to.
const LANGUAGE_MODEL_PREFIXES: &[(&str, &str)] = &[
    ("model.language_model.", "model."),
    ("language_model.model.", "model."),
    ("language_model.lm_head.", "lm_head."),
    ("model.text_model.", "model."),
];

/// Write `name` with wrapper prefixes folded and every numeric segment as `N` into `out`;
/// return the layer (after `layers` or `blk`) and expert (after `experts`) indices. This runs
/// once per tensor (92k on DeepSeek-V3), so it finds digits by a bitmask 64 bytes at a time
/// and copies the text between indices whole: no `split` (a memchr call per segment), no
/// `parse`, nothing per byte beyond the mask.
fn normalize_into(name: &str, out: &mut String) -> (Option<u32>, Option<u32>) {
    out.clear();
    let (prefix, rest) = LANGUAGE_MODEL_PREFIXES
        .iter()
        .find_map(|(from, to)| Some((*to, name.strip_prefix(from)?)))
        .unwrap_or(("", name));
    out.push_str(prefix);
    let (mut layer, mut expert) = (None, None);
    let bytes = rest.as_bytes();
    let mut copied = 0;
    for (c, chunk) in bytes.chunks(LANES).enumerate() {
        let mut digits = digit_mask(chunk);
        while digits != 0 {
            let start = c * LANES + digits.trailing_zeros() as usize;
            digits &= digits - 1;
            // Only a digit that opens a segment can open an index (not `w1`, not `12`'s 2).
            if start > 0 && bytes[start - 1] != b'.' {
                continue;
            }
            let end = bytes[start..]
                .iter()
                .position(|b| *b == b'.')
                .map_or(bytes.len(), |p| start + p);
            let Some(n) = index(&rest[start..end]) else {
                continue;
            };
            out.push_str(&rest[copied..start]);
            out.push('N');
            copied = end;
            let head = &bytes[..start];
            if follows(head, b"layers") || follows(head, b"blk") {
                layer = layer.or(Some(n));
            } else if follows(head, b"experts") {
                expert = expert.or(Some(n));
            }
        }
    }
    out.push_str(&rest[copied..]);
    (layer, expert)
}

/// Bytes [`digit_mask`] looks at in one go: one SSE2 vector.
const LANES: usize = 16;

/// Bit `i` set when `chunk[i]` is an ASCII digit (`chunk` at most [`LANES`] bytes). Over a
/// fixed-size array with no early exit, the compiler makes it a vector compare and a movemask.
fn digit_mask(chunk: &[u8]) -> u32 {
    let mut lanes = [0u8; LANES];
    lanes[..chunk.len()].copy_from_slice(chunk);
    let mut mask = 0u32;
    for (i, b) in lanes.iter().enumerate() {
        mask |= u32::from(b.wrapping_sub(b'0') < 10) << i;
    }
    mask
}

/// Whether the segment just before `head`'s trailing dot is `word`.
fn follows(head: &[u8], word: &[u8]) -> bool {
    head.strip_suffix(b".")
        .and_then(|body| body.strip_suffix(word))
        .is_some_and(|before| before.is_empty() || before.ends_with(b"."))
}

/// A segment of ASCII digits as an index: `None` unless it is one (empty, a sign, or past
/// u64 is a name, not an index); past u32 saturated, which still fails the layer checks.
fn index(segment: &str) -> Option<u32> {
    if segment.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for b in segment.bytes() {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Classify a parameter tensor's (normalised) name against a family: its component and
/// placement, with MTP layers and encoders decided here once.
pub struct Classifier<'f> {
    pub family: &'f Family,
    pub model: &'f Model,
    /// Encoder tensor prefixes of the wrapper the config declared.
    pub encoders: Vec<(&'static str, Component)>,
}

impl Classifier<'_> {
    /// The component and placement of a tensor of this (normalised) shape, `None` when no
    /// group of the family claims it. `in_mtp_layer`: its layer index is past the main
    /// stack (DeepSeek-style appended MTP layers).
    pub fn classify(&self, normalized: &str, in_mtp_layer: bool) -> Option<(Component, Placement)> {
        if let Some((_, component)) = self.encoders.iter().find(|(p, _)| normalized.starts_with(p)) {
            // A buffer the family names inside an encoder (Gemma 4's `std_scale`, clipped
            // linears' bounds) stays a buffer: stored, not a parameter.
            if self.family.classify(normalized, false) == Some(Component::Buffer) {
                return Some((Component::Buffer, Placement::Replicated));
            }
            // Encoders are small and vLLM replicates most of a ViT's norms; their linear
            // layers shard. Counting them sharded matches what ranks hold to within norms.
            return Some((*component, Placement::Sharded));
        }
        let is_mtp = match self.family.mtp {
            Some(crate::families::MtpLayout::Prefixed(prefix, decoder)) if normalized.starts_with(prefix) => {
                let as_decoder = format!("{decoder}{}", &normalized[prefix.len()..]);
                let component = match self.family.classify(&as_decoder, true) {
                    Some(c) => c,
                    None => self.family.classify(normalized, true)?,
                };
                return Some((component, self.family.placement(&as_decoder, component)));
            }
            Some(crate::families::MtpLayout::Appended) => in_mtp_layer && self.model.mtp_layers > 0,
            _ => false,
        };
        let component = self.family.classify(normalized, is_mtp)?;
        // An MTP layer is a decoder layer: its norms and router are held whole by every rank
        // as the main stack's are (vLLM builds it from the same classes).
        let placed_as = match is_mtp {
            true => self.family.classify(normalized, false).unwrap_or(component),
            false => component,
        };
        Some((component, self.family.placement(normalized, placed_as)))
    }

    /// Whether a layer index is past the main stack.
    pub fn past_main_stack(&self, layer: Option<u32>) -> bool {
        layer.is_some_and(|l| u64::from(l) >= self.model.layers.len() as u64)
    }
}

/// What the folds make of an artifact's records.
pub struct Folded {
    pub parameters: Parameters,
    pub weights_bytes: u64,
    pub layout: WeightsLayout,
}

/// Totals saturate rather than wrap: a hostile shape must not panic or flip a figure small.
fn add(total: &mut u64, n: u64) {
    *total = total.saturating_add(n);
}

impl Kind {
    /// The kind with its parameter count taken out, and that count.
    fn amount_aside(self) -> (Kind, u64) {
        match self {
            Kind::Param {
                component,
                placement,
                params,
                dtype,
                checked,
            } => (
                Kind::Param {
                    component,
                    placement,
                    params: 0,
                    dtype,
                    checked,
                },
                params,
            ),
            Kind::Unclassified { params, dtype } => (Kind::Unclassified { params: 0, dtype }, params),
            kind => (kind, 0),
        }
    }
}

/// Records that fold alike — one kind, amounts aside — with their amounts summed.
struct Group {
    /// The kind, its parameter count zero: the count is `params`.
    kind: Kind,
    params: u64,
    bytes: u64,
    tensors: u64,
}

/// The records as groups, in order of first appearance: a checkpoint's 92k tensors fold
/// into tens of groups, so the maps below are touched per group, not per tensor. Neighbours
/// in a header usually fold alike, so the last group is tried before hashing.
fn groups(records: &[Record]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: FastMap<Kind, usize> = FastMap::default();
    let mut last: Option<usize> = None;
    for record in records {
        let (kind, params) = record.kind.amount_aside();
        let i = match last {
            Some(i) if groups[i].kind == kind => i,
            _ => *index.entry(kind).or_insert_with(|| {
                groups.push(Group {
                    kind,
                    params: 0,
                    bytes: 0,
                    tensors: 0,
                });
                groups.len() - 1
            }),
        };
        last = Some(i);
        let group = &mut groups[i];
        add(&mut group.params, params);
        add(&mut group.bytes, record.bytes);
        group.tensors += 1;
    }
    groups
}

/// Parameters by component and dtype, and the weights layout. Tied embeddings count a
/// stored lm_head once.
pub fn fold(records: &[Record], names: &DtypeNames, model: Option<&Model>, findings: &mut Findings) -> Folded {
    let mut by_component: BTreeMap<Component, u64> = BTreeMap::new();
    let mut by_dtype: BTreeMap<DtypeName, u64> = BTreeMap::new();
    let mut lm_head_by_dtype: BTreeMap<DtypeName, u64> = BTreeMap::new();
    let mut layout = WeightsLayout::default();
    let mut weights_bytes = 0u64;
    let mut buffers = 0u64;
    let mut embedding_stored = false;
    // llama.cpp offloads whole layers: each layer's stored bytes, in one pass.
    for record in records {
        if let (Some(layer), Kind::Param { .. } | Kind::Scale { owner: Some(_) }) =
            (record.position.layer(), record.kind)
        {
            layout.add_layer(layer, record.bytes);
        }
    }
    for group in groups(records) {
        add(&mut weights_bytes, group.bytes);
        match group.kind {
            Kind::Param {
                component: Component::Buffer,
                placement,
                ..
            } => {
                buffers += group.tensors;
                layout.add(Component::Buffer, placement, 0, group.bytes);
            }
            Kind::Param {
                component,
                placement,
                dtype,
                ..
            } => {
                let params = group.params;
                layout.add(component, placement, params, group.bytes);
                add(by_component.entry(component).or_default(), params);
                add(by_dtype.entry(dtype).or_default(), params);
                match component {
                    Component::LmHead => add(lm_head_by_dtype.entry(dtype).or_default(), params),
                    Component::Embedding => embedding_stored = true,
                    _ => {}
                }
            }
            Kind::Scale { owner: Some((c, p)) } => layout.add(c, p, 0, group.bytes),
            Kind::Scale { owner: None } | Kind::Unplaced => layout.add_unplaced(group.bytes),
            Kind::Unclassified { dtype, .. } => add(by_dtype.entry(dtype).or_default(), group.params),
        }
    }
    if buffers > 0 {
        findings.push(
            Code::TensorBuffersExcluded,
            "buffers",
            format!(
                "{} stored buffer tensor(s) are not parameters and are not counted in parameters",
                crate::findings::grouped(buffers)
            ),
        );
    }
    if let Some(model) = model
        && model.tie_word_embeddings
        && !lm_head_by_dtype.is_empty()
        && embedding_stored
    {
        // Tied: the stored lm_head is the embedding again; count it once.
        findings.push(
            Code::WeightsTiedStored,
            "lm_head.weight",
            "tie_word_embeddings is set and lm_head is stored too; counted once",
        );
        by_component.remove(&Component::LmHead);
        layout.remove(Component::LmHead);
        for (dtype, n) in &lm_head_by_dtype {
            if let Some(total) = by_dtype.get_mut(dtype) {
                *total = total.saturating_sub(*n);
            }
        }
        by_dtype.retain(|_, n| *n > 0);
    }
    // Without an architecture nothing is placed in a component; the dtype tally is the total.
    let total = match model {
        Some(_) => by_component.values().fold(0u64, |acc, n| acc.saturating_add(*n)),
        None => by_dtype.values().fold(0u64, |acc, n| acc.saturating_add(*n)),
    };
    let mtp = by_component.get(&Component::Mtp).copied().unwrap_or(0);
    if mtp > 0 {
        findings.push(
            Code::MtpLayersPresent,
            "mtp",
            format!(
                "{} parameters in multi-token-prediction layers; excluded from active_per_token",
                crate::findings::grouped(mtp)
            ),
        );
    }
    let active_per_token = model.map(|m| active_per_token(m, total, &by_component));
    let mut named: BTreeMap<String, u64> = BTreeMap::new();
    for (dtype, n) in by_dtype {
        add(named.entry(names.name(dtype).to_owned()).or_default(), n);
    }
    Folded {
        parameters: Parameters {
            total,
            by_dtype: named,
            by_component,
            active_per_token,
        },
        weights_bytes,
        layout,
    }
}

/// The `active_per_token` convention (README): every language-model parameter that is not
/// a routed expert, plus `active / experts` of the routed experts; MTP layers and encoders
/// (which run per image or clip, not per token) excluded.
fn active_per_token(model: &Model, total: u64, by_component: &BTreeMap<Component, u64>) -> u64 {
    let component = |c: Component| by_component.get(&c).copied().unwrap_or(0);
    let encoders = by_component
        .iter()
        .filter(|(c, _)| c.is_encoder())
        .fold(0u64, |acc, (_, n)| acc.saturating_add(*n));
    let dense = total.saturating_sub(component(Component::Mtp)).saturating_sub(encoders);
    match &model.moe {
        Some(moe) if moe.experts > 0 => {
            let experts = component(Component::Experts);
            dense
                .saturating_sub(experts)
                .saturating_add(experts / moe.experts * moe.active.min(moe.experts))
        }
        _ => dense,
    }
}

/// Raw stored elements per stored dtype.
pub fn elements_by_dtype(records: &[Record], names: &DtypeNames) -> BTreeMap<String, u64> {
    let mut by: BTreeMap<DtypeName, u64> = BTreeMap::new();
    // Neighbours share a dtype: a run is summed aside and added to the map when it ends.
    let mut run: Option<(DtypeName, u64)> = None;
    for record in records {
        match &mut run {
            Some((dtype, n)) if *dtype == record.stored => add(n, record.elements),
            _ => {
                if let Some((dtype, n)) = run.replace((record.stored, record.elements)) {
                    add(by.entry(dtype).or_default(), n);
                }
            }
        }
    }
    if let Some((dtype, n)) = run {
        add(by.entry(dtype).or_default(), n);
    }
    by.into_iter().map(|(d, n)| (names.name(d).to_owned(), n)).collect()
}

/// One finding per group of tensors no component claims.
pub fn unplaced_findings(records: &[Record], shapes: &Shapes, what: &str, findings: &mut Findings) {
    // Counted by shape id, then ordered by name: a hostile header's million distinct names
    // cost a counter each, not a tree node each.
    let mut counts = vec![0u64; shapes.len()];
    for record in records.iter().filter(|r| r.kind == Kind::Unplaced) {
        counts[record.shape_id.0 as usize] += 1;
    }
    let mut unplaced: Vec<(&str, u64)> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(id, n)| (shapes.name(ShapeId(id as u32)), *n))
        .collect();
    drop(counts);
    unplaced.sort_unstable_by_key(|(name, _)| *name);
    for (pattern, count) in unplaced {
        let finding = findings.push(
            Code::TensorUnplaced,
            pattern,
            format!(
                "{} tensor(s) named like `{pattern}` belong to no component {what}",
                crate::findings::grouped(count)
            ),
        );
        finding.observed = Some(count.into());
    }
}

/// Each shape rule against every tensor it names; one finding per rule that fails. Which
/// rules name a tensor is decided once per shape.
///
/// `tensor` gives a record's name and stored dimensions from its position. Which rules name
/// a shape is kept as a bitmask (bit 63: decided), 8 bytes a shape however many there are.
pub fn check_shapes<'t>(
    records: &[Record],
    shapes: &Shapes,
    rules: &[ShapeRule],
    tensor: impl Fn(u32) -> (&'t str, &'t [u64]),
    findings: &mut Findings,
) {
    const DECIDED: u64 = 1 << 63;
    let cacheable = rules.len() < 63;
    let mut matching: Vec<u64> = vec![0; if cacheable { shapes.len() } else { 0 }];
    let mut errors: BTreeMap<(&'static str, usize), (u64, u64, &'static str, &str)> = BTreeMap::new();
    for record in records {
        let Kind::Param { checked, .. } = record.kind else {
            continue;
        };
        let name = shapes.name(record.shape_id);
        let matches = |i: &usize| pattern_matches(rules[*i].pattern, name);
        let applicable: Vec<usize> = if cacheable {
            let mask = &mut matching[record.shape_id.0 as usize];
            if *mask & DECIDED == 0 {
                *mask = (0..rules.len()).filter(matches).fold(DECIDED, |m, i| m | 1 << i);
            }
            let mask = *mask;
            (0..rules.len()).filter(|i| mask & 1 << i != 0).collect()
        } else {
            (0..rules.len()).filter(matches).collect()
        };
        if applicable.is_empty() {
            continue;
        }
        let (tensor_name, dims) = tensor(record.tensor);
        for rule in applicable.iter().map(|i| &rules[*i]) {
            let unchecked = match checked {
                ShapeCheck::All => false,
                ShapeCheck::Leading => rule.dim != 0,
                ShapeCheck::None => true,
            };
            match dims.get(rule.dim) {
                Some(found) if *found == rule.value || unchecked => {}
                found => {
                    errors.entry((rule.pattern, rule.dim)).or_insert((
                        rule.value,
                        found.copied().unwrap_or(0),
                        rule.keys,
                        tensor_name,
                    ));
                }
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

/// The layers (main and MTP) and routed experts the records hold against what the model
/// declares; the embedding and lm_head present.
pub fn check_layers(records: &[Record], model: &Model, findings: &mut Findings) {
    let main = model.layers.len() as u64;
    // Hashed while walking the records, ordered once after.
    let mut layers: FastSet<u64> = FastSet::default();
    let mut expert_layers: FastSet<u64> = FastSet::default();
    let mut experts_seen: FastSet<(u64, u64)> = FastSet::default();
    let (mut embedding, mut lm_head, mut mtp_present) = (false, false, false);
    let mut last = None;
    for record in records {
        let Kind::Param { component, .. } = record.kind else {
            continue;
        };
        if component.is_encoder() {
            continue;
        }
        match component {
            Component::Embedding => embedding = true,
            Component::LmHead => lm_head = true,
            Component::Mtp => mtp_present = true,
            _ => {}
        }
        // Prefixed MTP layers are numbered apart and checked by count below.
        let Some(layer) = record
            .position
            .layer()
            .map(u64::from)
            .filter(|_| component != Component::Mtp || model.mtp_first_index == main)
        else {
            continue;
        };
        // Neighbours in a header share their layer (and expert): each run is inserted once.
        let run = Some((layer, component == Component::Experts, record.position.expert()));
        if run == last {
            continue;
        }
        last = run;
        layers.insert(layer);
        if component == Component::Experts {
            expert_layers.insert(layer);
            if let Some(expert) = record.position.expert().map(u64::from) {
                experts_seen.insert((layer, expert));
            }
        }
    }
    let layers: BTreeSet<u64> = layers.into_iter().collect();
    let expert_layers: BTreeSet<u64> = expert_layers.into_iter().collect();
    if model.mtp_layers > 0 && !mtp_present {
        let finding = findings.push(
            Code::MtpDeclaredAbsent,
            "mtp",
            format!(
                "the config declares {} multi-token-prediction layer(s) but the checkpoint ships none; engines serve it without speculative decoding",
                model.mtp_layers
            ),
        );
        finding.declared = Some(model.mtp_layers.into());
        finding.observed = Some(0.into());
    }
    let declared = match model.mtp_first_index == main && mtp_present {
        true => main.saturating_add(model.mtp_layers),
        false => main,
    };
    let complete = layers.len() as u64 == declared && layers.iter().enumerate().all(|(i, l)| i as u64 == *l);
    if !complete {
        let present_main = layers.iter().filter(|l| **l < main).count();
        let extra: Vec<u64> = layers
            .iter()
            .copied()
            .filter(|l| *l >= declared)
            .take(NAMED_PER_FINDING)
            .collect();
        let absent: Vec<u64> = (0..declared)
            .filter(|l| !layers.contains(l))
            .take(NAMED_PER_FINDING)
            .collect();
        findings.mismatch(
            Code::ConfigLayerCountMismatch,
            "config.num_hidden_layers",
            declared,
            layers.len(),
            format!("{present_main} main layers present; missing layers {absent:?}, unexpected layers {extra:?} (first {NAMED_PER_FINDING} of each)"),
        );
    }
    if let Some(moe) = &model.moe {
        let expected: BTreeSet<u64> = (0..main).filter(|l| !moe.dense_layers.contains(l)).collect();
        let found: BTreeSet<u64> = expert_layers.iter().copied().filter(|l| *l < main).collect();
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
        for (layer, _) in &experts_seen {
            *per_layer.entry(*layer).or_default() += 1;
        }
        if let Some((layer, count)) = per_layer.iter().find(|(l, c)| **l < main && **c != moe.experts) {
            findings.mismatch(
                Code::ConfigShapeMismatch,
                format!("model.layers.{layer}.experts"),
                moe.experts,
                *count,
                "routed experts stored in this layer differ from the config's expert count",
            );
        }
    }
    if !embedding {
        findings.push(
            Code::TensorMissing,
            "model.embed_tokens.weight",
            "the checkpoint has no token embedding",
        );
    }
    if !model.tie_word_embeddings && !lm_head {
        findings.push(
            Code::TensorMissing,
            "lm_head.weight",
            "embeddings are not tied, yet the checkpoint has no lm_head",
        );
    }
}

/// An EAGLE-3 draft head's tensors (`families/eagle3.rs`): its one decoder layer's attention
/// and MLP, the `fc` fusing the target's hidden states and its own `lm_head` must all be
/// there — it has no token embedding to check (the engines use the target's).
pub fn check_draft_head(records: &[Record], findings: &mut Findings) {
    let present = |wanted: Component| {
        records
            .iter()
            .any(|r| matches!(r.kind, Kind::Param { component, .. } if component == wanted))
    };
    for (component, tensor, what) in [
        (
            Component::Attention,
            "midlayer.self_attn.{q,k,v,o}_proj.weight",
            "the head's decoder layer has no attention",
        ),
        (
            Component::Mlp,
            "midlayer.mlp.{gate,up,down}_proj.weight",
            "the head's decoder layer has no MLP (nor the fc fusing the target's hidden states)",
        ),
        (
            Component::LmHead,
            "lm_head.weight",
            "the head has no lm_head over its draft vocabulary",
        ),
    ] {
        if !present(component) {
            findings.push(Code::TensorMissing, tensor, what);
        }
    }
}

#[cfg(test)]
mod tests {
    /// What a million-tensor header costs the planner is a million records: at 88 bytes (a
    /// name and a shape borrowed, two `Option<u32>`) a 2^20-tensor header went past its
    /// memory bound (`scripts/hostile_sizes.py`: 4 × the header + 64 MiB).
    #[test]
    fn a_record_is_a_few_numbers() {
        assert!(
            std::mem::size_of::<super::Record>() <= 56,
            "{}",
            std::mem::size_of::<super::Record>()
        );
    }

    use super::*;

    #[test]
    fn names_normalise_with_layer_and_expert() {
        let mut shapes = Shapes::default();
        let s = shapes.of("model.layers.12.mlp.experts.7.up_proj.weight");
        assert_eq!(shapes.name(s.id), "model.layers.N.mlp.experts.N.up_proj.weight");
        assert_eq!((s.layer, s.expert), (Some(12), Some(7)));
        let again = shapes.of("model.layers.3.mlp.experts.0.up_proj.weight");
        assert_eq!(again.id, s.id, "one shape, one id");
        let s = shapes.of("model.language_model.layers.0.self_attn.q_proj.weight");
        assert_eq!(shapes.name(s.id), "model.layers.N.self_attn.q_proj.weight");
        // `+1` parses as a number but is not an index.
        let s = shapes.of("blk.+1.attn_q.weight");
        assert_eq!((shapes.name(s.id), s.layer), ("blk.+1.attn_q.weight", None));
        // Past u64 is a name; past u32 an index, saturated; empty segments stay.
        let s = shapes.of("model.layers.99999999999999999999.x..weight");
        assert_eq!(
            (shapes.name(s.id), s.layer),
            ("model.layers.99999999999999999999.x..weight", None)
        );
        let s = shapes.of("model.layers.4294967296.x.");
        assert_eq!((shapes.name(s.id), s.layer), ("model.layers.N.x.", Some(u32::MAX)));
    }
}
