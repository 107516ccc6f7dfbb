//! Throughput bounds: how fast the named devices could serve a checkpoint at best — a
//! roofline, labelled as bounds, never a prediction. Decode is bandwidth-bound (every step
//! reads the active weights and the KV cache), prefill compute-bound (twice the active
//! parameters plus attention FLOPs a token). Pure arithmetic on the memory plan and the device
//! catalogue; `docs/throughput.md` gives the formula, its units and what it leaves out.

use crate::devices::Device;
use crate::memory::{Share, part_bytes};
use crate::model::{Mixer, Model, Span};
use crate::options::{DeviceGroup, PlanOptions};
use crate::runtimes::Weights;
use crate::verdict::{ArtifactMemory, Component, Memory, Parameters, ThroughputBounds};

/// What one artifact costs a token, per tensor-parallel rank, before any device is chosen.
#[derive(Debug, Clone)]
pub struct Load {
    active_weights_bytes_per_rank: u64,
    kv_bytes_per_rank: u64,
    flops_per_token: f64,
    weights: Weights,
}

/// The artifact's load, from its memory plan. `routed_expert_bytes`: the stored bytes of its
/// routed experts (scales included), of which a token reads only `top_k / experts`.
pub fn load(
    model: &Model,
    memory: &ArtifactMemory,
    parameters: &Parameters,
    routed_expert_bytes: u64,
    options: &PlanOptions,
) -> Option<Load> {
    let rank = memory.per_rank.as_ref()?;
    let tp = rank.tensor_parallel.max(1);
    // A what-if type re-prices the experts as it re-prices every linear layer.
    let routed = Share {
        params: parameters.by_component.get(&Component::Experts).copied().unwrap_or(0),
        bytes: routed_expert_bytes,
    };
    let expert_bytes = part_bytes(Component::Experts, routed, options.weights_dtype);
    let idle_experts = model.moe.as_ref().map_or(0, |moe| {
        let idle = moe.experts.saturating_sub(moe.active);
        let share = u128::from(expert_bytes.div_ceil(tp)) * u128::from(idle) / u128::from(moe.experts.max(1));
        u64::try_from(share).unwrap_or(u64::MAX)
    });
    let weights = computed_in(model, options);
    let active = parameters.active_per_token.unwrap_or(parameters.total);
    Some(Load {
        active_weights_bytes_per_rank: rank.weights_bytes.saturating_sub(idle_experts),
        // The cells a step reads (not the pages an engine reserves), a rank's share: fewer
        // bytes than any rank can read, so the bound stays an upper bound.
        kv_bytes_per_rank: memory.model_cache_bytes().div_ceil(tp),
        flops_per_token: 2.0 * active as f64 + attention_flops(model, memory.context),
        weights,
    })
}

/// Attention FLOPs one prompt token costs, averaged over a causal prompt of `context` tokens
/// (a token attends to half the prompt on average, or its window). Layers without softmax
/// attention over the context (linear attention, Mamba, the sparse indexer's selection) are
/// left out, which only raises the bound.
fn attention_flops(model: &Model, context: u64) -> f64 {
    let half = context as f64 / 2.0;
    attention_per_key(model)
        .iter()
        .map(|&(flops, window)| flops * window.map_or(half, |w| half.min(w as f64)))
        .sum()
}

/// Attention FLOPs one token spends per key it attends to, layer by layer, with the layer's
/// window: QKᵀ and AV, 2 FLOPs a multiply-add, per query head. Absorbed MLA scores over the
/// latent and the rope part and reads values from the latent, as engines decode it. Layers
/// without softmax over the context (linear attention, Mamba) cost none per key.
pub(crate) fn attention_per_key(model: &Model) -> Vec<(f64, Option<u64>)> {
    let heads = model.heads as f64;
    model
        .layers
        .iter()
        .filter_map(|layer| match *layer {
            Mixer::Attention {
                head_dim,
                v_head_dim,
                span,
                ..
            } => {
                let window = match span {
                    Span::Full => None,
                    Span::Sliding(w) | Span::Chunked(w) => Some(w),
                };
                // In f64: a hostile config's widths may not sum in 64 bits.
                Some((2.0 * heads * (head_dim as f64 + v_head_dim as f64), window))
            }
            Mixer::Mla {
                kv_lora_rank,
                rope_dim,
                indexer_head_dim: None,
            } => Some((2.0 * heads * (2.0 * kv_lora_rank as f64 + rope_dim as f64), None)),
            _ => None,
        })
        .collect()
}

