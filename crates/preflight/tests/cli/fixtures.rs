//! Table-driven over every bundled checkpoint: figures must equal `expected.json`, which
//! records facts about the files (stored elements) and transformers' own parameter counts.

use std::collections::BTreeMap;

use preflight_plan::{Code, Component, PlanOptions, Verdict, plan};
use serde_json::Value;

use crate::support::{all_repos, expected, fixtures, materialize};

fn plan_path(path: &std::path::Path) -> Verdict {
    let facts = preflight_source::local::stage(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    plan(&[facts], &PlanOptions::default()).expect("valid options")
}

fn counts(v: &Value) -> BTreeMap<String, u64> {
    serde_json::from_value(v.clone()).expect("counts")
}

#[test]
fn every_hub_fixture_plans_exactly() {
    let expected = expected();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    for repo in all_repos() {
        let path = materialize(&repo, dir.path());
        let gguf = std::fs::read_dir(&path)
            .expect("dir")
            .filter_map(Result::ok)
            .find(|e| e.path().extension().is_some_and(|x| x == "gguf"));
        let (key, path) = match gguf {
            Some(e) => (format!("{repo}/{}", e.file_name().to_string_lossy()), e.path()),
            None => (repo.clone(), path),
        };
        let want = &expected[&key];
        let verdict = plan_path(&path);
        let artifact = &verdict.artifacts[0];
        if !verdict.admissible {
            let blocking: Vec<_> = artifact
                .findings
                .iter()
                .filter(|f| f.severity == preflight_plan::Severity::Blocking)
                .map(|f| format!("{} {} {}", f.code, f.subject, f.detail))
                .collect();
            failures.push(format!("{key}: {blocking:#?}"));
            continue;
        }
        if let Some(kinds) = want.get("layer_kinds").and_then(Value::as_array) {
            let arch = artifact.architecture.as_ref().expect("architecture");
            let planned: Vec<Value> = arch
                .attention
                .iter()
                .map(|a| serde_json::to_value(a).expect("json")["kind"].clone())
                .collect();
            assert_eq!(&planned, kinds, "{key}: layer kinds");
        }
        let raw = want
            .get("elements_by_dtype")
            .or_else(|| want.get("elements_by_type"))
            .expect("elements");
        assert_eq!(
            artifact.tensor_elements_by_dtype,
            counts(raw),
            "{key}: tensor_elements_by_dtype"
        );
        let p = &artifact.parameters;
        let main = p.total - p.by_component.get(&Component::Mtp).copied().unwrap_or(0);
        let oracle = want["transformers_num_parameters"].as_u64().expect("oracle");
        assert_eq!(main, oracle, "{key}: parameters.total − mtp vs transformers");
        assert_eq!(
            p.by_component.values().sum::<u64>(),
            p.total,
            "{key}: components sum to the total"
        );
        if let Some(data) = want.get("data_bytes").and_then(Value::as_u64) {
            assert_eq!(artifact.weights_bytes, data, "{key}: weights_bytes");
        }
        if let Some(header) = want.get("header_bytes").and_then(Value::as_u64) {
            assert_eq!(verdict.staging[0].header_bytes, header, "{key}: header bytes staged");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gpt_oss_20b_totals_20_914_757_184() {
    let dir = tempfile::tempdir().expect("tempdir");
    let verdict = plan_path(&materialize("openai/gpt-oss-20b", dir.path()));
    let p = &verdict.artifacts[0].parameters;
    assert_eq!(p.total, 20_914_757_184);
    // MXFP4 blocks unpack to two parameters a byte; their scales are not parameters.
    assert_eq!(p.by_dtype["MXFP4"], 19_110_297_600);
}

/// `active_per_token` convention: every non-routed parameter (embedding and lm_head
/// included) plus `active/experts` of the routed experts; MTP layers excluded.
#[test]
fn moe_active_per_token_follows_the_documented_convention() {
    let dir = tempfile::tempdir().expect("tempdir");
    for repo in [
        "Qwen/Qwen3-30B-A3B",
        "mistralai/Mixtral-8x7B-v0.1",
        "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-20b",
    ] {
        let verdict = plan_path(&materialize(repo, dir.path()));
        let a = &verdict.artifacts[0];
        let moe = a.architecture.as_ref().and_then(|x| x.moe.as_ref()).expect("moe");
        let p = &a.parameters;
        let experts = p.by_component[&Component::Experts];
        let mtp = p.by_component.get(&Component::Mtp).copied().unwrap_or(0);
        let want = p.total - mtp - experts + experts / moe.experts * moe.active;
        assert_eq!(p.active_per_token, Some(want), "{repo}");
        assert!(
            want < p.total / 2,
            "{repo}: a sparse model activates a minority of its parameters"
        );
    }
}

#[test]
fn local_fixtures_plan_exactly() {
    let expected = expected();
    let local = fixtures().join("local");
    for (name, field) in [
        ("tiny-llama", "transformers_num_parameters"),
        ("tiny-qwen3-moe-sharded", "transformers_num_parameters"),
        ("tiny-llama-f32.gguf", "tensor_elements"),
    ] {
        let verdict = plan_path(&local.join(name));
        assert!(verdict.admissible, "{name}: {:#?}", verdict.artifacts[0].findings);
        let want = expected[&format!("local/{name}")][field].as_u64().expect("figure");
        assert_eq!(verdict.artifacts[0].parameters.total, want, "{name}");
        assert_eq!(
            verdict.artifacts[0].tensor_elements_by_dtype.values().sum::<u64>(),
            want,
            "{name}: raw elements"
        );
    }
}

#[test]
fn attention_kinds_per_layer_come_from_the_config() {
    use preflight_plan::Attention;
    let dir = tempfile::tempdir().expect("tempdir");
    let kinds = |repo: &str| {
        let verdict = plan_path(&materialize(repo, dir.path()));
        verdict.artifacts[0]
            .architecture
            .clone()
            .expect("architecture")
            .attention
    };
    let gpt = kinds("openai/gpt-oss-20b");
    assert_eq!(gpt.iter().filter(|a| **a == Attention::Full).count(), 12);
    assert_eq!(gpt[0], Attention::Sliding { window: 128 });
    let gemma = kinds("google/gemma-3-1b-it");
    assert_eq!(gemma.iter().filter(|a| **a == Attention::Full).count(), 4);
    assert_eq!(gemma[5], Attention::Full);
    assert!(kinds("deepseek-ai/DeepSeek-V3").iter().all(|a| *a
        == Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64
        }));
    assert!(kinds("meta-llama/Llama-3.1-8B").iter().all(|a| *a == Attention::Full));
}

/// Qwen3-Coder-480B-A35B's config carries `qkv_bias`, `use_qk_norm` and
/// `shared_expert_intermediate_size`, which neither transformers' Qwen3-MoE nor vLLM's reads
/// (the last by the family's reading: vLLM's module closure over-approximates): recorded as
/// info, never a refusal.
#[test]
fn qwen3_coder_keys_the_reference_ignores_are_info() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = materialize("Qwen/Qwen3-30B-A3B", dir.path());
    let config_path = path.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("json");
    config["qkv_bias"] = false.into();
    config["use_qk_norm"] = true.into();
    config["shared_expert_intermediate_size"] = 0.into();
    std::fs::write(&config_path, serde_json::to_vec(&config).expect("json")).expect("write");
    let verdict = plan_path(&path);
    assert!(verdict.admissible, "{:#?}", verdict.artifacts[0].findings);
    let ignored: Vec<&str> = verdict.artifacts[0]
        .findings
        .iter()
        .filter(|f| f.code == Code::ConfigIgnoredKey)
        .map(|f| f.subject.as_str())
        .collect();
    assert_eq!(ignored.len(), 3, "one info finding per ignored key: {ignored:?}");
    for key in ["qkv_bias", "use_qk_norm", "shared_expert_intermediate_size"] {
        assert!(ignored.contains(&format!("config.{key}").as_str()), "{key}");
    }
    // A key neither transformers nor vLLM reads for this architecture cannot change what they
    // compute: info, not a refusal (design §3).
    config["not_a_qwen_key"] = 1.into();
    std::fs::write(&config_path, serde_json::to_vec(&config).expect("json")).expect("write");
    assert!(plan_path(&path).admissible);
    // A key they read, with a value other than the config class's default, stays fail-closed.
    config["attention_chunk_size"] = 8192.into();
    std::fs::write(&config_path, serde_json::to_vec(&config).expect("json")).expect("write");
    assert!(!plan_path(&path).admissible);
}

/// A GGUF's file type reads as llama.cpp's tools name it (`Q4_K_M`), not as its number.
#[test]
fn gguf_file_types_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = materialize("Qwen/Qwen3-8B-GGUF", dir.path()).join("Qwen3-8B-Q4_K_M.gguf");
    let verdict = plan_path(&path);
    let arch = verdict.artifacts[0].architecture.as_ref().expect("architecture");
    let layout = &arch.quantization.as_ref().expect("quantization").layout;
    assert!(layout.starts_with("Q4_K_M; Q4_K "), "{layout}");
}
