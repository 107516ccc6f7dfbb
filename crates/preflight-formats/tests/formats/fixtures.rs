//! Every real checkpoint layout in `fixtures/` parses cleanly and adds up to the figures in
//! `fixtures/expected.json`. Table-driven: a new repo under `fixtures/hub` is covered by
//! adding its row to `expected.json`, with no new code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use preflight_formats::{config, gguf, index, safetensors};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn read_json(path: &Path) -> Json {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(org/name, commit dir)` for every repo in the fixture Hub, at `main`.
fn hub_repos() -> Vec<(String, PathBuf)> {
    let hub = fixtures().join("hub");
    let mut repos = Vec::new();
    for org in fs::read_dir(&hub).expect("fixtures/hub") {
        let org = org.expect("dir entry").path();
        for repo in fs::read_dir(&org).expect("org dir") {
            let repo = repo.expect("dir entry").path();
            let refs = read_json(&repo.join("refs.json"));
            let commit = refs["main"].as_str().expect("refs.json names main");
            let id = format!(
                "{}/{}",
                org.file_name().unwrap().to_string_lossy(),
                repo.file_name().unwrap().to_string_lossy()
            );
            repos.push((id, repo.join(commit)));
        }
    }
    repos.sort();
    repos
}

/// Full sizes of the stubbed files in a commit dir (a stub stores only a prefix).
fn stub_sizes(dir: &Path) -> BTreeMap<String, u64> {
    let path = dir.join(".stubs.json");
    if !path.exists() {
        return BTreeMap::new();
    }
    serde_json::from_value(read_json(&path)).expect(".stubs.json maps names to sizes")
}

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// Sums over a checkpoint's safetensors files.
#[derive(Default)]
struct Totals {
    shards: u64,
    tensors: u64,
    header_bytes: u64,
    data_bytes: u64,
    elements_by_dtype: BTreeMap<String, u64>,
    /// tensor name → shard file name.
    located: BTreeMap<String, String>,
}

/// Parse every safetensors file in `dir` at its real size, asserting each is issue-free.
fn parse_safetensors_dir(dir: &Path) -> Totals {
    let sizes = stub_sizes(dir);
    let mut totals = Totals::default();
    for path in files_with_extension(dir, "safetensors") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let prefix = fs::read(&path).expect("shard");
        let size = match sizes.get(&name) {
            Some(&size) => {
                let need = safetensors::required_prefix(&prefix).unwrap();
                assert_eq!(
                    need,
                    prefix.len() as u64,
                    "{name}: a stub is exactly the length prefix and header"
                );
                size
            }
            None => prefix.len() as u64,
        };
        let header = safetensors::parse(&prefix, Some(size)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(header.issues, [], "{name}");
        assert_eq!(header.header_bytes() + header.data_bytes(), size, "{name}");
        totals.shards += 1;
        totals.tensors += header.tensors.len() as u64;
        totals.header_bytes += header.header_bytes();
        totals.data_bytes += header.data_bytes();
        for t in &header.tensors {
            *totals.elements_by_dtype.entry(t.dtype.to_string()).or_default() += t.elements();
            assert!(
                totals.located.insert(t.name.clone(), name.clone()).is_none(),
                "{} in two shards",
                t.name
            );
        }
    }
    totals
}

/// The index, when present, names exactly the tensors the headers hold, in the shards that
/// hold them, and declares the data sections' total.
fn check_index(dir: &Path, totals: &Totals) {
    let path = dir.join("model.safetensors.index.json");
    if !path.exists() {
        assert_eq!(totals.shards, 1, "{}: several shards but no index", dir.display());
        return;
    }
    let index = index::parse(&fs::read(&path).unwrap()).expect("index parses");
    assert_eq!(index.weight_map, totals.located, "{}", path.display());
    assert_eq!(index.total_size, Some(totals.data_bytes), "{}", path.display());
    let files = files_with_extension(dir, "safetensors");
    let files: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(index.shards(), files);
}

#[test]
fn hub_safetensors_repos_match_expected() {
    let expected = read_json(&fixtures().join("expected.json"));
    let mut checked = BTreeSet::new();
    for (repo, dir) in hub_repos() {
        if files_with_extension(&dir, "safetensors").is_empty() {
            continue;
        }
        let want = &expected[&repo];
        assert!(want.is_object(), "{repo} has no row in expected.json");
        let totals = parse_safetensors_dir(&dir);
        assert_eq!(totals.shards, want["shards"].as_u64().unwrap(), "{repo} shards");
        assert_eq!(totals.tensors, want["tensors"].as_u64().unwrap(), "{repo} tensors");
        assert_eq!(
            totals.header_bytes,
            want["header_bytes"].as_u64().unwrap(),
            "{repo} header_bytes"
        );
        assert_eq!(
            totals.data_bytes,
            want["data_bytes"].as_u64().unwrap(),
            "{repo} data_bytes"
        );
        let want_elements: BTreeMap<String, u64> = serde_json::from_value(want["elements_by_dtype"].clone()).unwrap();
        assert_eq!(totals.elements_by_dtype, want_elements, "{repo} elements_by_dtype");
        check_index(&dir, &totals);
        checked.insert(repo);
    }
    // Every safetensors row of expected.json (those with `shards`) whose repo is in the plain
    // `hub/` tree names a repo checked here; the packed repos are unpacked and checked by the
    // CLI's fixture table.
    let plain: BTreeSet<String> = hub_repos().into_iter().map(|(repo, _)| repo).collect();
    let rows: BTreeSet<String> = expected
        .as_object()
        .unwrap()
        .iter()
        .filter(|(repo, row)| row.get("shards").is_some() && plain.contains(*repo))
        .map(|(repo, _)| repo.clone())
        .collect();
    assert_eq!(checked, rows);
}

