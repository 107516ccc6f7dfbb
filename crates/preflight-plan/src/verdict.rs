//! The verdict document (SPEC §3). Versioned by [`SCHEMA`](crate::SCHEMA).

use std::collections::BTreeMap;

use preflight_formats::facts::{SourceRef, StagingStats};
use serde::{Deserialize, Serialize};

use crate::findings::Finding;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub schema: String,
    pub planner: PlannerVersion,
    /// No blocking finding in any artifact.
    pub admissible: bool,
    pub summary: Summary,
    pub artifacts: Vec<ArtifactVerdict>,
    /// Memory and fit of the whole system on the named devices: present when the options
    /// ask for memory and every artifact's memory is known (else see each artifact's
    /// `memory.unavailable` finding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Per artifact, in artifact order.
    pub staging: Vec<StagingStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannerVersion {
    pub version: String,
    pub semantics_version: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub blocking: usize,
    pub warnings: usize,
    pub info: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactVerdict {
    pub name: String,
    pub source: SourceRef,
    pub format: Format,
    /// Absent when the architecture could not be established (see findings).
    pub architecture: Option<Architecture>,
    pub parameters: Parameters,
    /// Bytes of tensor data as stored (scales, MTP layers and all).
    pub weights_bytes: u64,
    /// Raw stored elements per dtype (packed 4-bit bytes counted as stored).
    pub tensor_elements_by_dtype: BTreeMap<String, u64>,
    /// This artifact's share of the memory plan, when the options ask for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<ArtifactMemory>,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Safetensors,
    Gguf,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Parameters {
    /// Logical parameters: packed 4-bit values unpacked, scales and buffers excluded, tied
    /// weights once, MTP layers included (see `by_component.mtp`).
    pub total: u64,
    pub by_dtype: BTreeMap<String, u64>,
    pub by_component: BTreeMap<String, u64>,
    /// For MoE: every non-routed parameter plus `experts × active / experts`; MTP excluded.
    /// For dense models: `total` less MTP.
    pub active_per_token: Option<u64>,
}

/// What the planner understood of the model, normalised across families.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub model_type: String,
    pub family: String,
    pub layers: u64,
    pub hidden_size: u64,
    pub heads: u64,
    /// The most KV heads any layer has (see `kv_heads_per_layer`).
    pub kv_heads: u64,
    /// Key (and query) width per head, as declared — not assumed to be hidden/heads.
    pub head_dim: u64,
    /// Value width per head, when it differs from `head_dim` (GGUF `attention.value_length`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_head_dim: Option<u64>,
    /// KV heads of each layer, when they differ between layers (GGUF per-layer
    /// `attention.head_count_kv`); a 0 is a layer without attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads_per_layer: Option<Vec<u64>>,
    /// Width of the dense MLP layers (`intermediate_size`), when the model has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate_size: Option<u64>,
    pub vocab_size: u64,
    /// Longest context the config declares (`max_position_embeddings` or equivalent).
    pub context: u64,
    /// One entry per layer, in order.
    pub attention: Vec<Attention>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<Moe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<Quantization>,
    /// Multi-token-prediction layers stored after the main stack (DeepSeek's `nextn`).
    pub mtp_layers: u64,
    pub tie_word_embeddings: bool,
    /// The dtype the weights were trained/saved in (`torch_dtype`), when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
}

impl Architecture {
    /// The `active_per_token` convention (README): every parameter that is not a routed
    /// expert, plus `active / experts` of the routed experts; MTP layers excluded.
    pub fn active_per_token(&self, total: u64, by_component: &BTreeMap<String, u64>) -> u64 {
        let component = |name: &str| by_component.get(name).copied().unwrap_or(0);
        let dense = total.saturating_sub(component("mtp"));
        match &self.moe {
            Some(moe) if moe.experts > 0 => {
                let experts = component("experts");
                dense
                    .saturating_sub(experts)
                    .saturating_add(experts / moe.experts * moe.active.min(moe.experts))
            }
            _ => dense,
        }
    }

    /// Whether the layer indices present are exactly `0..declared`.
    pub fn layers_complete(present: &std::collections::BTreeSet<u64>, declared: u64) -> bool {
        present.len() as u64 == declared && present.iter().enumerate().all(|(i, l)| i as u64 == *l)
    }
}

/// How one layer attends, which decides what its KV cache costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attention {
    /// Every past token is attended to: the cache grows with context.
    Full,
    /// Only the last `window` tokens: the cache stops growing at the window.
    Sliding { window: u64 },
    /// Multi-head latent attention: one compressed latent per token.
    Mla { kv_lora_rank: u64, qk_rope_head_dim: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u64,
    /// Routed experts used per token (top-k).
    pub active: u64,
    /// Shared (always-on) experts per MoE layer.
    pub shared: u64,
    /// Layers with a dense MLP instead of experts.
    pub dense_layers: Vec<u64>,
    /// Width of one expert's MLP (and of each shared expert), when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_intermediate_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quantization {
    /// `fp8`, `mxfp4`, `gptq`, `awq`, `bitsandbytes`, `compressed-tensors`, `gguf`, …
    pub method: String,
    /// How it is stored, e.g. `F8_E4M3 weights + F32 weight_scale_inv per 128×128 block`.
    pub layout: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits: Option<u64>,
}

/// Memory and fit of a whole system (SPEC §3 `memory`): every artifact placed with the same
/// tensor-parallel degree on the same devices. See `docs/memory.md` for every formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub sequences: u64,
    pub tensor_parallel: u64,
    pub gpu_utilization: f64,
    /// Sums over the artifacts of their `memory` figures.
    pub weights_bytes: u64,
    pub kv_cache_bytes_per_token: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    pub total_bytes: u64,
    /// One entry per named device; empty without devices, or when an artifact cannot be
    /// placed at this tensor-parallel degree.
    pub per_device: Vec<DeviceMemory>,
    /// Every device holds its share within its usable bytes. Null without `per_device`.
    pub fits: Option<bool>,
    /// The longest context (at `sequences`, for every artifact, up to the shortest model
    /// maximum) for which `fits` holds; 0 when not even one token fits. Null without
    /// `per_device`.
    pub max_context_that_fits: Option<u64>,
}

