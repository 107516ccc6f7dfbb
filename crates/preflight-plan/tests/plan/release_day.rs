//! Table-driven over the release-day checkpoints (`fixtures/packed/expected-release-day.json`):
//! each supported row must plan admissible and exact — stored elements, transformers'
//! parameter count (the total less MTP), MTP and vision parameters, every layer's kind, and
//! the MoE figures the row records.

use std::collections::BTreeMap;

use preflight_plan::{Component, Severity, Verdict, plan};
use serde_json::{Value, json};

use crate::support::{codes, hub, kind, options, plan_with, release_day_rows};

/// Router biases inside MTP layers: the fixture's `mtp_parameters` counts them (they are
/// outside transformers' model, so no buffer count of its excludes them); the planner keeps
/// every router bias a buffer, MTP or not.
const MTP_BUFFERS: &[(&str, u64)] = &[
    // mtp.layers.1.mixer.gate.e_score_correction_bias [512].
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", 512),
    // mtp.layers.1.mixer.gate.e_score_correction_bias [512].
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 512),
    // mtp.layers.1.mixer.gate.e_score_correction_bias [128].
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", 128),
    // mtp.0.ffn.gate.bias [384].
    ("deepseek-ai/DeepSeek-V4-Pro", 384),
];

/// Encoder tensors the fixture's `vision_parameters` leaves out (its generator's prefix list
/// lacks them) and the planner counts as the encoder's: Kimi's projector `pre_norm` weight and
/// bias [1152] under `model.mm_projector.`.
const VISION_UNLISTED: &[(&str, u64)] = &[
    ("moonshotai/Kimi-K2.5", 2 * 1152),
    ("nvidia/Kimi-K2.6-NVFP4", 2 * 1152),
    ("nvidia/Kimi-K2.7-Code-NVFP4", 2 * 1152),
];

/// Every way `verdict` differs from the row `want`.
fn differences(repo: &str, verdict: &Verdict, want: &Value) -> Vec<String> {
    let a = &verdict.artifacts[0];
    let mut out = Vec::new();
    if !verdict.admissible {
        for f in a.findings.iter().filter(|f| f.severity == Severity::Blocking) {
            out.push(format!("{repo}: blocking {} {} {}", f.code, f.subject, f.detail));
        }
        return out;
    }
    let mut differ = |what: &str, got: Value, want: Value| {
        if got != want {
            out.push(format!("{repo}: {what}: planned {got}, expected {want}"));
        }
    };
    let stored: BTreeMap<String, u64> = serde_json::from_value(want["elements_by_dtype"].clone()).expect("elements");
    differ("elements_by_dtype", json!(a.tensor_elements_by_dtype), json!(stored));
    let p = &a.parameters;
    let component = |c: Component| p.by_component.get(&c).copied().unwrap_or(0);
    let mtp = component(Component::Mtp);
    differ(
        "total − mtp",
        json!(p.total - mtp),
        want["transformers_num_parameters"].clone(),
    );
    let mtp_buffers = MTP_BUFFERS.iter().find(|(r, _)| *r == repo).map_or(0, |(_, n)| *n);
    differ(
        "mtp + its router biases",
        json!(mtp + mtp_buffers),
        want["mtp_parameters"].clone(),
    );
    let unlisted = VISION_UNLISTED.iter().find(|(r, _)| *r == repo).map_or(0, |(_, n)| *n);
    differ(
        "vision + projector",
        json!(component(Component::Vision) + component(Component::Projector) - unlisted),
        want["vision_parameters"].clone(),
    );
    let Some(arch) = a.architecture.as_ref() else {
        out.push(format!("{repo}: no architecture"));
        return out;
    };
    let kinds: Vec<String> = arch.attention.iter().map(kind).collect();
    differ("layer kinds", json!(kinds), want["layer_kinds"].clone());
    if let Some(prefix) = want["mtp_prefix"].as_array() {
        differ("mtp layers", json!(arch.mtp_layers), json!(prefix.len()));
    }
    out
}

