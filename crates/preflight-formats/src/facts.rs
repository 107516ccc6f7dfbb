//! Staged facts: everything the planner may know about one artifact, as plain data.
//! Sources produce these; the planner consumes them. Nothing here knows how it was read.

use serde::{Deserialize, Serialize};

use crate::{config::Config, gguf, index::Index, safetensors};

/// Where an artifact came from, as the verdict reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// The source as the user wrote it.
    pub spec: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The commit actually read, when the source has one (Hub sources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The user named a commit, so no probe was needed.
    pub pinned: bool,
}

/// One safetensors file and its parsed header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetensorsFile {
    pub name: String,
    /// Full file size, when the source knows it.
    pub size: Option<u64>,
    pub header: safetensors::Header,
}

/// One GGUF file (or one part of a split GGUF).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufFile {
    pub name: String,
    pub size: Option<u64>,
    pub header: gguf::Header,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "snake_case")]
pub enum Content {
    Safetensors {
        files: Vec<SafetensorsFile>,
        index: Option<Index>,
        /// Shards the index names that could not be found at the source.
        missing_files: Vec<String>,
    },
    Gguf {
        parts: Vec<GgufFile>,
        /// Parts a split GGUF declares that could not be found.
        missing_parts: Vec<String>,
    },
}

/// What reading cost: the verdict's `staging` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagingStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Files read (config, index, headers, small metadata files).
    pub files: u64,
    /// Read requests issued (ranged GETs over HTTP, reads on disk). A GET the Hub answers
    /// with a redirect to its CDN is one request here; the hop is counted in `redirects`.
    pub requests: u64,
    /// Redirects followed (Hub → CDN), each an extra HTTP round trip.
    pub redirects: u64,
    pub bytes_fetched: u64,
    /// Bytes of safetensors/GGUF headers among them.
    pub header_bytes: u64,
}

/// The Hub's gating of a repo, written on the wire as the Hub writes it: `false`, `"auto"`
/// (access granted on request) or `"manual"` (the owners review each request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gated {
    No,
    Auto,
    Manual,
}

impl Gated {
    /// The Hub's `gated` value: `false`, `"auto"`, `"manual"` (a plain `true`, which older
    /// answers carry, is a manual review). Anything else is not a gating this knows.
    pub fn from_hub(value: &serde_json::Value) -> Option<Gated> {
        match value {
            serde_json::Value::Bool(false) => Some(Gated::No),
            serde_json::Value::Bool(true) => Some(Gated::Manual),
            serde_json::Value::String(s) if s == "auto" => Some(Gated::Auto),
            serde_json::Value::String(s) if s == "manual" => Some(Gated::Manual),
            _ => None,
        }
    }
}

impl Serialize for Gated {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Gated::No => serializer.serialize_bool(false),
            Gated::Auto => serializer.serialize_str("auto"),
            Gated::Manual => serializer.serialize_str("manual"),
        }
    }
}

impl<'de> Deserialize<'de> for Gated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Gated::from_hub(&value).ok_or_else(|| {
            serde::de::Error::custom(format_args!("gated must be false, \"auto\" or \"manual\", not {value}"))
        })
    }
}

/// One top-level file of the source, as its listing names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedFile {
    pub name: String,
    /// Bytes, when the listing gives them (the Hub's with `blobs=true`, a directory's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// What a source says about itself beside the checkpoint: the model card's licence, the Hub's
/// gating, and its top-level files (which the planner needs to name remote code and to size a
/// download). Nothing here changes a figure of the plan. Each part is `None` when the source
/// cannot say (a local folder has no gating; a snapshot planned from the HF cache without a
/// request has no card).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMeta {
    /// The model card's `license` (the Hub's `cardData.license`; a list joined by `, `).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// The card's `license_name`, which names the licence a `license: other` means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated: Option<Gated>,
    /// The source's top-level files: the Hub's listing at the commit read, or the directory's
    /// entries; `None` when staging had no listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<ListedFile>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactFacts {
    pub source: SourceRef,
    /// `config.json` (absent for a lone file or a GGUF).
    pub config: Option<Config>,
    /// `hf_quant_config.json`, where NVIDIA ModelOpt checkpoints declare their quantization
    /// (and its exclude list) instead of config.json's `quantization_config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant_config: Option<Config>,
    pub content: Content,
    /// Licence, gating and the top-level listing (see [`SourceMeta`]).
    #[serde(default)]
    pub meta: SourceMeta,
    pub staging: StagingStats,
}
