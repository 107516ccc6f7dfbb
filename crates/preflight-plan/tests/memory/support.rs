//! The bundled Hub fixtures, plain (`fixtures/hub`) and packed (`fixtures/packed`, unpacked
//! once per test process), read into facts in memory (header prefixes parsed against each
//! stub's full size), so the planner is tested on real checkpoint layouts without staging.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use preflight_formats::facts::{ArtifactFacts, Content, GgufFile, SafetensorsFile, SourceRef, StagingStats};
use preflight_plan::{ArtifactMemory, Memory, PlanOptions, Verdict, plan};
use serde_json::Value;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// `org/name` of a Hub fixture at its `main` commit, as facts. Cached: DeepSeek-V3 has 161
/// headers to parse.
pub fn hub(repo: &str) -> ArtifactFacts {
    static CACHE: OnceLock<Mutex<BTreeMap<String, ArtifactFacts>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(facts) = cache.lock().expect("cache").get(repo) {
        return facts.clone();
    }
    let facts = load(repo);
    cache.lock().expect("cache").insert(repo.to_owned(), facts.clone());
    facts
}

/// The packed fixture repos (`org/name` → unpacked tree), unpacked once per test process.
pub fn packed() -> &'static BTreeMap<String, PathBuf> {
    static PACKED: OnceLock<BTreeMap<String, PathBuf>> = OnceLock::new();
    PACKED.get_or_init(|| {
        preflight_testhub::packed::unpack_all(&fixtures(), Path::new(env!("CARGO_TARGET_TMPDIR")))
            .expect("unpack fixtures/packed")
    })
}

/// A fixture repo's tree: the plain `hub/` tree, else the unpacked `packed/` one.
pub fn repo_dir(repo: &str) -> PathBuf {
    let plain = fixtures().join("hub").join(repo);
    match packed().get(repo) {
        Some(dir) if !plain.exists() => dir.clone(),
        _ => plain,
    }
}

fn load(repo: &str) -> ArtifactFacts {
    let dir = repo_dir(repo);
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
    ArtifactFacts {
        source,
        config: (!is_gguf).then(|| preflight_formats::config::parse(&read("config.json")).expect("config")),
        quant_config: None,
        content,
        staging: StagingStats::default(),
    }
}

/// Options from their JSON form, as the service receives them.
pub fn options(json: &str) -> PlanOptions {
    let options: PlanOptions = serde_json::from_str(json).expect("options");
    options.validate().expect("valid options");
    options
}

pub fn plan_with(repos: &[&str], json: &str) -> Verdict {
    let facts: Vec<ArtifactFacts> = repos.iter().map(|r| hub(r)).collect();
    plan(&facts, &options(json))
}

/// One artifact's memory under these options.
pub fn memory_of(repo: &str, json: &str) -> ArtifactMemory {
    let verdict = plan_with(&[repo], json);
    verdict.artifacts[0]
        .memory
        .clone()
        .unwrap_or_else(|| panic!("{repo}: no memory: {:#?}", verdict.artifacts[0].findings))
}

pub fn system_of(repos: &[&str], json: &str) -> Memory {
    let verdict = plan_with(repos, json);
    verdict.memory.clone().unwrap_or_else(|| {
        let findings: Vec<_> = verdict.artifacts.iter().flat_map(|a| &a.findings).collect();
        panic!("no system memory: {findings:#?}")
    })
}

pub fn codes(verdict: &Verdict, artifact: usize) -> Vec<String> {
    verdict.artifacts[artifact]
        .findings
        .iter()
        .map(|f| f.code.as_str().to_owned())
        .collect()
}

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
