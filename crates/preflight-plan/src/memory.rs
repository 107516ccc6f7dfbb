//! Memory and fit: what serving a checkpoint takes — weights, KV cache, activations — per
//! tensor-parallel rank and per named device, and the longest context that fits. Pure
//! arithmetic on the architecture and the weights' layout; `docs/memory.md` gives every
//! formula and the engine code it follows. **Fails closed:** when an artifact's memory
//! cannot be known, it gets a `memory.unavailable` finding, never a guessed number.

use std::collections::BTreeMap;

use crate::families::Placement;
use crate::findings::{Code, Findings};
use crate::model::{Mixer, Model, Span, StateDtype};
use crate::options::{KvDtype, PlanOptions, WeightsDtype};
use crate::verdict::{
    ArtifactMemory, CacheKind, Component, DeviceMemory, Format, KvCacheGroup, Memory, Parameters, RankMemory,
};

/// llama.cpp's default `n_ubatch`: the tokens one forward pass holds activations for.
const ACTIVATION_UBATCH_TOKENS: u64 = 512;

/// llama.cpp computes activations and logits in f32.
const ACTIVATION_ELEMENT_BYTES: u64 = 4;

/// Logical parameters and stored bytes of one slice of the weights.
#[derive(Debug, Default, Clone, Copy)]
pub struct Share {
    pub params: u64,
    pub bytes: u64,
}

/// Where an artifact's weight bytes sit: per component and tensor-parallel placement, with
/// quantization scales counted beside the weights they scale. Built while counting tensors.
#[derive(Debug, Default, Clone)]
pub struct WeightsLayout {
    parts: BTreeMap<(Component, Placement), Share>,
    /// Bytes of tensors no component claims (a blocking finding already says so); held
    /// whole by every rank, the conservative choice.
    unplaced_bytes: u64,
}

impl WeightsLayout {
    pub fn add(&mut self, component: Component, placement: Placement, params: u64, bytes: u64) {
        let share = self.parts.entry((component, placement)).or_default();
        share.params = share.params.saturating_add(params);
        share.bytes = share.bytes.saturating_add(bytes);
    }

    pub fn add_unplaced(&mut self, bytes: u64) {
        self.unplaced_bytes = self.unplaced_bytes.saturating_add(bytes);
    }

    /// Bytes of one component as stored, every placement together (the throughput bounds'
    /// routed experts).
    pub fn component_bytes(&self, component: Component) -> u64 {
        self.parts
            .iter()
            .filter(|((c, _), _)| *c == component)
            .fold(0u64, |acc, (_, share)| acc.saturating_add(share.bytes))
    }

    /// Drop a component (a stored lm_head that tied embeddings make a copy of: engines
    /// skip loading it).
    pub fn remove(&mut self, component: Component) {
        self.parts.retain(|(c, _), _| *c != component);
    }
}

/// What sizing one artifact needs beyond its architecture.
pub struct Inputs<'a> {
    pub model: Option<&'a Model>,
    pub format: Format,
    pub parameters: &'a Parameters,
    pub layout: &'a WeightsLayout,
    /// The weights as stored: all that is certain when the architecture is refused.
    pub weights_bytes: u64,
}

/// One artifact, prepared so its figures can be taken at any context.
#[derive(Debug, Clone)]
pub struct Sizing {
    context: u64,
    max_context: u64,
    sequences: u64,
    kv_dtype: KvDtype,
    weights_dtype: Option<WeightsDtype>,
    weights: u64,
    caches: Vec<LayerCache>,
    activation_width: u64,
    vocab: u64,
    tensor_parallel: u64,
    /// `None` when the model cannot be split at this tensor-parallel degree.
    rank_weights: Option<u64>,
    /// The architecture was refused: only the stored weights are known, as a lower bound.
    lower_bound: bool,
}

/// Layers that cache alike.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayerCache {
    kind: CacheKind,
    /// Tokens a sequence keeps at most; `None` grows with the context.
    cap: Option<u64>,
    layers: u64,
    /// Per-token kinds: bytes one token adds, whole and on one rank.
    per_token: u64,
    per_token_rank: u64,
    /// Per-sequence kinds: bytes one sequence holds, whole and on one rank.
    per_sequence: u64,
    per_sequence_rank: u64,
}

