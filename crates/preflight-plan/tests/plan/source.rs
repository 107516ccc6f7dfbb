//! The verdict's `source` block past the spec (issue 27 item 12): the card's licence, the
//! Hub's gating, whether loading runs the repo's own code (`source.remote_code`, a warning),
//! and the bytes an engine fetches.

use preflight_formats::facts::{Gated, ListedFile};
use preflight_plan::source::ENGINE_FILES;
use preflight_plan::{PlanOptions, Severity, plan};
use serde_json::json;

use crate::support::{codes, hub};

fn listed(facts: &preflight_formats::facts::ArtifactFacts) -> &[ListedFile] {
    facts.meta.files.as_deref().expect("a listing")
}

#[test]
fn a_repo_says_its_licence_gating_and_runs_no_remote_code_without_auto_map() {
    let facts = hub("Qwen/Qwen3-8B");
    let v = plan(std::slice::from_ref(&facts), &PlanOptions::default()).expect("plan");
    let source = &v.artifacts[0].source;
    assert_eq!(source.license.as_deref(), Some("other"));
    assert_eq!(source.gated, Some(Gated::No));
    assert!(!source.remote_code.required);
    assert!(!codes(&v, 0).iter().any(|c| c == "source.remote_code"));
    let json = serde_json::to_value(source).expect("json");
    assert_eq!(json["remote_code"], json!({"required": false}));
    assert_eq!(json["gated"], json!(false));
    assert_eq!(
        json["spec"],
        json!("hf://Qwen/Qwen3-8B"),
        "the reference's fields stay where they were"
    );
}

#[test]
fn a_gated_repo_is_gated_in_the_source_block() {
    let facts = hub("meta-llama/Llama-3.1-8B");
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    assert_eq!(v.artifacts[0].source.gated, Some(Gated::Manual));
    assert_eq!(
        serde_json::to_value(&v.artifacts[0].source).expect("json")["gated"],
        json!("manual")
    );
}

/// The download is the shards the index names and the engine's files beside them — not the
/// README, and not another copy of the weights the repo also holds.
#[test]
fn the_download_is_the_weights_planned_and_the_files_an_engine_reads_beside_them() {
    let mut facts = hub("Qwen/Qwen3-8B");
    let shards: u64 = 4_902_257_696 + 4_915_960_368 + 4_983_068_496 + 1_580_230_264;
    let beside: u64 = listed(&facts)
        .iter()
        .filter(|f| ENGINE_FILES.contains(&f.name.as_str()))
        .map(|f| f.size.expect("sized"))
        .sum();
    let names: Vec<&str> = listed(&facts)
        .iter()
        .filter(|f| ENGINE_FILES.contains(&f.name.as_str()))
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "config.json",
            "generation_config.json",
            "model.safetensors.index.json",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let want = shards + beside;
    let v = plan(std::slice::from_ref(&facts), &PlanOptions::default()).expect("plan");
    assert_eq!(v.artifacts[0].source.download_bytes, Some(want));
    // A GGUF and a consolidated copy beside the safetensors are not what the plan reads.
    let files = facts.meta.files.as_mut().expect("listing");
    for (name, size) in [
        ("Qwen3-8B-Q4_K_M.gguf", 5_029_129_760),
        ("consolidated.safetensors", 16_381_516_800),
    ] {
        files.push(ListedFile {
            name: name.into(),
            size: Some(size),
        });
    }
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    assert_eq!(v.artifacts[0].source.download_bytes, Some(want), "no double count");
}

#[test]
fn a_gguf_download_is_its_parts_alone() {
    let facts = hub("Qwen/Qwen3-8B-GGUF");
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    let source = &v.artifacts[0].source;
    assert_eq!(source.download_bytes, Some(5_029_129_760));
    assert_eq!(source.license.as_deref(), Some("apache-2.0"));
    assert!(!source.remote_code.required, "llama.cpp runs no code of the repo");
}

#[test]
fn an_unknown_size_is_an_unknown_download_never_a_short_one() {
    let mut facts = hub("Qwen/Qwen3-8B");
    facts.meta.files = None;
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    assert_eq!(v.artifacts[0].source.download_bytes, None);
}

/// DeepSeek-V3's config maps its auto classes to the repo's own modules: loading it with
/// trust_remote_code runs them. The fixture keeps only the checkpoint's metadata, so the
/// modules are named and said to be absent; given them, they are present and downloaded.
#[test]
fn auto_map_is_remote_code_a_warning_naming_each_module() {
    let mut facts = hub("deepseek-ai/DeepSeek-V3");
    let v = plan(std::slice::from_ref(&facts), &PlanOptions::default()).expect("plan");
    assert!(v.admissible, "a warning, never blocking");
    let code = &v.artifacts[0].source.remote_code;
    assert!(code.required);
    let modules: Vec<(&str, bool, Vec<&str>)> = code
        .modules
        .iter()
        .map(|m| {
            (
                m.file.as_str(),
                m.present,
                m.classes.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        modules,
        [
            ("configuration_deepseek.py", false, vec!["AutoConfig"]),
            ("modeling_deepseek.py", false, vec!["AutoModel", "AutoModelForCausalLM"]),
        ]
    );
    let finding = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code == "source.remote_code")
        .expect("a remote code finding");
    assert_eq!(finding.severity, Severity::Warning);
    assert!(
        finding.detail.contains("modeling_deepseek.py") && finding.detail.contains("trust_remote_code"),
        "{}",
        finding.detail
    );
    let before = v.artifacts[0].source.download_bytes.expect("sized");
    facts.meta.files.as_mut().expect("listing").push(ListedFile {
        name: "modeling_deepseek.py".into(),
        size: Some(75_769),
    });
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    let code = &v.artifacts[0].source.remote_code;
    assert!(
        code.modules
            .iter()
            .any(|m| m.file == "modeling_deepseek.py" && m.present)
    );
    assert_eq!(v.artifacts[0].source.download_bytes, Some(before + 75_769));
}

/// `org/repo--module.Class` keeps the code in another repo; a tokenizer's pair may hold
/// `null`.
#[test]
fn auto_map_in_another_repo_and_tokenizer_pairs_are_read() {
    let mut facts = hub("Qwen/Qwen3-8B");
    let config = facts.config.as_mut().expect("config");
    config.raw.insert(
        "auto_map".into(),
        json!({
            "AutoConfig": "acme/shared-code--configuration_acme.AcmeConfig",
            "AutoTokenizer": ["tokenization_acme.AcmeTokenizer", null],
        }),
    );
    let v = plan(&[facts], &PlanOptions::default()).expect("plan");
    let code = serde_json::to_value(&v.artifacts[0].source.remote_code).expect("json");
    assert_eq!(
        code,
        json!({"required": true, "modules": [
            {"file": "tokenization_acme.py", "present": false, "classes": ["AutoTokenizer"]},
            {"file": "configuration_acme.py", "repo": "acme/shared-code", "present": false, "classes": ["AutoConfig"]},
        ]})
    );
}
