//! `preflight plan hf://…` end to end: the binary, its environment (HF_ENDPOINT, HF_TOKEN,
//! $HF_HOME/token, HF_HUB_OFFLINE) and the fixture Hub.

use std::process::Output;

use preflight_testhub::{Origin, TestHub};
use serde_json::Value;

const TOKEN: &str = "hf_cli_token";

fn hub() -> TestHub {
    crate::support::hub_with_token(TOKEN)
}

fn run(hub: &TestHub, home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    crate::support::run_against(hub, home, env, args)
}

/// The example: 161 shards, so a restage would be unmistakable in the request count.
const DEEPSEEK: &str = "hf://deepseek-ai/DeepSeek-V3";

#[test]
fn deepseek_v3_plans_exactly_within_shards_plus_four_requests() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "--json", "hf://deepseek-ai/DeepSeek-V3"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &v["artifacts"][0]["parameters"];
    assert_eq!(
        p["total"].as_u64().expect("total") - p["by_component"]["mtp"].as_u64().expect("mtp"),
        671_026_404_352
    );
    let requests = v["staging"][0]["requests"].as_u64().expect("requests");
    let hub_requests = hub.requests().iter().filter(|r| r.origin == Origin::Hub).count() as u64;
    assert_eq!(requests, hub_requests, "the verdict counts what the Hub saw");
    assert!(requests <= 161 + 4, "{requests}");
    assert_eq!(v["artifacts"][0]["source"]["commit"].as_str().map(str::len), Some(40));
}