#[test]
fn every_release_day_checkpoint_plans_admissible_and_exact() {
    let mut failures = Vec::new();
    // The GGUF row is held by the CLI's fixture table (it reads the file as staged).
    for (repo, want) in release_day_rows().iter().filter(|(repo, _)| !repo.ends_with(".gguf")) {
        // No memory asked: admissibility is the checkpoint's, not a cache model's.
        let verdict = plan_with(&[repo.as_str()], "{}");
        failures.extend(differences(repo, &verdict, want));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What the planner makes of every row: figures, memory and findings (`--ignored --nocapture`).
#[test]
#[ignore = "a report, not a check"]
fn release_day_report() {
    for (repo, want) in release_day_rows() {
        if repo.ends_with(".gguf") {
            continue;
        }
        let diffs = differences(&repo, &plan_with(&[repo.as_str()], "{}"), &want);
        let verdict = plan_with(&[repo.as_str()], r#"{"context": 4096}"#);
        println!("== {repo}: {}", if diffs.is_empty() { "exact" } else { "differs" });
        for d in diffs {
            println!("   {d}");
        }
        let a = &verdict.artifacts[0];
        match &a.memory {
            Some(m) => println!("   memory: kv {} B/token", m.kv_cache_bytes_per_token),
            None => {
                let why: Vec<_> = a
                    .findings
                    .iter()
                    .filter(|f| f.code.as_str() == "memory.unavailable")
                    .collect();
                println!("   memory: none {why:?}")
            }
        }
        for f in a.findings.iter().filter(|f| f.severity != Severity::Blocking) {
            println!("   {:?} {} {} {}", f.severity, f.code, f.subject, f.detail);
        }
    }
}

#[test]
fn deepseek_v4_memory_is_refused_with_the_compressed_layer_named() {
    // The window plus entries compressed from every 4 or 128 tokens: transformers keeps them as
    // growing tensors and no engine layout is established, so no figure is guessed.
    let v = plan_with(&["deepseek-ai/DeepSeek-V4-Pro"], r#"{"context": 4096}"#);
    let a = &v.artifacts[0];
    assert!(a.memory.is_none());
    let refused = a
        .findings
        .iter()
        .find(|f| f.code.as_str() == "memory.unavailable")
        .expect("memory.unavailable");
    assert!(refused.detail.contains("compressed attention"), "{}", refused.detail);
    // The planner still knows each layer's geometry: 1/128 and 1/4 compression over a
    // 128-token window, the CSA layers with a 128-wide indexer key.
    let arch = a.architecture.as_ref().expect("architecture");
    assert_eq!(
        serde_json::to_value(arch.attention[0]).expect("json"),
        json!({"kind": "hca", "head_dim": 512, "window": 128, "compress_ratio": 128})
    );
    assert_eq!(
        serde_json::to_value(arch.attention[2]).expect("json"),
        json!({"kind": "csa_indexer", "head_dim": 512, "window": 128, "compress_ratio": 4, "index_head_dim": 128})
    );
    assert_eq!(arch.mtp_layers, 1);
}

/// A key the references read and that changes what is computed stays blocking where the
/// family does not interpret it: DeepSeek-V3's layout (Kimi's text model) ropes
/// `qk_rope_head_dim` channels and has no `partial_rotary_factor` of its own, while vLLM's
/// `patch_rope_parameters` reads one for any model.
#[test]
fn a_read_key_that_changes_the_computation_stays_blocking() {
    let mut facts = hub("moonshotai/Kimi-K2.5");
    let config = facts.config.as_mut().expect("config");
    config.raw["text_config"]
        .as_object_mut()
        .expect("text_config")
        .insert("partial_rotary_factor".into(), json!(0.5));
    let v = plan(&[facts], &options("{}")).expect("valid options");
    assert!(!v.admissible);
    let unknown = v.artifacts[0]
        .findings
        .iter()
        .find(|f| f.code.as_str() == "config.unknown_key")
        .expect("config.unknown_key");
    assert_eq!(unknown.subject, "config.text_config.partial_rotary_factor");
    assert_eq!(unknown.severity, Severity::Blocking);
    // A key a family reads and checks: DeepSeek-V4's cache model is one shared K=V head.
    let mut facts = hub("deepseek-ai/DeepSeek-V4-Pro");
    let config = facts.config.as_mut().expect("config");
    config.raw.insert("num_key_value_heads".into(), json!(2));
    let v = plan(&[facts], &options("{}")).expect("valid options");
    assert!(!v.admissible);
    assert!(
        codes(&v, 0).contains(&"config.unsupported_value".to_owned()),
        "{:?}",
        codes(&v, 0)
    );
}
