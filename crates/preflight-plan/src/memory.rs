//! Memory and fit: what serving a checkpoint takes — weights, KV cache, activations — per
//! tensor-parallel rank and per named device, and the longest context that fits. Pure
//! arithmetic on the architecture and the weights' layout; `docs/memory.md` gives every
//! formula and the engine code it follows. **Fails closed:** when an artifact's memory
//! cannot be known, it gets a `memory.unavailable` finding, never a guessed number.

use std::collections::BTreeMap;

use crate::families::{Component, Placement};
use crate::findings::{Code, Findings};
use crate::options::{KvDtype, PlanOptions, WeightsDtype};
use crate::verdict::{
    Architecture, ArtifactMemory, Attention, DeviceMemory, Format, KvCacheGroup, Memory, Parameters, RankMemory,
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

    /// Drop a component (a stored lm_head that tied embeddings make a copy of: engines
    /// skip loading it).
    pub fn remove(&mut self, component: Component) {
        self.parts.retain(|(c, _), _| *c != component);
    }
}

/// What sizing one artifact needs beyond its architecture.
pub struct Inputs<'a> {
    pub architecture: Option<&'a Architecture>,
    pub format: Format,
    pub parameters: &'a Parameters,
    pub layout: &'a WeightsLayout,
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
}

/// Layers that cache alike.
#[derive(Debug, Clone)]
struct LayerCache {
    kind: &'static str,
    /// Tokens a sequence keeps at most; `None` grows with the context.
    window: Option<u64>,
    layers: u64,
    per_token: u64,
    per_token_rank: u64,
}

impl LayerCache {
    fn alike(&self, other: &LayerCache) -> bool {
        (self.kind, self.window, self.per_token, self.per_token_rank)
            == (other.kind, other.window, other.per_token, other.per_token_rank)
    }
}

