//! The command line as a library (what the Python package calls): `plan_json` is `plan
//! --json` without a process — the same document and exit status as the binary's — and
//! `plan_flags` offers exactly `plan`'s flags.

use crate::support::{fixtures, preflight};

#[test]
fn plan_json_answers_as_the_binary_prints() {
    let tiny = fixtures().join("local/tiny-qwen3-moe-sharded");
    let tiny = tiny.to_str().expect("utf8");
    for (args, exit) in [
        (vec![tiny], 0),
        (vec![tiny, "--devices", "l4:1", "--context", "2k", "--kv-dtype=fp8"], 0),
        (vec![tiny, "--devices", "1MiB:1"], 4),
        (vec![tiny, "--engine", "llama.cpp", "--compare", "kv-dtype=f16,q8_0"], 4),
        (vec![tiny, "--context", "lots"], 2),
        (vec!["--devices", "h900", tiny], 2),
        (vec!["/no/such/checkpoint"], 3),
        (vec![], 2),
    ] {
        let binary = preflight(&[&["plan", "--json"], &args[..]].concat());
        let library = preflight::plan_json(&args);
        assert_eq!(binary.status.code(), Some(i32::from(exit)), "{args:?}");
        assert_eq!(library.exit, exit, "{args:?}: {}", library.json);
        assert_eq!(library.json, String::from_utf8_lossy(&binary.stdout), "{args:?}");
        // 2 and 3 carry the error document; 0, 1 and 4 a verdict (or a comparison).
        let document: serde_json::Value = serde_json::from_str(&library.json).expect("json");
        assert_eq!(library.failed(), document.get("error").is_some(), "{args:?}");
        assert_eq!(library.failed(), matches!(exit, 2 | 3), "{args:?}");
    }
}

#[test]
fn plan_flags_are_plans_own_flags_bar_json_and_help() {
    let flags = preflight::plan_flags();
    let takes_value = |name: &str| flags.iter().find(|(f, _)| f == name).map(|(_, v)| *v);
    assert_eq!(takes_value("context"), Some(true));
    assert_eq!(takes_value("devices"), Some(true));
    assert_eq!(takes_value("flash-attn"), Some(true));
    assert_eq!(takes_value("include-mtp"), Some(false));
    assert_eq!(takes_value("no-cache"), Some(false));
    assert_eq!(takes_value("json"), None);
    assert_eq!(takes_value("help"), None);
    assert!(preflight::plan_help().contains("--kv-dtype"));
}
