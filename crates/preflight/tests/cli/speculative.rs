//! `--speculative METHOD:K`: a drafter planned with its target as one engine — an EAGLE-3
//! head given as the second source, or the checkpoint's own MTP layers — and the sources or
//! values it cannot draft with refused as bad usage (exit 2).

use serde_json::Value;

use crate::support::{materialize, preflight};

const LLAMA: &str = "meta-llama/Llama-3.1-8B";
const EAGLE3: &str = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B";

fn path(repo: &str, dir: &tempfile::TempDir) -> String {
    materialize(repo, dir.path()).to_string_lossy().into_owned()
}

#[test]
fn an_eagle3_head_given_second_joins_its_targets_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, head) = (path(LLAMA, &dir), path(EAGLE3, &dir));
    let flags = [
        "--speculative",
        "eagle3:3",
        "--devices",
        "h100-80gb:1",
        "--context",
        "8192",
        "--sequences",
        "16",
    ];
    let mut argv = vec!["plan", &target, &head];
    argv.extend_from_slice(&flags);
    let out = preflight(&argv);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        // The head's layer is one more full-attention layer in the target's group.
        "132.00 KiB/token · 33 full (1 draft) × 4.00 KiB × 8,192 tokens (× 16 sequences)",
        "speculative     2.94 GiB  eagle3 × 3 tokens a step",
        "weights 810.28 MiB · RoPE 512.00 KiB · KV 1 layer × 4.00 KiB/token = 512.00 MiB",
        "lookahead 3 tokens a sequence = 0 B · activations +1.65 GiB",
        "(eagle3 family) · 1 layers",
        "memory.speculative_draft       memory: planned as the EAGLE-3 draft head of",
        "KV pool 51.75 GiB a rank · 411,104 tokens",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    assert!(!text.lines().any(|l| l.ends_with(' ')), "no trailing spaces:\n{text}");
    let mut argv = vec!["plan", "--json", &target, &head];
    argv.extend_from_slice(&flags);
    let v: Value = serde_json::from_slice(&preflight(&argv).stdout).expect("json");
    let s = &v["artifacts"][0]["memory"]["speculative"];
    assert_eq!(s["method"], "eagle3");
    assert_eq!(s["num_speculative_tokens"], 3);
    assert_eq!(s["draft_weights_bytes"], 849_635_328u64);
    assert_eq!(s["draft_kv_cache_bytes"], 4096u64 * 8192 * 16);
    assert_eq!(v["artifacts"][0]["memory"]["kv_cache"][0]["draft_layers"], 1);
    assert!(v["artifacts"][1].get("memory").is_none());
    assert_eq!(v["memory"]["kv_pool_tokens"], 411_104);
}

#[test]
fn deepseek_v3_drafts_with_its_own_mtp_layer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = path("deepseek-ai/DeepSeek-V3", &dir);
    let out = preflight(&[
        "plan",
        &repo,
        "--speculative",
        "mtp:3",
        "--devices",
        "h200:8",
        "--context",
        "8192",
        "--sequences",
        "16",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "62 mla (1 draft) × 1.12 KiB × 8,192 tokens",
        "mtp × 3 tokens a step, drafted by",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn what_cannot_draft_is_bad_usage() {
    // Refused before any source is read: the value, its companions, the sources' count.
    let missing = "/nonexistent/checkpoint";
    for (args, needle) in [
        (&["--speculative", "mtp"][..], "`mtp` is not METHOD:TOKENS"),
        (&["--speculative", "medusa:3"][..], "`medusa` is not a method planned"),
        (&["--speculative", "eagle3:0"][..], "0 speculative tokens"),
        (
            &["--speculative", "mtp:3", "--include-mtp"][..],
            "invalid --include-mtp",
        ),
        (
            &["--speculative", "eagle3:3", "--ubatch", "256"][..],
            "llama.cpp's speculative decoding",
        ),
        (&["--speculative", "eagle3:3"][..], "eagle3 needs two sources"),
    ] {
        let mut argv = vec!["plan", missing];
        argv.extend_from_slice(args);
        let out = preflight(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    // Refused once read: Llama-3.1-8B has no MTP layers to draft with.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = preflight(&["plan", &path(LLAMA, &dir), "--speculative", "mtp:3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid --speculative: mtp drafts with the checkpoint's own"),
        "{stderr}"
    );
}