impl LayerCache {
    fn alike(&self, other: &LayerCache) -> bool {
        LayerCache {
            layers: 0,
            ..self.clone()
        } == LayerCache {
            layers: 0,
            ..other.clone()
        }
    }

    fn tokens(&self, context: u64) -> u64 {
        self.cap.map_or(context, |cap| cap.min(context))
    }

    /// Bytes of these layers for `sequences` sequences of `context` tokens.
    fn bytes(&self, context: u64, sequences: u64, rank: bool) -> u64 {
        let (per_token, per_sequence) = match rank {
            true => (self.per_token_rank, self.per_sequence_rank),
            false => (self.per_token, self.per_sequence),
        };
        per_token
            .saturating_mul(self.tokens(context))
            .saturating_add(per_sequence)
            .saturating_mul(self.layers)
            .saturating_mul(sequences)
    }
}

/// Prepare one artifact, or say with a finding why its memory cannot be known.
pub fn prepare(inputs: &Inputs, options: &PlanOptions, findings: &mut Findings) -> Option<Sizing> {
    let unavailable = |findings: &mut Findings, subject: &str, why: String| {
        findings.push(Code::MemoryUnavailable, subject, why);
        None
    };
    let tp = options.tensor_parallel_degree().max(1);
    let Some(model) = inputs.model else {
        findings.push(
            Code::MemoryUnavailable,
            "architecture",
            "the architecture is not known (see the other findings), so neither is its memory beyond the weights as stored, a lower bound",
        );
        return Some(lower_bound(inputs.weights_bytes, tp, options, findings));
    };
    let kv_dtype = match options.kv_dtype {
        Some(dtype) => dtype,
        None => match model_kv_dtype(model, inputs.format, inputs.parameters, findings) {
            Some(dtype) => dtype,
            None => {
                return unavailable(
                    findings,
                    "kv_dtype",
                    "neither the config nor the stored tensors say which dtype the model computes in; give kv_dtype"
                        .into(),
                );
            }
        },
    };
    let mut layers = model.layers.clone();
    if options.include_mtp {
        // An MTP layer is one more decoder layer, of its own kind where the family says.
        if let Some(mixer) = model.mtp_mixer.or(model.layers.last().copied()) {
            layers.extend((0..model.mtp_layers).map(|_| mixer));
        }
    }
    // vLLM keeps recurrent state in the model's dtype (`mamba_cache_dtype` "auto",
    // mamba_utils.py `_mamba_state_dtype`), whatever `--kv-cache-dtype` asks of the KV cache.
    let state_base = match options.kv_dtype {
        None => kv_dtype,
        Some(_) => model_dtype(model, inputs.format, inputs.parameters).map_or(kv_dtype, |(d, _)| d),
    };
    let mut caches: Vec<LayerCache> = Vec::new();
    for (layer, mixer) in layers.iter().enumerate() {
        let cache = match layer_cache(*mixer, kv_dtype, state_base, tp) {
            Ok(Some(cache)) => cache,
            Ok(None) => continue,
            Err(why) => return unavailable(findings, &format!("layer {layer}"), why),
        };
        match caches.iter_mut().find(|c| c.alike(&cache)) {
            Some(group) => group.layers += 1,
            None => caches.push(cache),
        }
    }
    let kv_projection_excess = tensor_parallel_split(model, &layers, tp);
    if kv_projection_excess.is_none() {
        findings.push(
            Code::MemoryTensorParallelInvalid,
            "tensor_parallel",
            format!(
                "{tp}-way tensor parallelism cannot split this model: it needs {} heads, every layer's KV heads and the MLP widths divisible by {tp} (or KV heads dividing {tp})",
                model.heads
            ),
        );
    }
    let context = options.context.unwrap_or(model.context);
    if context > model.context {
        let finding = findings.push(
            Code::MemoryContextExceedsModel,
            "context",
            format!(
                "{} tokens is past the {} the model declares; engines refuse it unless overridden",
                crate::findings::grouped(context),
                crate::findings::grouped(model.context)
            ),
        );
        finding.declared = Some(model.context.into());
        finding.observed = Some(context.into());
    }
    let weights = weights_bytes(inputs.layout, options, 1, 0);
    let rank_weights = kv_projection_excess.map(|excess| weights_bytes(inputs.layout, options, tp, excess));
    Some(Sizing {
        context,
        max_context: model.context,
        sequences: options.sequences.unwrap_or(1),
        kv_dtype,
        weights_dtype: options.weights_dtype,
        weights,
        caches,
        activation_width: model.vocab.saturating_add(model.hidden.saturating_mul(2)).max(
            model
                .hidden
                .saturating_mul(2)
                .saturating_add(ffn_width(model).saturating_mul(3)),
        ),
        vocab: model.vocab,
        tensor_parallel: tp,
        rank_weights,
        lower_bound: false,
    })
}

