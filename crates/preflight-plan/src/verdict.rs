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
    pub kv_heads: u64,
    pub head_dim: u64,
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
