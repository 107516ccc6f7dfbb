//! What a person asks before downloading (issue 27 item 12), in the first lines and the JSON:
//! licence, gating, whether loading runs the repo's own code, the download's size.

use std::fs;
use std::path::Path;

use preflight_testhub::TestHub;
use serde_json::{Value, json};

use crate::support::{fixtures, hub_with_token, preflight, run_against};

const TOKEN: &str = "hf_source_token";

/// Qwen3-0.6B on a Hub of its own, its card naming the licence and its config mapping the
/// auto classes to two modules of the repo's own, one of them shipped.
fn remote_code_hub(root: &Path) -> TestHub {
    let hub = preflight_testhub::fixtures_hub();
    preflight_testhub::fork_repo(&hub, "Qwen/Qwen3-0.6B", root).expect("fork");
    let refs: Value =
        serde_json::from_slice(&fs::read(hub.join("Qwen/Qwen3-0.6B/refs.json")).expect("refs")).expect("json");
    let commit = root.join("Qwen/Qwen3-0.6B").join(refs["main"].as_str().expect("main"));
    // The fork's files are hard links to the fixture's: replaced, never written through.
    let replace = |name: &str, text: &str| {
        let _ = fs::remove_file(commit.join(name));
        fs::write(commit.join(name), text).expect("write");
    };
    replace(
        "README.md",
        "---\nlicense: other\nlicense_name: qwen-research\n---\n# fork\n",
    );
    let mut config: Value =
        serde_json::from_slice(&fs::read(commit.join("config.json")).expect("config")).expect("json");
    config["auto_map"] = json!({
        "AutoConfig": "configuration_qwen3x.Qwen3xConfig",
        "AutoModelForCausalLM": "modeling_qwen3x.Qwen3xForCausalLM",
    });
    replace("config.json", &serde_json::to_string_pretty(&config).expect("json"));
    replace("modeling_qwen3x.py", "class Qwen3xForCausalLM: ...\n");
    preflight_testhub::TestHub::builder()
        .root(root)
        .start_blocking()
        .expect("hub")
}

#[test]
fn the_first_lines_say_licence_gating_remote_code_and_download_size() {
    let root = tempfile::tempdir().expect("tempdir");
    let hub = remote_code_hub(root.path());
    let home = tempfile::tempdir().expect("tempdir");
    let out = run_against(&hub, home.path(), &[], &["plan", "hf://Qwen/Qwen3-0.6B"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[2].starts_with("Qwen/Qwen3-0.6B @ "), "{text}");
    assert!(
        lines[3].starts_with(
            "  source        licence other (qwen-research) · not gated · runs remote code · 1.12 GiB to download"
        ),
        "{text}"
    );
    assert_eq!(
        lines[4],
        "  remote code   trust_remote_code imports configuration_qwen3x.py (AutoConfig), modeling_qwen3x.py (AutoModelForCausalLM); not among its files: configuration_qwen3x.py"
    );
    assert!(text.contains("warning  source.remote_code"), "{text}");

    let out = run_against(&hub, home.path(), &[], &["plan", "--json", "hf://Qwen/Qwen3-0.6B"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let source = &v["artifacts"][0]["source"];
    assert_eq!(source["spec"], "hf://Qwen/Qwen3-0.6B");
    assert_eq!(
        (&source["license"], &source["license_name"]),
        (&json!("other"), &json!("qwen-research"))
    );
    assert_eq!(source["gated"], json!(false));
    assert_eq!(
        source["remote_code"],
        json!({"required": true, "modules": [
            {"file": "configuration_qwen3x.py", "present": false, "classes": ["AutoConfig"]},
            {"file": "modeling_qwen3x.py", "present": true, "classes": ["AutoModelForCausalLM"]},
        ]})
    );
    // The weights and what an engine reads beside them; never the README.
    let dir = root.path().join("Qwen/Qwen3-0.6B");
    let commit = dir.join(source["commit"].as_str().expect("commit"));
    let size = |name: &str| fs::metadata(commit.join(name)).expect("size").len();
    let beside: u64 = [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "modeling_qwen3x.py",
    ]
    .iter()
    .map(|f| size(f))
    .sum();
    assert_eq!(source["download_bytes"].as_u64(), Some(1_192_135_096 + beside));
}

#[test]
fn a_gated_repo_says_so_first() {
    let hub = hub_with_token(TOKEN);
    let home = tempfile::tempdir().expect("tempdir");
    let env = [("HF_TOKEN", TOKEN)];
    let out = run_against(&hub, home.path(), &env, &["plan", "hf://meta-llama/Llama-3.1-8B"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().nth(3).is_some_and(|l| l.contains("licence other · gated (each request reviewed by the owners) · no remote code")),
        "{text}"
    );
    // A second run plans from the facts cache, with the gating the model info says now.
    let out = run_against(
        &hub,
        home.path(),
        &env,
        &["plan", "--json", "hf://meta-llama/Llama-3.1-8B"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["staging"][0]["requests"], 1, "a facts-cache hit");
    assert_eq!(v["artifacts"][0]["source"]["gated"], "manual");
}

/// A local folder has no card or gating: unknown, said as such, and its size is what an engine
/// would load from it.
#[test]
fn a_local_folder_has_no_licence_or_gating_to_read() {
    let out = preflight(&["plan", "--json", &fixtures().join("local/tiny-llama").to_string_lossy()]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let source = &v["artifacts"][0]["source"];
    assert_eq!((&source["license"], &source["gated"]), (&Value::Null, &Value::Null));
    assert_eq!(source["remote_code"], json!({"required": false}));
    assert!(source["download_bytes"].as_u64().is_some_and(|n| n > 0), "{source}");
}