/// A refused architecture: the stored weights, split as evenly as any engine could, are
/// the least each rank holds. When that alone exceeds a device, it does not fit whatever
/// else is true (a blocking finding); otherwise nothing is said to fit.
fn lower_bound(weights: u64, tp: u64, options: &PlanOptions, findings: &mut Findings) -> Sizing {
    let rank = weights.div_ceil(tp);
    if let Some(devices) = &options.devices {
        let utilization = options.utilization();
        if let Some(smallest) = devices.groups().iter().map(|g| utilization.of(g.capacity_bytes)).min()
            && rank > smallest
        {
            let finding = findings.push(
                Code::MemoryWeightsExceedDevices,
                "weights",
                format!(
                    "the weights as stored, split over {tp} rank(s), are {} bytes a rank, more than the {} usable bytes of the smallest device",
                    crate::findings::grouped(rank),
                    crate::findings::grouped(smallest)
                ),
            );
            finding.declared = Some(smallest.into());
            finding.observed = Some(rank.into());
        }
    }
    Sizing {
        context: options.context.unwrap_or(0),
        max_context: 0,
        sequences: options.sequences.unwrap_or(1),
        kv_dtype: options.kv_dtype.unwrap_or(KvDtype::Bf16),
        weights_dtype: None,
        weights,
        caches: Vec::new(),
        activation_width: 0,
        vocab: 0,
        tensor_parallel: tp,
        rank_weights: Some(rank),
        lower_bound: true,
    }
}

/// Bytes of one recurrent-state element: the config's pinned dtype, else the model's.
fn state_element_bytes(dtype: StateDtype, model: KvDtype) -> u64 {
    match dtype {
        StateDtype::F32 => 4,
        StateDtype::Bf16 | StateDtype::F16 => 2,
        StateDtype::Model => model.row_bytes(1).max(1),
    }
}

