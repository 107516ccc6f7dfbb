//! The bundled Hub fixtures read into facts in memory (header prefixes parsed against each
//! stub's full size), so the planner is tested on real checkpoint layouts without staging.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use preflight_formats::facts::{ArtifactFacts, Content};
use preflight_formats::gguf::{TensorInfo, Value as GgufValue};
use preflight_plan::{ArtifactMemory, Component, Memory, PlanOptions, Severity, Verdict, plan};
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

/// The ground truth of the release-day fixtures (`packed/expected-release-day.json`), by
/// repo (GGUF rows: `repo/file`).
pub fn release_day_rows() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(fixtures().join("packed/expected-release-day.json")).expect("json");
    serde_json::from_str(&text).expect("expected-release-day.json")
}

/// One release-day row; it must exist.
pub fn release_day_row(key: &str) -> Value {
    let row = release_day_rows().remove(key).unwrap_or(Value::Null);
    assert!(row.is_object(), "{key}: no row");
    row
}

/// The wire name of a layer's kind (`full`, `mamba`, `mla`, …).
pub fn kind(a: &impl serde::Serialize) -> String {
    serde_json::to_value(a).expect("json")["kind"]
        .as_str()
        .expect("kind")
        .to_owned()
}

/// The first artifact's layer kinds, as the wire names them.
pub fn kinds(v: &Verdict) -> Vec<String> {
    let arch = v.artifacts[0].architecture.as_ref().expect("architecture");
    arch.attention.iter().map(kind).collect()
}

/// The first artifact's blocking findings as (code, subject, detail).
pub fn blocking(v: &Verdict) -> Vec<(String, String, String)> {
    v.artifacts[0]
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Blocking)
        .map(|f| (f.code.as_str().to_owned(), f.subject.clone(), f.detail.clone()))
        .collect()
}

/// A release-day GGUF row, planned: admissible, stored elements by type, parameters (less
/// MTP) as transformers counts them, every layer's kind.
pub fn plans_exactly(repo: &str, file: &str, json: &str) -> Verdict {
    let want = release_day_row(&format!("{repo}/{file}"));
    let v = plan(&[hub(repo)], &options(json)).expect("valid options");
    let a = &v.artifacts[0];
    assert!(v.admissible, "{repo}: {:#?}", blocking(&v));
    let by_type: BTreeMap<String, u64> = serde_json::from_value(want["elements_by_type"].clone()).expect("elements");
    assert_eq!(a.tensor_elements_by_dtype, by_type, "{repo}: stored elements");
    let mtp = a.parameters.by_component.get(&Component::Mtp).copied().unwrap_or(0);
    assert_eq!(
        a.parameters.total - mtp,
        want["transformers_num_parameters"].as_u64().expect("count"),
        "{repo}: parameters less MTP"
    );
    let layer_kinds: Vec<String> = serde_json::from_value(want["layer_kinds"].clone()).expect("kinds");
    assert_eq!(kinds(&v), layer_kinds, "{repo}: layer kinds");
    v
}

/// `repo`'s facts with its GGUF header edited: key/values set (`Some`) or removed (`None`),
/// then its tensor list rewritten by `tensors`.
pub fn edited(
    repo: &str,
    edits: &[(&str, Option<GgufValue>)],
    tensors: impl FnOnce(&mut Vec<TensorInfo>),
) -> ArtifactFacts {
    let mut facts = hub(repo);
    let Content::Gguf { parts, .. } = &mut facts.content else {
        panic!("{repo}: not a GGUF")
    };
    let header = &mut parts[0].header;
    for (key, value) in edits {
        match value {
            Some(value) => header.kv.insert((*key).to_owned(), value.clone()),
            None => header.kv.remove(*key),
        };
    }
    tensors(&mut header.tensors);
    facts
}

/// `repo` planned with its GGUF key/values edited (see [`edited`]).
pub fn with_kv(repo: &str, edits: &[(&str, Option<GgufValue>)], json: &str) -> Verdict {
    plan(&[edited(repo, edits, |_| {})], &options(json)).expect("valid options")
}

/// A generated section of `docs/memory.md` — between `<!-- MARKER -->` and
/// `<!-- /MARKER -->` — equals `want`; with `UPDATE_DOCS=1` it is rewritten instead. `test`
/// names the test module that regenerates it, for the message.
pub fn doc_section_is_current(marker: &str, want: &str, test: &str) {
    doc_section_in("memory.md", marker, want, test);
}

/// [`doc_section_is_current`] for another page under `docs/`.
pub fn doc_section_in(page: &str, marker: &str, want: &str, test: &str) {
    let path = fixtures().join("../docs").join(page);
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("docs/{page}: {e}"));
    let (begin, end) = (format!("<!-- {marker} -->\n"), format!("<!-- /{marker} -->"));
    let (Some(start), Some(stop)) = (doc.find(&begin), doc.find(&end)) else {
        panic!("docs/{page} lacks the {begin:?} … {end:?} markers");
    };
    let have = &doc[start + begin.len()..stop];
    if std::env::var_os("UPDATE_DOCS").is_some() && have != want {
        let updated = format!("{}{want}{}", &doc[..start + begin.len()], &doc[stop..]);
        std::fs::write(&path, updated).unwrap_or_else(|e| panic!("write docs/{page}: {e}"));
        return;
    }
    assert!(
        have == want,
        "docs/{page}'s {marker} is stale: run UPDATE_DOCS=1 cargo test -p preflight-plan --test plan {test}"
    );
}
