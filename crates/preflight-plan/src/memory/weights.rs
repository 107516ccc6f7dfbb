//! What each rank holds of the weights: components by tensor-parallel placement, what-if
//! dtypes, duplicated K/V heads, padded or whole experts.

use std::collections::BTreeMap;

use super::engine::WiderSplit;
use crate::families::Placement;
use crate::model::{Mixer, Model};
use crate::options::{PlanOptions, WeightsDtype};
use crate::verdict::Component;

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
    pub(super) parts: BTreeMap<(Component, Placement), Share>,
    /// Bytes of tensors no component claims (a blocking finding already says so); held
    /// whole by every rank, the conservative choice.
    pub(super) unplaced_bytes: u64,
    /// Bytes of each decoder layer's tensors: what llama.cpp leaves in host RAM for the
    /// layers `--gpu-layers` does not offload.
    pub(super) layer_bytes: BTreeMap<u32, u64>,
    /// A GGUF's tensors by name, in header order: what llama.cpp places by name (its layer
    /// classes, `--override-tensor`). Empty for safetensors.
    pub(super) named: std::sync::Arc<[NamedTensor]>,
}

/// One stored tensor's name, bytes and place in its file.
#[derive(Debug, Clone)]
pub struct NamedTensor {
    pub name: Box<str>,
    pub bytes: u64,
    /// The file (split part) holding it, and its offset in that file's data section.
    pub file: u32,
    pub offset: u64,
    /// An MTP block's: llama.cpp skips it unless an MTP context asks for it.
    pub mtp: bool,
}

impl WeightsLayout {
    pub fn add(&mut self, component: Component, placement: Placement, params: u64, bytes: u64) {
        let share = self.parts.entry((component, placement)).or_default();
        share.params = share.params.saturating_add(params);
        share.bytes = share.bytes.saturating_add(bytes);
    }

    pub fn add_layer(&mut self, layer: u32, bytes: u64) {
        let held = self.layer_bytes.entry(layer).or_default();
        *held = held.saturating_add(bytes);
    }

    pub fn set_named(&mut self, named: Vec<NamedTensor>) {
        self.named = named.into();
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

/// Whether `tp` ranks can split the model as vLLM requires (heads, each layer's KV heads,
/// the MLP widths), and if so the K/V projection parameters each rank holds beyond its
/// share: with fewer KV heads than ranks, every rank keeps one whole head's K and V rows.
/// `expert_width_degree`: the ranks one expert's width is sliced over (1 when experts are
/// held whole).
pub(crate) fn tensor_parallel_split(model: &Model, layers: &[Mixer], tp: u64, expert_width_degree: u64) -> Option<u64> {
    let expert_width = model.moe.as_ref().and_then(|m| m.expert_intermediate_size);
    if !model.heads.is_multiple_of(tp)
        || !model.intermediate.is_none_or(|w| w.is_multiple_of(tp))
        || !expert_width.is_none_or(|w| w.is_multiple_of(expert_width_degree.max(1)))
    {
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

/// Weight bytes one of `tp` ranks holds (`tp` 1: the whole model): replicated parts whole,
/// sharded parts split, plus `kv_projection_excess` parameters of K/V projections that
/// ranks duplicate when there are fewer KV heads than ranks. `expert_padding` (allocated,
/// stored) scales the routed experts where the engine allocates them padded;
/// `experts_held` (held, all) is a rank's share of whole experts under expert parallelism,
/// in place of a slice of every one. `wider`: sharded components the engine splits over
/// more ranks than `tp` (SGLang's data-parallel attention).
pub(crate) fn weights_bytes(
    layout: &WeightsLayout,
    options: &PlanOptions,
    tp: u64,
    kv_projection_excess: u64,
    expert_padding: Option<(u64, u64)>,
    experts_held: Option<(u64, u64)>,
    wider: Option<WiderSplit>,
) -> u64 {
    let mut total = layout.unplaced_bytes;
    for ((component, placement), share) in &layout.parts {
        if *component == Component::Mtp && !options.include_mtp {
            continue;
        }
        let mut bytes = part_bytes(*component, *share, options.weights_dtype);
        if let (Component::Experts, Some((allocated, stored))) = (component, expert_padding) {
            let padded = u128::from(bytes) * u128::from(allocated) / u128::from(stored);
            bytes = u64::try_from(padded).unwrap_or(u64::MAX);
        }
        let held = match (placement, component, experts_held) {
            (Placement::Sharded, Component::Experts, Some((held, all))) => {
                u64::try_from((u128::from(bytes) * u128::from(held)).div_ceil(u128::from(all))).unwrap_or(u64::MAX)
            }
            (Placement::Replicated, ..) => bytes,
            (Placement::Sharded, ..) => match wider.filter(|w| w.components.contains(component)) {
                Some(w) => bytes.div_ceil(w.ranks.max(1)),
                None => bytes.div_ceil(tp),
            },
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
pub(crate) fn part_bytes(component: Component, share: Share, what_if: Option<WeightsDtype>) -> u64 {
    match what_if {
        Some(dtype) if component != Component::Buffer && (dtype.is_float() || component.is_linear()) => {
            let (params, bytes) = dtype.rate();
            let scaled = (u128::from(share.params) * u128::from(bytes)).div_ceil(u128::from(params));
            u64::try_from(scaled).unwrap_or(u64::MAX)
        }
        _ => share.bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_if_rates_round_up_and_leave_non_linear_parts_as_stored() {
        let share = Share {
            params: 1000,
            bytes: 2000,
        };
        assert_eq!(part_bytes(Component::Mlp, share, None), 2000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Fp8)), 1000);
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Int4)), 520); // 1000 × 133/256
        assert_eq!(part_bytes(Component::Mlp, share, Some(WeightsDtype::Nvfp4)), 563); // 1000 × 9/16
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::Int4)), 2000);
        assert_eq!(part_bytes(Component::Embedding, share, Some(WeightsDtype::F32)), 4000);
        assert_eq!(part_bytes(Component::Buffer, share, Some(WeightsDtype::F32)), 2000);
    }
}