/// What one layer caches, whole and on one of `tp` ranks; `Ok(None)` for a layer that
/// caches nothing; `Err` says why the planner has no cache model for it.
fn layer_cache(mixer: Mixer, dtype: KvDtype, state_base: KvDtype, tp: u64) -> Result<Option<LayerCache>, String> {
    let per_token = |per_token: u64, per_token_rank: u64, kind: CacheKind, cap: Option<u64>| LayerCache {
        kind,
        cap,
        layers: 1,
        per_token,
        per_token_rank,
        per_sequence: 0,
        per_sequence_rank: 0,
    };
    match mixer {
        Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim,
            span,
            ..
        } => {
            if kv_heads == 0 || head_dim == 0 || v_head_dim == 0 {
                return Err(
                    "a layer with no KV heads or a zero head width: a kind of layer the planner has no cache model for"
                        .into(),
                );
            }
            let (kind, cap) = match span {
                Span::Full => (CacheKind::Full, None),
                Span::Sliding(0) | Span::Chunked(0) => return Err("a window of 0 tokens is not a window".into()),
                Span::Sliding(w) => (CacheKind::Sliding, Some(w)),
                Span::Chunked(c) => (CacheKind::Chunked, Some(c)),
            };
            let bytes = |heads: u64| {
                dtype
                    .row_bytes(heads.saturating_mul(head_dim))
                    .saturating_add(dtype.row_bytes(heads.saturating_mul(v_head_dim)))
            };
            // vLLM `get_num_kv_heads`: max(1, kv / tp) — a whole head when kv < tp.
            Ok(Some(per_token(
                bytes(kv_heads),
                bytes((kv_heads / tp).max(1)),
                kind,
                cap,
            )))
        }
        Mixer::Mla { kv_lora_rank: 0, .. } => {
            Err("an MLA layer with kv_lora_rank 0 caches nothing the planner can size".into())
        }
        Mixer::Mla {
            kv_lora_rank,
            rope_dim,
            indexer_head_dim,
        } => {
            // One latent per token, no separate V; every rank holds all of it.
            let latent = dtype.row_bytes(kv_lora_rank.saturating_add(rope_dim));
            let (kind, bytes) = match indexer_head_dim {
                None => (CacheKind::Mla, latent),
                Some(dim) => (CacheKind::MlaIndexer, latent.saturating_add(indexer_key_bytes(dim))),
            };
            Ok(Some(per_token(bytes, bytes, kind, None)))
        }
        Mixer::LinearAttention {
            conv_dim,
            conv_kernel,
            heads,
            key_dim,
            value_dim,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.gated_delta_net_state_shape`: conv state
            // (kernel − 1) × conv_dim in the model dtype, temporal state heads × k × v in
            // the SSM state dtype; both split over tensor-parallel ranks.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(key_dim).saturating_mul(value_dim);
            Ok(Some(state_cache(
                CacheKind::LinearAttention,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        Mixer::Mamba {
            conv_dim,
            conv_kernel,
            heads,
            head_dim,
            state_size,
            state_dtype,
        } => {
            // vLLM `MambaStateShapeCalculator.mamba2_state_shape`: conv state
            // (kernel − 1) × conv_dim, SSM state heads × head_dim × state_size.
            let conv = conv_kernel.saturating_sub(1).saturating_mul(conv_dim);
            let state = heads.saturating_mul(head_dim).saturating_mul(state_size);
            Ok(Some(state_cache(
                CacheKind::Mamba,
                conv,
                state,
                state_dtype,
                state_base,
                tp,
            )))
        }
        Mixer::None => Ok(None),
    }
}

/// vLLM's DeepSeek-V3.2 indexer key cache: the key in FP8 (one byte an element) plus one
/// F32 scale per 128-element quantization block (`DeepseekV32IndexerCache`:
/// `head_dim = index_head_dim + index_head_dim // quant_block_size * 4`, dtype uint8).
fn indexer_key_bytes(index_head_dim: u64) -> u64 {
    const QUANT_BLOCK: u64 = 128;
    index_head_dim.saturating_add(index_head_dim / QUANT_BLOCK * 4)
}

/// A per-sequence state: conv elements in the model's dtype, recurrent elements in the
/// state dtype; each rank holds `1/tp` of both.
fn state_cache(kind: CacheKind, conv: u64, state: u64, state_dtype: StateDtype, model: KvDtype, tp: u64) -> LayerCache {
    let conv_bytes = |elements: u64| elements.saturating_mul(model.row_bytes(1).max(1));
    let state_bytes = |elements: u64| elements.saturating_mul(state_element_bytes(state_dtype, model));
    LayerCache {
        kind,
        cap: None,
        layers: 1,
        per_token: 0,
        per_token_rank: 0,
        per_sequence: conv_bytes(conv).saturating_add(state_bytes(state)),
        per_sequence_rank: conv_bytes(conv / tp).saturating_add(state_bytes(state / tp)),
    }
}

/// Whether `tp` ranks can split the model as vLLM requires (heads, each layer's KV heads,
/// the MLP widths), and if so the K/V projection parameters each rank holds beyond its
/// share: with fewer KV heads than ranks, every rank keeps one whole head's K and V rows.
fn tensor_parallel_split(model: &Model, layers: &[Mixer], tp: u64) -> Option<u64> {
    let widths = [
        model.intermediate,
        model.moe.as_ref().and_then(|m| m.expert_intermediate_size),
    ];
    if !model.heads.is_multiple_of(tp) || !widths.iter().flatten().all(|w| w.is_multiple_of(tp)) {
        return None;
    }
    let mut excess = 0u64;
    for mixer in layers {
        let Mixer::Attention {
            kv_heads,
            head_dim,
            v_head_dim,
            ..
        } = *mixer
        else {
            continue;
        };
        if !(kv_heads.is_multiple_of(tp) || tp.is_multiple_of(kv_heads)) {
            return None;
        }
        if kv_heads < tp {
            let rows = head_dim.saturating_add(v_head_dim).saturating_mul(model.hidden);
            excess = excess.saturating_add(rows.saturating_mul(tp - kv_heads) / tp);
        }
    }
    Some(excess)
}

/// The KV dtype when none is asked for: GGUF caches in f16 (llama.cpp's default `type_k`
/// and `type_v`); safetensors in the model's dtype (vLLM's `kv_cache_dtype=auto`), from the
/// config, else the float dtype most parameters are stored in.
fn model_kv_dtype(arch: &Model, format: Format, parameters: &Parameters, findings: &mut Findings) -> Option<KvDtype> {
    let (dtype, inferred_from) = model_dtype(arch, format, parameters)?;
    if let Some(name) = inferred_from {
        let finding = findings.push(
            Code::MemoryDtypeInferred,
            "kv_dtype",
            format!("the config declares no dtype the planner knows; the KV cache is planned in {name}, the float dtype most parameters are stored in"),
        );
        finding.declared = arch.dtype.clone().map(Into::into);
        finding.observed = Some(name.into());
    }
    Some(dtype)
}

/// The dtype the model computes in, and the stored dtype it was inferred from when the config
/// does not say.
fn model_dtype(arch: &Model, format: Format, parameters: &Parameters) -> Option<(KvDtype, Option<String>)> {
    if format == Format::Gguf {
        return Some((KvDtype::F16, None));
    }
    if let Some(dtype) = arch.dtype.as_deref().and_then(KvDtype::from_model_dtype) {
        return Some((dtype, None));
    }
    parameters
        .by_dtype
        .iter()
        .filter_map(|(name, n)| Some((n, name, KvDtype::from_model_dtype(name)?)))
        .max_by_key(|(n, _, _)| **n)
        .map(|(_, name, dtype)| (dtype, Some(name.clone())))
}

/// The widest per-token MLP: the dense width, or the routed-plus-shared experts' widths.
fn ffn_width(arch: &Model) -> u64 {
    let dense = arch.intermediate.unwrap_or(0);
    let experts = arch.moe.as_ref().map_or(0, |m| {
        m.expert_intermediate_size
            .unwrap_or(0)
            .saturating_mul(m.active.saturating_add(m.shared))
    });
    dense.max(experts)
}

/// Weight bytes one of `tp` ranks holds (`tp` 1: the whole model): replicated parts whole,
/// sharded parts split, plus `kv_projection_excess` parameters of K/V projections that
/// ranks duplicate when there are fewer KV heads than ranks.
fn weights_bytes(layout: &WeightsLayout, options: &PlanOptions, tp: u64, kv_projection_excess: u64) -> u64 {
    let mut total = layout.unplaced_bytes;
    for ((component, placement), share) in &layout.parts {
        if *component == Component::Mtp && !options.include_mtp {
            continue;
        }
        let bytes = part_bytes(*component, *share, options.weights_dtype);
        let held = match placement {
            Placement::Replicated => bytes,
            Placement::Sharded => bytes.div_ceil(tp),
        };
        total = total.saturating_add(held);
        if *component == Component::Attention && *placement == Placement::Sharded && share.params > 0 {
            // The duplicated K/V rows cost what attention weights cost per parameter.
            let excess = u128::from(bytes) * u128::from(kv_projection_excess) / u128::from(share.params);
            total = total.saturating_add(u64::try_from(excess).unwrap_or(u64::MAX));
        }
    }
    total
}

/// Bytes of one slice as stored, or under the what-if type.
fn part_bytes(component: Component, share: Share, what_if: Option<WeightsDtype>) -> u64 {
    match what_if {
        Some(dtype) if component != Component::Buffer && (dtype.is_float() || component.is_linear()) => {
            let (params, bytes) = dtype.rate();
            let scaled = (u128::from(share.params) * u128::from(bytes)).div_ceil(u128::from(params));
            u64::try_from(scaled).unwrap_or(u64::MAX)
        }
        _ => share.bytes,
    }
}

impl Sizing {
    fn kv(&self, context: u64, rank: bool) -> u64 {
        self.caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(c.bytes(context, self.sequences, rank))
        })
    }

    /// One forward pass over a micro-batch (llama.cpp's worst-case graph with flash
    /// attention): the larger of the output stage (logits plus two hidden states) and the
    /// MLP stage, in f32, plus each sequence's output logits.
    fn activation(&self, context: u64) -> u64 {
        let tokens = ACTIVATION_UBATCH_TOKENS.min(context.saturating_mul(self.sequences));
        tokens
            .saturating_mul(self.activation_width)
            .saturating_add(self.sequences.saturating_mul(self.vocab))
            .saturating_mul(ACTIVATION_ELEMENT_BYTES)
    }

    /// What one rank holds at `context`, or `None` when the model cannot be split.
    fn rank(&self, context: u64) -> Option<RankMemory> {
        let weights_bytes = self.rank_weights?;
        let kv_cache_bytes = self.kv(context, true);
        // Activations are counted whole on every rank: hidden states are replicated, and the
        // estimate does not credit the MLP's split.
        let activation_bytes = self.activation(context);
        Some(RankMemory {
            tensor_parallel: self.tensor_parallel,
            weights_bytes,
            kv_cache_bytes,
            activation_bytes,
            total_bytes: weights_bytes
                .saturating_add(kv_cache_bytes)
                .saturating_add(activation_bytes),
        })
    }

    pub fn report(&self) -> ArtifactMemory {
        let context = self.context;
        let kv_cache: Vec<KvCacheGroup> = self
            .caches
            .iter()
            .map(|c| {
                let state = c.kind.is_state();
                KvCacheGroup {
                    kind: c.kind,
                    window: c.cap,
                    layers: c.layers,
                    bytes_per_token_per_layer: (!state).then_some(c.per_token),
                    bytes_per_sequence_per_layer: state.then_some(c.per_sequence),
                    tokens_per_sequence: (!state).then(|| c.tokens(context)),
                    bytes: c.bytes(context, self.sequences, false),
                }
            })
            .collect();
        let kv_cache_bytes = self.kv(context, false);
        let activation_bytes = self.activation(context);
        let state_bytes_per_sequence = self.caches.iter().fold(0u64, |acc, c| {
            acc.saturating_add(c.per_sequence.saturating_mul(c.layers))
        });
        ArtifactMemory {
            context,
            sequences: self.sequences,
            kv_dtype: self.kv_dtype.name().to_owned(),
            weights_dtype: self.weights_dtype.map_or("as_stored", WeightsDtype::name).to_owned(),
            weights_bytes: self.weights,
            kv_cache_bytes_per_token: self
                .caches
                .iter()
                .filter(|c| c.cap.is_none())
                .fold(0u64, |acc, c| acc.saturating_add(c.layers.saturating_mul(c.per_token))),
            kv_cache_bytes,
            state_bytes_per_sequence,
            state_bytes: state_bytes_per_sequence.saturating_mul(self.sequences),
            activation_bytes,
            total_bytes: self
                .weights
                .saturating_add(kv_cache_bytes)
                .saturating_add(activation_bytes),
            kv_cache,
            lower_bound: self.lower_bound,
            per_rank: self.rank(context),
        }
    }
}

