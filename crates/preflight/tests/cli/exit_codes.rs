//! The CLI's contract: exit 0 admissible, 1 inadmissible, 2 bad usage or input, 3 unreadable;
//! one clear line on stderr for failures; `--json` prints the verdict document.

use std::fs;

use serde_json::Value;

use crate::support::{fixtures, preflight};

fn tiny_llama_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let src = fixtures().join("local/tiny-llama");
    let dest = dir.join("tiny-llama");
    fs::create_dir_all(&dest).expect("mkdir");
    for entry in fs::read_dir(&src).expect("dir") {
        let path = entry.expect("entry").path();
        fs::copy(&path, dest.join(path.file_name().expect("name"))).expect("copy");
    }
    dest
}

#[test]
fn admissible_exits_zero_with_a_table() {
    let out = preflight(&["plan", fixtures().join("local/tiny-llama").to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ADMISSIBLE"), "{text}");
    assert!(text.contains("158,016"), "{text}");
}

/// A lone `model.safetensors` is planned with the config beside it, as its folder is.
#[test]
fn a_lone_safetensors_file_reads_the_config_beside_it() {
    let file = fixtures().join("local/tiny-llama/model.safetensors");
    let out = preflight(&["plan", "--json", file.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let artifact = &v["artifacts"][0];
    assert_eq!(artifact["architecture"]["model_type"], "llama", "{artifact}");
    let codes: Vec<&str> = artifact["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(!codes.contains(&"config.missing"), "{codes:?}");
}

#[test]
fn json_is_the_verdict_document() {
    let out = preflight(&[
        "plan",
        "--json",
        fixtures().join("local/tiny-llama-f32.gguf").to_str().expect("utf8"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["schema"], preflight_plan::SCHEMA);
    assert_eq!(v["planner"]["semantics_version"], preflight_plan::SEMANTICS_VERSION);
    assert_eq!(v["artifacts"][0]["format"], "gguf");
    assert_eq!(v["admissible"], true);
}

#[test]
fn unknown_config_key_is_inadmissible_exit_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = tiny_llama_copy(dir.path());
    let config = copy.join("config.json");
    let mut json: Value = serde_json::from_slice(&fs::read(&config).expect("read")).expect("json");
    // Read by transformers' and vLLM's llama, not modelled, not its default: blocking. (A key
    // neither reads would be info: design §3.)
    json["attention_chunk_size"] = Value::from(8192);
    fs::write(&config, serde_json::to_vec(&json).expect("ser")).expect("write");
    let out = preflight(&["plan", "--json", copy.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["admissible"], false);
    let finding = &v["artifacts"][0]["findings"][0];
    assert_eq!(finding["code"], "config.unknown_key");
    assert_eq!(finding["subject"], "config.attention_chunk_size");
}

#[test]
fn unknown_architecture_is_refused_not_approximated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = tiny_llama_copy(dir.path());
    let config = copy.join("config.json");
    let text = fs::read_to_string(&config)
        .expect("read")
        .replace("\"llama\"", "\"llama_next\"");
    fs::write(&config, text).expect("write");
    let out = preflight(&["plan", "--json", copy.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["artifacts"][0]["findings"][0]["code"], "architecture.unknown");
    assert!(v["artifacts"][0]["architecture"].is_null());
}

#[test]
fn corrupt_header_is_bad_input_exit_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.safetensors");
    // A length prefix of 2^63: refused before anything is allocated.
    fs::write(&path, (1u64 << 63).to_le_bytes()).expect("write");
    let out = preflight(&["plan", path.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.safetensors") && err.contains("cap"), "{err}");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
}

/// Shard headers are read on several threads; which one fails first must not decide the
/// answer. All shards but the first broken: the error names the first broken one, every time.
#[test]
fn of_several_corrupt_shards_the_error_names_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = fixtures().join("local/tiny-qwen3-moe-sharded");
    let dest = dir.path().join("sharded");
    fs::create_dir_all(&dest).expect("mkdir");
    let mut shards = Vec::new();
    for entry in fs::read_dir(&src).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_str().expect("utf8").to_owned();
        fs::copy(&path, dest.join(&name)).expect("copy");
        if name.ends_with(".safetensors") {
            shards.push(name);
        }
    }
    shards.sort();
    assert!(shards.len() >= 3, "the fixture has several shards: {shards:?}");
    for broken in &shards[1..] {
        fs::write(dest.join(broken), (1u64 << 63).to_le_bytes()).expect("write");
    }
    for _ in 0..5 {
        let out = preflight(&["plan", dest.to_str().expect("utf8")]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&shards[1]), "names {}: {err}", shards[1]);
    }
}

#[test]
fn bad_spec_and_bad_usage_exit_two() {
    assert_eq!(preflight(&["plan", "hf://not a repo"]).status.code(), Some(2));
    assert_eq!(preflight(&["plan"]).status.code(), Some(2));
    assert_eq!(preflight(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn missing_path_is_unreadable_exit_three() {
    let out = preflight(&["plan", "/nonexistent/checkpoint"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/checkpoint"));
}

#[test]
fn a_directory_without_a_checkpoint_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = preflight(&["plan", dir.path().to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a checkpoint"));
}

#[test]
fn require_engine_exits_four_when_the_engine_does_not_run_it() {
    let gguf = fixtures().join("local/tiny-llama-f32.gguf");
    let gguf = gguf.to_str().expect("utf8");
    // vLLM's GGUF loader is not judged (unknown): admissible, but the required engine is not
    // known to run it.
    let out = preflight(&["plan", gguf, "--require-engine", "vllm"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("vLLM DOES NOT RUN IT (admissible)"), "{text}");
    // One line per engine, with the first reason.
    assert!(
        text.lines()
            .any(|l| l.contains("vLLM 0.19.0") && l.contains("? unknown") && l.contains("runtime.unknown")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("llama.cpp") && l.contains("✓ yes")),
        "{text}"
    );
    let out = preflight(&["plan", gguf, "--require-engine", "llama.cpp", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        v["require_engine"],
        serde_json::json!({"engine": "llama_cpp", "met": true})
    );
    assert_eq!(v["artifacts"][0]["runtimes"]["vllm"]["supported"], "unknown");
    assert!(v.get("memory").is_none(), "requiring an engine asks for no memory plan");
    // An inadmissible checkpoint is 1 whatever the engine says.
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = tiny_llama_copy(dir.path());
    fs::write(
        broken.join("config.json"),
        r#"{"model_type": "frobnicator", "architectures": ["FrobnicatorForCausalLM"]}"#,
    )
    .expect("write");
    let out = preflight(&["plan", broken.to_str().expect("utf8"), "--require-engine", "vllm"]);
    assert_eq!(out.status.code(), Some(1));
    let out = preflight(&["plan", gguf, "--require-engine", "tgi"]);
    assert_eq!(out.status.code(), Some(2), "an unknown engine is bad usage");
}

/// `--engine llama.cpp` on safetensors: the memory would fit, the engine cannot load it —
/// the headline says it does not run, and the exit status is 4, never 0.
#[test]
fn an_engine_that_cannot_load_the_checkpoint_exits_four() {
    let dir = fixtures().join("local/tiny-llama");
    let args = [
        "plan",
        dir.to_str().expect("utf8"),
        "--devices",
        "h100-80gb:1",
        "--engine",
        "llama.cpp",
    ];
    let out = preflight(&args);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("llama.cpp"), "{text}");
    assert!(text.contains("DOES NOT RUN IT"), "{text}");
    assert!(!text.contains("FITS ·"), "{text}");
    let out = preflight(&[&args[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["memory"]["fits"], false);
    assert_eq!(
        v["memory"]["does_not_run"]["finding"]["code"],
        "runtime.format_unsupported"
    );
}

/// `--engine vllm@0.33.0`: a release whose memory rules are not offered is bad usage (exit 2)
/// before anything is read, with why; the modelled one plans as the plain name does.
#[test]
fn an_engine_release_not_modelled_is_bad_usage() {
    let dir = fixtures().join("local/tiny-llama");
    let out = preflight(&["plan", dir.to_str().expect("utf8"), "--engine", "vllm@0.33.0"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vLLM 0.33.0 is not offered"), "{stderr}");
    let pinned = preflight(&["plan", "--json", dir.to_str().expect("utf8"), "--engine", "vllm@0.19.0"]);
    assert_eq!(
        pinned.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    let v: Value = serde_json::from_slice(&pinned.stdout).expect("json");
    assert_eq!(
        (v["memory"]["engine"].as_str(), v["engines"]["vllm"]["version"].as_str()),
        (Some("vllm"), Some("0.19.0"))
    );
}