#[test]
fn hub_configs_parse() {
    for (repo, dir) in hub_repos() {
        let path = dir.join("config.json");
        if path.exists() {
            let config = config::parse(&fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("{repo}: {e}"));
            assert!(config.raw.contains_key("model_type"), "{repo}");
        }
    }
    for path in files_with_extension(&fixtures().join("configs"), "json") {
        config::parse(&fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn qwen3_8b_gguf_matches_expected() {
    let expected = &read_json(&fixtures().join("expected.json"))["Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf"];
    let (_, dir) = hub_repos()
        .into_iter()
        .find(|(repo, _)| repo == "Qwen/Qwen3-8B-GGUF")
        .unwrap();
    let name = "Qwen3-8B-Q4_K_M.gguf";
    let prefix = fs::read(dir.join(name)).unwrap();
    let size = stub_sizes(&dir)[name];
    assert_eq!(size, expected["file_bytes"].as_u64().unwrap());

    let header = gguf::parse(&prefix, Some(size)).unwrap();
    assert_eq!(header.issues, []);
    assert_eq!(header.version, 3);
    assert_eq!(header.tensors.len() as u64, expected["tensors"].as_u64().unwrap());
    assert_eq!(header.header_bytes, expected["header_bytes"].as_u64().unwrap());
    assert_eq!(header.alignment, 32);
    assert_eq!(header.data_offset, header.header_bytes.next_multiple_of(32));

    let mut by_type = BTreeMap::new();
    for t in &header.tensors {
        *by_type
            .entry(gguf::ggml_type(t.ggml_type).unwrap().name.to_owned())
            .or_insert(0u64) += t.elements();
    }
    let want: BTreeMap<String, u64> = serde_json::from_value(expected["elements_by_type"].clone()).unwrap();
    assert_eq!(by_type, want);
    assert_eq!(
        by_type.values().sum::<u64>(),
        expected["tensor_elements"].as_u64().unwrap()
    );

    assert_eq!(header.kv["general.architecture"], gguf::Value::String("qwen3".into()));
    assert_eq!(
        header.kv["tokenizer.ggml.tokens"],
        gguf::Value::SkippedArray {
            element_type: "string".into(),
            len: 151936
        }
    );
    assert_eq!(header.kv["qwen3.block_count"], gguf::Value::UInt(36));
}

#[test]
fn gguf_prefix_short_by_one_byte_asks_for_the_rest() {
    let (_, dir) = hub_repos()
        .into_iter()
        .find(|(repo, _)| repo == "Qwen/Qwen3-8B-GGUF")
        .unwrap();
    let prefix = fs::read(dir.join("Qwen3-8B-Q4_K_M.gguf")).unwrap();
    let short = &prefix[..prefix.len() - 1];
    assert_eq!(
        gguf::parse(short, None),
        Err(gguf::GgufError::Truncated {
            need: prefix.len() as u64,
            have: short.len() as u64
        })
    );
}

#[test]
fn local_tiny_llama_safetensors() {
    let dir = fixtures().join("local/tiny-llama");
    let totals = parse_safetensors_dir(&dir);
    assert_eq!(totals.shards, 1);
    assert_eq!(totals.elements_by_dtype, BTreeMap::from([("BF16".to_owned(), 158_016)]));
    check_index(&dir, &totals);
    config::parse(&fs::read(dir.join("config.json")).unwrap()).unwrap();
}

#[test]
fn local_tiny_qwen3_moe_sharded() {
    let dir = fixtures().join("local/tiny-qwen3-moe-sharded");
    let totals = parse_safetensors_dir(&dir);
    assert_eq!(totals.shards, 5);
    assert_eq!(totals.elements_by_dtype.values().sum::<u64>(), 189_824);
    check_index(&dir, &totals);
    config::parse(&fs::read(dir.join("config.json")).unwrap()).unwrap();
}

#[test]
fn local_tiny_llama_f32_gguf() {
    let file = fs::read(fixtures().join("local/tiny-llama-f32.gguf")).unwrap();
    let header = gguf::parse(&file, Some(file.len() as u64)).unwrap();
    assert_eq!(header.issues, []);
    assert!(header.tensors.iter().all(|t| t.ggml_type == 0), "all F32");
    assert_eq!(
        header.tensors.iter().map(gguf::TensorInfo::elements).sum::<u64>(),
        158_016
    );
    // F32 data: every byte after the data offset belongs to some tensor (plus padding).
    let data_end = header
        .tensors
        .iter()
        .map(|t| t.offset + t.elements() * 4)
        .max()
        .unwrap();
    assert!(header.data_offset + data_end <= file.len() as u64);
    let names: BTreeSet<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), header.tensors.len());
}