#[test]
fn gated_needs_a_token_from_the_environment_or_hf_home() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(&hub, home.path(), &[], &["plan", "hf://meta-llama/Llama-3.1-8B"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gated") && err.contains("HF_TOKEN"), "{err}");
    let out = run(
        &hub,
        home.path(),
        &[("HF_TOKEN", TOKEN)],
        &["plan", "hf://meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(home.path().join("token"), format!("{TOKEN}\n")).expect("token file");
    let out = run(&hub, home.path(), &[], &["plan", "hf://meta-llama/Llama-3.1-8B"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn offline_with_an_empty_cache_fails_without_a_request() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(
        &hub,
        home.path(),
        &[("HF_HUB_OFFLINE", "1")],
        &["plan", "hf://Qwen/Qwen3-8B"],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("offline"));
    assert!(hub.requests().is_empty());
}

/// Offline, an unpinned source the HF cache has no ref for plans from the commit the facts
/// cache last read it at: no request at all.
#[test]
fn offline_plans_an_unpinned_source_from_the_facts_cache() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let online = run(&hub, home.path(), &[], &["plan", "--json", "hf://Qwen/Qwen3-8B"]);
    assert_eq!(
        online.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&online.stderr)
    );
    let online: Value = serde_json::from_slice(&online.stdout).expect("json");
    hub.clear_requests();
    let offline = [("HF_HUB_OFFLINE", "1")];
    let out = run(
        &hub,
        home.path(),
        &offline,
        &["plan", "--json", "--context", "4096", "hf://Qwen/Qwen3-8B"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());
    assert_eq!(v["artifacts"][0]["source"], online["artifacts"][0]["source"]);
    assert_eq!(v["artifacts"][0]["parameters"], online["artifacts"][0]["parameters"]);
    assert!(v["memory"].is_object());
    // Another revision was never read: still refused.
    let out = run(&hub, home.path(), &offline, &["plan", "hf://Qwen/Qwen3-8B@v2"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(hub.requests().is_empty());
}

#[test]
fn a_system_plan_mixes_hub_and_local_sources() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let local = crate::support::fixtures().join("local/tiny-llama");
    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "--json", "hf://Qwen/Qwen3-0.6B", local.to_str().expect("utf8")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["artifacts"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["artifacts"][0]["source"]["repo"], "Qwen/Qwen3-0.6B");
    assert!(v["artifacts"][1]["source"]["commit"].is_null());
}

/// Hub requests the fixture Hub has seen so far.
fn hub_requests(hub: &TestHub) -> usize {
    hub.requests().iter().filter(|r| r.origin == Origin::Hub).count()
}

/// Staged facts are kept by commit: planning the same source again with other options costs
/// one probe (the commit may have moved), a pinned one nothing, and no staging either way.
#[test]
fn a_second_plan_with_other_options_costs_one_probe_and_a_pinned_one_nothing() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let plan = |args: &[&str]| {
        let out = run(&hub, home.path(), &[], args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    let first = plan(&["plan", "--json", DEEPSEEK]);
    let staged = hub_requests(&hub);
    assert!(staged > 2, "the first plan stages: {staged} requests");
    let second = plan(&["plan", "--json", "--context", "8192", DEEPSEEK]);
    assert_eq!(hub_requests(&hub) - staged, 1, "one probe, no staging");
    assert_eq!(second["staging"][0]["requests"], 1);
    assert_eq!(
        second["artifacts"][0]["parameters"],
        first["artifacts"][0]["parameters"]
    );
    assert!(second["memory"].is_object(), "the new options were planned");
    let commit = first["artifacts"][0]["source"]["commit"]
        .as_str()
        .expect("commit")
        .to_owned();
    let before = hub_requests(&hub);
    let pinned = plan(&["plan", "--json", "--sequences", "2", &format!("{DEEPSEEK}@{commit}")]);
    assert_eq!(hub_requests(&hub), before, "pinned: not even a probe");
    assert_eq!(
        pinned["artifacts"][0]["source"]["pinned"], true,
        "the hit describes this request"
    );
    assert_eq!(pinned["staging"][0]["requests"], 0);
    // --no-cache stages afresh.
    let before = hub_requests(&hub);
    plan(&["plan", "--json", "--no-cache", DEEPSEEK]);
    assert!(hub_requests(&hub) - before > 2);
}

/// A cache entry that does not verify is a miss: the source is staged again and planned right.
#[test]
fn a_corrupt_cache_entry_is_restaged() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let plan = || {
        let out = run(&hub, home.path(), &[], &["plan", "--json", "hf://Qwen/Qwen3-0.6B"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    let first = plan();
    let cache = home.path().join("preflight-cache");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "facts"))
        .collect();
    assert_eq!(entries.len(), 1);
    let mut bytes = std::fs::read(&entries[0]).expect("entry");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entries[0], bytes).expect("corrupt");
    let before = hub_requests(&hub);
    let again = plan();
    assert!(hub_requests(&hub) - before > 1, "restaged");
    assert_eq!(again["artifacts"][0]["parameters"], first["artifacts"][0]["parameters"]);
}

/// Facts read with a token are kept under that token: without it, the gated repo is refused
/// again rather than answered from the cache.
#[test]
fn cached_gated_facts_are_not_served_without_the_token() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let with = run(
        &hub,
        home.path(),
        &[("HF_TOKEN", TOKEN)],
        &["plan", "hf://meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(with.status.code(), Some(0), "{}", String::from_utf8_lossy(&with.stderr));
    let without = run(&hub, home.path(), &[], &["plan", "hf://meta-llama/Llama-3.1-8B"]);
    assert_eq!(without.status.code(), Some(3), "refused, not served from the cache");
}

/// `preflight cache ls | prune | rm` see and bound the cache.
#[test]
fn the_cache_can_be_listed_pruned_and_emptied() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    for repo in ["hf://Qwen/Qwen3-0.6B", "hf://Qwen/Qwen3-8B"] {
        let out = run(&hub, home.path(), &[], &["plan", repo]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let ls = run(&hub, home.path(), &[], &["cache", "ls"]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        text.contains("Qwen/Qwen3-0.6B@") && text.contains("Qwen/Qwen3-8B@"),
        "{text}"
    );
    assert!(text.contains("2 entries"), "{text}");
    // A size with a unit is a size, as --devices takes one: 1 GiB keeps both.
    for size in ["1GiB", "1G", "1GB"] {
        let kept = run(&hub, home.path(), &[], &["cache", "prune", "--max-bytes", size]);
        assert!(
            String::from_utf8_lossy(&kept.stdout).contains("removed 0"),
            "{size}: {kept:?}"
        );
    }
    let bad = run(&hub, home.path(), &[], &["cache", "prune", "--max-bytes", "lots"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let prune = run(&hub, home.path(), &[], &["cache", "prune", "--max-bytes", "0"]);
    assert!(
        String::from_utf8_lossy(&prune.stdout).contains("removed 2"),
        "{:?}",
        prune
    );
    let ls = run(&hub, home.path(), &[], &["cache", "ls"]);
    assert!(String::from_utf8_lossy(&ls.stdout).contains("0 entries"));
    let out = run(&hub, home.path(), &[], &["plan", "hf://Qwen/Qwen3-0.6B"]);
    assert_eq!(out.status.code(), Some(0));
    let rm = run(&hub, home.path(), &[], &["cache", "rm"]);
    assert!(String::from_utf8_lossy(&rm.stdout).contains("removed 1"), "{:?}", rm);
}

/// One commit read with and without a token is two entries, and `cache ls` says which is which.
#[test]
fn cache_ls_labels_what_a_token_read() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    for env in [&[][..], &[("HF_TOKEN", TOKEN)][..]] {
        let out = run(&hub, home.path(), env, &["plan", "hf://Qwen/Qwen3-0.6B"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let ls = run(&hub, home.path(), &[], &["cache", "ls"]);
    let text = String::from_utf8_lossy(&ls.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("Qwen/Qwen3-0.6B@")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines.iter().filter(|l| l.ends_with("read with a token")).count(),
        1,
        "{text}"
    );
}