/// Prepare one artifact, or say with a finding why its memory cannot be known.
pub fn prepare(inputs: &Inputs, options: &PlanOptions, findings: &mut Findings) -> Option<Sizing> {
    let unavailable = |findings: &mut Findings, subject: &str, why: String| {
        findings.push(Code::MemoryUnavailable, subject, why);
        None
    };
    let Some(arch) = inputs.architecture else {
        return unavailable(
            findings,
            "architecture",
            "the architecture is not known (see the other findings), so neither is its memory".into(),
        );
    };
    let kv_dtype = match options.kv_dtype {
        Some(dtype) => dtype,
        None => match model_kv_dtype(arch, inputs.format, inputs.parameters, findings) {
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
    let tp = options.tensor_parallel_degree().max(1);
    let mut attention = arch.attention.clone();
    if options.include_mtp
        && let Some(last) = arch.attention.last()
    {
        // An MTP layer is one more decoder layer of the main stack's kind.
        attention.extend((0..arch.mtp_layers).map(|_| *last));
    }
    let mut caches: Vec<LayerCache> = Vec::new();
    for (layer, kind) in attention.iter().enumerate() {
        let cache = match layer_cache(arch, layer, *kind, kv_dtype, tp) {
            Ok(cache) => cache,
            Err(why) => return unavailable(findings, &format!("layer {layer}"), why),
        };
        match caches.iter_mut().find(|c| c.alike(&cache)) {
            Some(group) => group.layers += 1,
            None => caches.push(cache),
        }
    }
    let kv_projection_excess = tensor_parallel_split(arch, &attention, tp);
    if kv_projection_excess.is_none() {
        findings.push(
            Code::MemoryTensorParallelInvalid,
            "tensor_parallel",
            format!(
                "{tp}-way tensor parallelism cannot split this model: it needs {} heads, every layer's KV heads and the MLP widths divisible by {tp} (or KV heads dividing {tp})",
                arch.heads
            ),
        );
    }
    let context = options.context.unwrap_or(arch.context);
    if context > arch.context {
        let finding = findings.push(
            Code::MemoryContextExceedsModel,
            "context",
            format!(
                "{context} tokens is past the {} the model declares; engines refuse it unless overridden",
                arch.context
            ),
        );
        finding.declared = Some(arch.context.into());
        finding.observed = Some(context.into());
    }
    let weights = weights_bytes(inputs.layout, options, 1, 0);
    let rank_weights = kv_projection_excess.map(|excess| weights_bytes(inputs.layout, options, tp, excess));
    Some(Sizing {
        context,
        max_context: arch.context,
        sequences: options.sequences.unwrap_or(1),
        kv_dtype,
        weights_dtype: options.weights_dtype,
        weights,
        caches,
        activation_width: arch.vocab_size.saturating_add(arch.hidden_size.saturating_mul(2)).max(
            arch.hidden_size
                .saturating_mul(2)
                .saturating_add(ffn_width(arch).saturating_mul(3)),
        ),
        vocab: arch.vocab_size,
        tensor_parallel: tp,
        rank_weights,
    })
}

/// KV heads of one layer: its own where the checkpoint declares them per layer.
fn kv_heads(arch: &Architecture, layer: usize) -> u64 {
    arch.kv_heads_per_layer
        .as_ref()
        .and_then(|per| per.get(layer).copied())
        .unwrap_or(arch.kv_heads)
}

/// What one layer caches per token, whole and on one of `tp` ranks; `Err` says why the
/// planner has no cache model for it.
fn layer_cache(
    arch: &Architecture,
    layer: usize,
    kind: Attention,
    dtype: KvDtype,
    tp: u64,
) -> Result<LayerCache, String> {
    let (key, value) = (arch.head_dim, arch.v_head_dim.unwrap_or(arch.head_dim));
    match kind {
        Attention::Full | Attention::Sliding { .. } => {
            let heads = kv_heads(arch, layer);
            if heads == 0 || key == 0 || value == 0 {
                return Err(format!(
                    "layer {layer} has no KV heads or a zero head width: a kind of layer the planner has no cache model for"
                ));
            }
            let window = match kind {
                Attention::Sliding { window: 0 } => return Err("a sliding window of 0 tokens is not a window".into()),
                Attention::Sliding { window } => Some(window),
                _ => None,
            };
            let per_token = |heads: u64| {
                dtype
                    .row_bytes(heads.saturating_mul(key))
                    .saturating_add(dtype.row_bytes(heads.saturating_mul(value)))
            };
            Ok(LayerCache {
                kind: if window.is_some() { "sliding" } else { "full" },
                window,
                layers: 1,
                per_token: per_token(heads),
                // vLLM `get_num_kv_heads`: max(1, kv / tp) — a whole head when kv < tp.
                per_token_rank: per_token((heads / tp).max(1)),
            })
        }
        Attention::Mla { kv_lora_rank: 0, .. } => {
            Err("an MLA layer with kv_lora_rank 0 caches nothing the planner can size".into())
        }
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        } => {
            // One latent per token, no separate V; every rank holds all of it.
            let per_token = dtype.row_bytes(kv_lora_rank.saturating_add(qk_rope_head_dim));
            Ok(LayerCache {
                kind: "mla",
                window: None,
                layers: 1,
                per_token,
                per_token_rank: per_token,
            })
        }
    }
}

/// Whether `tp` ranks can split the model as vLLM requires (heads, each layer's KV heads,
/// the MLP widths), and if so the K/V projection parameters each rank holds beyond its
/// share: with fewer KV heads than ranks, every rank keeps one whole head's K and V rows.
fn tensor_parallel_split(arch: &Architecture, attention: &[Attention], tp: u64) -> Option<u64> {
    let widths = [
        arch.intermediate_size,
        arch.moe.as_ref().and_then(|m| m.expert_intermediate_size),
    ];
    if !arch.heads.is_multiple_of(tp) || !widths.iter().flatten().all(|w| w.is_multiple_of(tp)) {
        return None;
    }
    let value = arch.v_head_dim.unwrap_or(arch.head_dim);
    let mut excess = 0u64;
    for (layer, kind) in attention.iter().enumerate() {
        if matches!(kind, Attention::Mla { .. }) {
            continue;
        }
        let heads = kv_heads(arch, layer);
        if !(heads.is_multiple_of(tp) || tp.is_multiple_of(heads)) {
            return None;
        }
        if heads < tp {
            let rows = arch.head_dim.saturating_add(value).saturating_mul(arch.hidden_size);
            excess = excess.saturating_add(rows.saturating_mul(tp - heads) / tp);
        }
    }
    Some(excess)
}

/// The KV dtype when none is asked for: GGUF caches in f16 (llama.cpp's default `type_k`
/// and `type_v`); safetensors in the model's dtype (vLLM's `kv_cache_dtype=auto`), from the
/// config, else the float dtype most parameters are stored in.
fn model_kv_dtype(
    arch: &Architecture,
    format: Format,
    parameters: &Parameters,
    findings: &mut Findings,
) -> Option<KvDtype> {
    if format == Format::Gguf {
        return Some(KvDtype::F16);
    }
    if let Some(dtype) = arch.dtype.as_deref().and_then(KvDtype::from_model_dtype) {
        return Some(dtype);
    }
    let (name, dtype) = parameters
        .by_dtype
        .iter()
        .filter_map(|(name, n)| Some((n, name, KvDtype::from_model_dtype(name)?)))
        .max_by_key(|(n, _, _)| **n)
        .map(|(_, name, dtype)| (name, dtype))?;
    let finding = findings.push(
        Code::MemoryDtypeInferred,
        "kv_dtype",
        format!("the config declares no dtype the planner knows; the KV cache is planned in {name}, the float dtype most parameters are stored in"),
    );
    finding.declared = arch.dtype.clone().map(Into::into);
    finding.observed = Some(name.clone().into());
    Some(dtype)
}

/// The widest per-token MLP: the dense width, or the routed-plus-shared experts' widths.
fn ffn_width(arch: &Architecture) -> u64 {
    let dense = arch.intermediate_size.unwrap_or(0);
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
            let per_token = if rank { c.per_token_rank } else { c.per_token };
            let tokens = c.window.map_or(context, |w| w.min(context));
            acc.saturating_add(
                c.layers
                    .saturating_mul(per_token)
                    .saturating_mul(tokens)
                    .saturating_mul(self.sequences),
            )
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
                let tokens = c.window.map_or(context, |w| w.min(context));
                KvCacheGroup {
                    kind: c.kind.to_owned(),
                    window: c.window,
                    layers: c.layers,
                    bytes_per_token_per_layer: c.per_token,
                    tokens_per_sequence: tokens,
                    bytes: c
                        .layers
                        .saturating_mul(c.per_token)
                        .saturating_mul(tokens)
                        .saturating_mul(self.sequences),
                }
            })
            .collect();
        let kv_cache_bytes = self.kv(context, false);
        let activation_bytes = self.activation(context);
        ArtifactMemory {
            context,
            sequences: self.sequences,
            kv_dtype: self.kv_dtype.name().to_owned(),
            weights_dtype: self.weights_dtype.map_or("as_stored", WeightsDtype::name).to_owned(),
            weights_bytes: self.weights,
            kv_cache_bytes_per_token: self
                .caches
                .iter()
                .filter(|c| c.window.is_none())
                .fold(0u64, |acc, c| acc.saturating_add(c.layers.saturating_mul(c.per_token))),
            kv_cache_bytes,
            activation_bytes,
            total_bytes: self
                .weights
                .saturating_add(kv_cache_bytes)
                .saturating_add(activation_bytes),
            kv_cache,
            per_rank: self.rank(context),
        }
    }
}

/// The system's memory: every artifact on the same devices at the same tensor-parallel
/// degree, each device holding one rank of every artifact.
pub fn system(sizings: &[Sizing], options: &PlanOptions) -> Memory {
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
                fits: held.total_bytes <= usable_bytes,
            };
            per_device.extend((0..group.count).map(|_| device.clone()));
        }
        let smallest = per_device.iter().map(|d| d.usable_bytes).min().unwrap_or(0);
        let longest = sizings.iter().map(|s| s.max_context).min().unwrap_or(0);
        let fits_at = |context: u64| per_rank_at(Some(context)).is_some_and(|r| r.total_bytes <= smallest);
        max_context_that_fits = Some(largest_passing(longest, fits_at));
    }
    let fits = (!per_device.is_empty()).then(|| per_device.iter().all(|d| d.fits));
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
