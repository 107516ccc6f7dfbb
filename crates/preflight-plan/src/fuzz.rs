//! Fuzz targets: each takes arbitrary bytes as one reader's input, parses them, and plans
//! what parses under every engine, so "no panic, no abort, bounded memory" covers the reader
//! and everything the planner does with what it read. The same functions run under
//! libFuzzer (`fuzz/`, `cargo +nightly fuzz run TARGET`) and on the stable toolchain
//! (`tests/plan/no_panic.rs`: the kept corpus replayed, then a bounded random-input loop), which
//! is what CI runs. Not part of the planner's API.

use preflight_formats::config::{self, Config};
use preflight_formats::facts::{ArtifactFacts, Content, GgufFile, SafetensorsFile, SourceRef, StagingStats};
use preflight_formats::{gguf, index, safetensors};

use crate::{PlanOptions, plan};

/// A target: arbitrary bytes as one input, planned beside the seeds.
pub type Target = fn(&[u8], &Seeds);

/// The targets by name, as `fuzz/fuzz_targets/` and the corpus directories name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("safetensors", safetensors_header),
    ("gguf", gguf_header),
    ("index", index_json),
    ("config", config_json),
];

/// The real checkpoint a fuzzed part is planned beside: a config for fuzzed tensors, tensors
/// for a fuzzed config. Built from bytes the caller read (the planner reads no files).
pub struct Seeds {
    config: Option<Config>,
    file: Option<SafetensorsFile>,
}

impl Seeds {
    /// From a `config.json` and a whole `.safetensors` file (or a prefix holding its header).
    pub fn new(config_json: &[u8], safetensors_file: &[u8]) -> Seeds {
        let size = safetensors_file.len() as u64;
        let header = safetensors::required_prefix(safetensors_file)
            .ok()
            .and_then(|len| safetensors_file.get(..usize::try_from(len).ok()?))
            .and_then(|prefix| safetensors::parse(prefix, Some(size)).ok());
        Seeds {
            config: config::parse(config_json).ok(),
            file: header.map(|header| SafetensorsFile {
                name: "model.safetensors".into(),
                size: Some(size),
                header,
            }),
        }
    }
}

/// Options each parsed input is planned under: every engine, on a named device, so memory,
/// placement and the llama.cpp replay all run.
fn option_sets() -> Vec<PlanOptions> {
    [
        r#"{"context": 4096, "devices": "h100-80gb:1"}"#,
        r#"{"engine": "llama.cpp", "context": 4096, "sequences": 2, "devices": "l4"}"#,
        r#"{"engine": "sglang", "context": 2048, "devices": "a100-80gb:2"}"#,
    ]
    .iter()
    .filter_map(|json| serde_json::from_str(json).ok())
    .collect()
}

fn facts(config: Option<Config>, content: Content) -> ArtifactFacts {
    ArtifactFacts {
        source: SourceRef {
            spec: "fuzz".into(),
            ..SourceRef::default()
        },
        config,
        quant_config: None,
        content,
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}

fn plan_all(facts: &ArtifactFacts) {
    for options in option_sets() {
        // A degree the fuzzed model cannot split is the options' error, not a crash.
        if let Ok(verdict) = plan(std::slice::from_ref(facts), &options) {
            // Rendering is part of answering: a verdict must always serialise.
            let _ = serde_json::to_vec(&verdict);
        }
    }
    // Speculative decoding: the input drafting with its own MTP layers, and read as an EAGLE-3
    // head beside itself (a refusal is the options' error, not a crash).
    let pair = [facts.clone(), facts.clone()];
    for (json, sources) in [
        (r#"{"speculative": "mtp:2", "devices": "h100-80gb:2"}"#, &pair[..1]),
        (
            r#"{"speculative": "eagle3:3", "context": 4096, "devices": "h100-80gb:1"}"#,
            &pair[..],
        ),
        (
            r#"{"engine": "sglang", "speculative": "eagle3:2", "devices": "a100-80gb:2"}"#,
            &pair[..],
        ),
    ] {
        let Ok(options) = serde_json::from_str::<PlanOptions>(json) else {
            continue;
        };
        if let Ok(verdict) = plan(sources, &options) {
            let _ = serde_json::to_vec(&verdict);
        }
    }
}

/// A safetensors file prefix: the header is parsed, then planned with a real config.
pub fn safetensors_header(data: &[u8], seeds: &Seeds) {
    let size = Some(data.len() as u64 + 4096);
    let Ok(header) = safetensors::parse(data, size) else {
        return;
    };
    let content = Content::Safetensors {
        files: vec![SafetensorsFile {
            name: "model.safetensors".into(),
            size,
            header,
        }],
        index: None,
        missing_files: vec![],
    };
    plan_all(&facts(seeds.config.clone(), content));
}

/// A GGUF prefix: header, key/values and tensor infos parsed, then planned (the llama.cpp
/// replay included).
pub fn gguf_header(data: &[u8], _: &Seeds) {
    let size = Some(data.len() as u64 + 4096);
    let Ok(header) = gguf::parse(data, size) else {
        return;
    };
    let content = Content::Gguf {
        parts: vec![GgufFile {
            name: "model.gguf".into(),
            size,
            header,
        }],
        missing_parts: vec![],
    };
    plan_all(&facts(None, content));
}

/// A `model.safetensors.index.json`, parsed and planned beside shards it may not match.
pub fn index_json(data: &[u8], seeds: &Seeds) {
    let Ok(index) = index::parse(data) else {
        return;
    };
    let content = Content::Safetensors {
        files: vec![],
        index: Some(index),
        missing_files: vec![],
    };
    plan_all(&facts(seeds.config.clone(), content));
}

/// A `config.json`, parsed (Python's NaN/Infinity included) and planned against the real
/// tensors of a 2-layer Llama.
pub fn config_json(data: &[u8], seeds: &Seeds) {
    let Ok(config) = config::parse(data) else {
        return;
    };
    let content = Content::Safetensors {
        files: seeds.file.iter().cloned().collect(),
        index: None,
        missing_files: vec![],
    };
    plan_all(&facts(Some(config), content));
}