/// The weights' type as the device computes them: the what-if's, else as stored.
pub(crate) fn computed_in(model: &Model, options: &PlanOptions) -> Weights {
    match options.weights_dtype {
        Some(crate::options::WeightsDtype::Fp8) => Weights::Fp8,
        Some(crate::options::WeightsDtype::Mxfp4) => Weights::Mxfp4,
        Some(crate::options::WeightsDtype::Nvfp4) => Weights::Nvfp4,
        Some(_) => Weights::Other,
        None => model.quantization.as_ref().map_or(Weights::Other, Weights::of),
    }
}

/// The peak dense FLOP/s a device has for these weights, and which type that is: the weights'
/// own when the device computes it natively (a vendor FP8/FP4 figure exists), else BF16.
pub(crate) fn peak(device: &Device, weights: Weights) -> (Option<f64>, &'static str) {
    let narrow = match weights {
        Weights::Fp8 => device.fp8_dense_flops.map(|f| (f, "fp8")),
        Weights::Nvfp4 | Weights::Mxfp4 => device.fp4_dense_flops.map(|f| (f, "fp4")),
        Weights::Other => None,
    };
    match narrow {
        Some((flops, dtype)) => (Some(flops), dtype),
        None => (device.bf16_dense_flops, "bf16"),
    }
}

/// The bounds on `devices`: each figure is the slowest group's, and null when a group lacks
/// the number it needs (a device given by size, or one without a vendor figure).
pub fn bounds(load: &Load, devices: &[DeviceGroup], tensor_parallel: u64) -> Option<ThroughputBounds> {
    if devices.is_empty() {
        return None;
    }
    let decode_bytes = load
        .active_weights_bytes_per_rank
        .saturating_add(load.kv_bytes_per_rank);
    let catalogued: Option<Vec<&Device>> = devices.iter().map(DeviceGroup::device).collect();
    let slowest = |f: &dyn Fn(&Device) -> Option<f64>| -> Option<f64> {
        catalogued
            .as_ref()?
            .iter()
            .map(|d| f(d))
            .collect::<Option<Vec<f64>>>()?
            .into_iter()
            .reduce(f64::min)
    };
    let decode = slowest(&|d| d.memory_bandwidth_bytes_per_s)
        .filter(|_| decode_bytes > 0)
        .map(|bandwidth| bandwidth / decode_bytes as f64);
    // Tensor-parallel ranks share each token's FLOPs.
    let prefill = slowest(&|d| peak(d, load.weights).0)
        .filter(|_| load.flops_per_token > 0.0)
        .map(|flops| flops * tensor_parallel.max(1) as f64 / load.flops_per_token);
    let compute_dtype = catalogued
        .as_ref()
        .and_then(|d| d.first())
        .map_or("bf16", |d| peak(d, load.weights).1);
    Some(ThroughputBounds {
        decode_tokens_per_s: decode,
        prefill_tokens_per_s: prefill,
        decode_bytes_per_rank: decode_bytes,
        active_weights_bytes_per_rank: load.active_weights_bytes_per_rank,
        prefill_flops_per_token: load.flops_per_token,
        compute_dtype: compute_dtype.to_owned(),
        decode_withheld: None,
    })
}

/// A llama.cpp placement over several devices, or partly in host RAM, runs a token through
/// each holder in turn, the host's share at a bandwidth the catalogue does not give: one rank's
/// bytes over one device's bandwidth would overstate the decode bound, so it is withheld.
pub(crate) fn withhold_split_decode(memory: &mut Memory, options: &PlanOptions) {
    let Some(offload) = memory.offload.as_ref() else { return };
    let holders = memory.per_device.iter().filter(|d| d.layers.unwrap_or(0) > 0).count();
    let why = if offload.gpu_layers < offload.layers
        || offload.expert_layers_on_host > 0
        || !options.override_tensor.is_empty()
        || options.no_kv_offload
    {
        "weights or KV cache in host RAM are read at the host's bandwidth, not a device's"
    } else if holders > 1 {
        "a layer split runs its devices one after another for each token"
    } else {
        return;
    };
    if let Some(bounds) = memory.throughput_bounds.as_mut() {
        bounds.decode_tokens_per_s = None;
        bounds.decode_withheld = Some(why.to_owned());
    }
}
