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
    pub staging: StagingStats,
}