/// What one device holds: its rank's share of every artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// Catalogue name, or the capacity in bytes for a device given by size.
    pub device: String,
    pub capacity_bytes: u64,
    /// `capacity_bytes × gpu_utilization`, rounded down.
    pub usable_bytes: u64,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    pub total_bytes: u64,
    pub fits: bool,
}

/// One artifact's memory: weights, KV cache by attention kind, activations, and the share
/// each tensor-parallel rank holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMemory {
    /// Tokens per sequence planned for.
    pub context: u64,
    pub sequences: u64,
    /// The KV cache element type (`bf16`, `f16`, `fp8`, …).
    pub kv_dtype: String,
    /// `as_stored`, or the what-if type the weights are planned in.
    pub weights_dtype: String,
    pub weights_bytes: u64,
    /// What one more token adds to one long sequence, past every sliding window.
    pub kv_cache_bytes_per_token: u64,
    /// For `context` tokens in each of `sequences` sequences.
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    pub total_bytes: u64,
    /// The KV cache by attention kind: the working behind `kv_cache_bytes`.
    pub kv_cache: Vec<KvCacheGroup>,
    /// What each tensor-parallel rank holds; absent when the model cannot be split this way
    /// (see the `memory.tensor_parallel_invalid` finding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_rank: Option<RankMemory>,
}

/// Layers that cache alike: same kind, window and bytes per token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCacheGroup {
    /// `full`, `sliding` or `mla`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    pub layers: u64,
    /// Bytes one token adds to one such layer.
    pub bytes_per_token_per_layer: u64,
    /// Tokens each sequence keeps in such a layer: `context`, or the window when shorter.
    pub tokens_per_sequence: u64,
    /// `layers × bytes_per_token_per_layer × tokens_per_sequence × sequences`.
    pub bytes: u64,
}

/// One tensor-parallel rank's share of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankMemory {
    pub tensor_parallel: u64,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    pub total_bytes: u64,
}