/// The system's memory: every artifact on the same devices at the same tensor-parallel
/// degree, each device holding one rank of every artifact.
pub fn system(sizings: &[Sizing], options: &PlanOptions) -> Memory {
    let refused = sizings.iter().any(|s| s.lower_bound);
    let reports: Vec<ArtifactMemory> = sizings.iter().map(Sizing::report).collect();
    let sum = |f: fn(&ArtifactMemory) -> u64| reports.iter().fold(0u64, |acc, r| acc.saturating_add(f(r)));
    let utilization = options.utilization();
    // Each device holds one rank of every artifact, whichever replica it belongs to.
    let per_rank_at = |context: Option<u64>| -> Option<RankMemory> {
        let mut held = RankMemory {
            tensor_parallel: options.tensor_parallel_degree(),
            weights_bytes: 0,
            kv_cache_bytes: 0,
            activation_bytes: 0,
            total_bytes: 0,
        };
        for sizing in sizings {
            let rank = sizing.rank(context.unwrap_or(sizing.context))?;
            held.weights_bytes = held.weights_bytes.saturating_add(rank.weights_bytes);
            held.kv_cache_bytes = held.kv_cache_bytes.saturating_add(rank.kv_cache_bytes);
            held.activation_bytes = held.activation_bytes.saturating_add(rank.activation_bytes);
            held.total_bytes = held.total_bytes.saturating_add(rank.total_bytes);
        }
        Some(held)
    };
    let mut per_device = Vec::new();
    let mut max_context_that_fits = None;
    if let (Some(devices), Some(held)) = (&options.devices, per_rank_at(None)) {
        for group in devices.groups() {
            let usable_bytes = utilization.of(group.capacity_bytes);
            let device = DeviceMemory {
                device: group.name.clone(),
                capacity_bytes: group.capacity_bytes,
                usable_bytes,
                weights_bytes: held.weights_bytes,
                kv_cache_bytes: held.kv_cache_bytes,
                activation_bytes: held.activation_bytes,
                total_bytes: held.total_bytes,
                fits: !refused && held.total_bytes <= usable_bytes,
            };
            per_device.extend((0..group.count).map(|_| device.clone()));
        }
        let smallest = per_device.iter().map(|d| d.usable_bytes).min().unwrap_or(0);
        let longest = sizings.iter().map(|s| s.max_context).min().unwrap_or(0);
        let fits_at = |context: u64| per_rank_at(Some(context)).is_some_and(|r| r.total_bytes <= smallest);
        if !refused {
            max_context_that_fits = Some(largest_passing(longest, fits_at));
        }
    }
    let all_fit = per_device.iter().all(|d| d.total_bytes <= d.usable_bytes);
    // A refused artifact's figures are lower bounds: they can prove a plan does not fit,
    // never that it does.
    let fits = match (per_device.is_empty(), refused, all_fit) {
        (true, _, _) => None,
        (false, true, true) => None,
        (false, _, all_fit) => Some(all_fit),
    };
    Memory {
        sequences: options.sequences.unwrap_or(1),
        tensor_parallel: options.tensor_parallel_degree(),
        gpu_utilization: utilization.into(),
        weights_bytes: sum(|r| r.weights_bytes),
        kv_cache_bytes_per_token: sum(|r| r.kv_cache_bytes_per_token),
        kv_cache_bytes: sum(|r| r.kv_cache_bytes),
        activation_bytes: sum(|r| r.activation_bytes),
        total_bytes: sum(|r| r.total_bytes),
        per_device,
        fits,
        max_context_that_fits,
        throughput_bounds: None,
    }
}

/// The largest `n` in `1..=upper` with `passes(n)`, or 0 when none does, for a `passes`
/// that holds up to some point and fails after it (memory only grows with context).
/// Binary search over the exact function, so sliding windows are honoured, not assumed away.
pub fn largest_passing(upper: u64, passes: impl Fn(u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (0u64, upper);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_passing_finds_the_boundary() {
        for boundary in [0u64, 1, 2, 7, 1000, 4095, 4096] {
            assert_eq!(largest_passing(4096, |n| n <= boundary), boundary.min(4096));
        }
        assert_eq!(largest_passing(u64::MAX, |n| n < u64::MAX), u64::MAX - 1);
        assert_eq!(largest_passing(0, |_| true), 0);
    }

    #[test]
    fn what_if_rates_round_up_and_leave_non_linear_parts_as_stored() {
        let share = Share {
            params: 1000,
            bytes: 2000,
        };
        assert_eq!(part_bytes(Component::Mlp, share, None), 2000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Fp8)), 1000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Int4)), 520); // 1000 × 133/256
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::Int4)), 2000);
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::F32)), 4000);
        assert_eq!(part_bytes(Component::Buffer, share, Some(WeightsDtype::F32)), 2000);
    }
}
