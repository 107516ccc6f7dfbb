//! Facts straight from a fixture tree (the `main` commit's files, stubs parsed against their
//! full sizes), for tests and benches that exercise the planner without staging.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use preflight_formats::facts::{
    ArtifactFacts, Content, Gated, GgufFile, ListedFile, SafetensorsFile, SourceMeta, SourceRef, StagingStats,
};
use serde_json::Value;

/// The artifact at `dir` (a repo tree: `refs.json`, `<commit>/…`), as `hf://{repo}`.
pub fn from_tree(dir: &Path, repo: &str) -> ArtifactFacts {
    let refs: Value = serde_json::from_slice(&fs::read(dir.join("refs.json")).expect("refs")).expect("refs json");
    let commit = dir.join(refs["main"].as_str().expect("main"));
    let stubs: BTreeMap<String, u64> = fs::read(commit.join(".stubs.json"))
        .map(|b| serde_json::from_slice(&b).expect("stubs"))
        .unwrap_or_default();
    let mut names: Vec<String> = fs::read_dir(&commit)
        .expect("commit dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let read = |name: &str| fs::read(commit.join(name)).expect("read");
    let size = |name: &str| stubs.get(name).copied().unwrap_or_else(|| read(name).len() as u64);
    let source = SourceRef {
        spec: format!("hf://{repo}"),
        repo: Some(repo.to_owned()),
        ..SourceRef::default()
    };
    let content = if let Some(gguf) = names.iter().find(|n| n.ends_with(".gguf")) {
        Content::Gguf {
            parts: vec![GgufFile {
                name: gguf.clone(),
                size: Some(size(gguf)),
                header: preflight_formats::gguf::parse(&read(gguf), Some(size(gguf))).expect("gguf header"),
            }],
            missing_parts: vec![],
        }
    } else {
        Content::Safetensors {
            files: names
                .iter()
                .filter(|n| n.ends_with(".safetensors"))
                .map(|n| SafetensorsFile {
                    name: n.clone(),
                    size: Some(size(n)),
                    header: preflight_formats::safetensors::parse(&read(n), Some(size(n))).expect("header"),
                })
                .collect(),
            index: names
                .iter()
                .find(|n| *n == "model.safetensors.index.json")
                .map(|n| preflight_formats::index::parse(&read(n)).expect("index")),
            missing_files: vec![],
        }
    };
    let is_gguf = matches!(content, Content::Gguf { .. });
    // What the Hub's model info would say: the card's licence, repo.json's gating, the files.
    let card = fs::read_to_string(commit.join("README.md"))
        .map(|text| crate::api::front_matter(&text))
        .unwrap_or_default();
    let gated = fs::read(dir.join("repo.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map_or(Some(Gated::No), |repo| Gated::from_hub(&repo["gated"]));
    let meta = SourceMeta {
        license: card.get("license").and_then(Value::as_str).map(str::to_owned),
        license_name: card.get("license_name").and_then(Value::as_str).map(str::to_owned),
        gated,
        files: Some(
            names
                .iter()
                .filter(|n| !n.starts_with('.') && commit.join(n).is_file())
                .map(|n| ListedFile {
                    name: n.clone(),
                    size: Some(size(n)),
                })
                .collect(),
        ),
    };
    ArtifactFacts {
        source,
        config: (!is_gguf).then(|| preflight_formats::config::parse(&read("config.json")).expect("config")),
        quant_config: names
            .iter()
            .find(|n| *n == "hf_quant_config.json")
            .map(|n| preflight_formats::config::parse(&read(n)).expect("hf_quant_config")),
        content,
        meta,
        staging: StagingStats::default(),
    }
}

/// A safetensors header of `(name, dtype, shape)` tensors laid out back to back, each
/// `elements × dtype width` bytes (sub-byte dtypes rounded up to whole bytes).
pub fn header<'a>(
    tensors: impl IntoIterator<Item = (String, &'a str, Vec<u64>)>,
) -> preflight_formats::safetensors::Header {
    let mut offset = 0;
    let tensors = tensors
        .into_iter()
        .map(|(name, dtype, shape)| {
            let bits = preflight_formats::safetensors::dtype_bits(dtype).expect("a known dtype");
            let bytes = (shape.iter().product::<u64>() * bits).div_ceil(8);
            offset += bytes;
            preflight_formats::safetensors::TensorInfo {
                name,
                dtype: dtype.into(),
                shape,
                data_offsets: [offset - bytes, offset],
            }
        })
        .collect();
    preflight_formats::safetensors::Header {
        tensors,
        metadata: None,
        json_len: 0,
        issues: vec![],
    }
}

/// A one-file safetensors artifact (`model.safetensors`) with `config` as its config.json
/// and, for ModelOpt checkpoints, `quant_config` as its hf_quant_config.json.
pub fn single_file(
    config: Option<&Value>,
    header: preflight_formats::safetensors::Header,
    quant_config: Option<&Value>,
) -> ArtifactFacts {
    let object = |v: &Value| preflight_formats::config::Config {
        raw: v.as_object().expect("a JSON object").clone(),
    };
    ArtifactFacts {
        source: SourceRef {
            spec: "synthetic".into(),
            ..SourceRef::default()
        },
        config: config.map(object),
        quant_config: quant_config.map(object),
        content: Content::Safetensors {
            files: vec![SafetensorsFile {
                name: "model.safetensors".into(),
                size: None,
                header,
            }],
            index: None,
            missing_files: vec![],
        },
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}

/// A GGUF from a gzipped header stub and its full file size (the form `fixtures/oracles/`
/// keeps), as the facts staging would hand the planner for the whole file.
pub fn gguf_stub(stub_gz: &Path, size: u64) -> ArtifactFacts {
    use std::io::Read;
    let mut header = Vec::new();
    flate2::read::GzDecoder::new(fs::File::open(stub_gz).expect("stub"))
        .read_to_end(&mut header)
        .expect("gunzip stub");
    let name = stub_gz
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".stub.gz"))
        .unwrap_or("model.gguf")
        .to_owned();
    ArtifactFacts {
        source: SourceRef {
            spec: name.clone(),
            ..SourceRef::default()
        },
        config: None,
        quant_config: None,
        content: Content::Gguf {
            parts: vec![GgufFile {
                name,
                size: Some(size),
                header: preflight_formats::gguf::parse(&header, Some(size)).expect("gguf header"),
            }],
            missing_parts: vec![],
        },
        meta: Default::default(),
        staging: StagingStats::default(),
    }
}
