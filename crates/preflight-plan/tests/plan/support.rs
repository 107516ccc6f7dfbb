//! The bundled Hub fixtures read into facts in memory (header prefixes parsed against each
//! stub's full size), so the planner is tested on real checkpoint layouts without staging.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use preflight_formats::facts::ArtifactFacts;
use preflight_plan::{ArtifactMemory, Memory, PlanOptions, Verdict, plan};

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

/// A fixture repo's tree: the plain `hub/` one, else the packed one, unpacked once.
fn repo_dir(repo: &str) -> PathBuf {
    static PACKED: OnceLock<BTreeMap<String, PathBuf>> = OnceLock::new();
    let plain = fixtures().join("hub").join(repo);
    if plain.exists() {
        return plain;
    }
    let packed = PACKED.get_or_init(|| {
        preflight_testhub::packed::unpack_all(&fixtures(), Path::new(env!("CARGO_TARGET_TMPDIR")))
            .expect("unpack fixtures/packed")
    });
    packed.get(repo).cloned().unwrap_or(plain)
}

fn load(repo: &str) -> ArtifactFacts {
    preflight_testhub::facts::from_tree(&repo_dir(repo), repo)
}

/// Options from their JSON form, as the service receives them.
pub fn options(json: &str) -> PlanOptions {
    let options: PlanOptions = serde_json::from_str(json).expect("options");
    options.validate().expect("valid options");
    options
}

pub fn plan_with(repos: &[&str], json: &str) -> Verdict {
    let facts: Vec<ArtifactFacts> = repos.iter().map(|r| hub(r)).collect();
    plan(&facts, &options(json)).expect("valid options")
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
