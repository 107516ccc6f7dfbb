//! `preflight plan hf://…` end to end: the binary, its environment (HF_ENDPOINT, HF_TOKEN,
//! $HF_HOME/token, HF_HUB_OFFLINE) and the fixture Hub.

use std::process::{Command, Output};

use preflight_testhub::{Origin, TestHub};
use serde_json::Value;

const TOKEN: &str = "hf_cli_token";

fn hub() -> TestHub {
    TestHub::builder().token(TOKEN).start_blocking().expect("fixture hub")
}

fn run(hub: &TestHub, home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
    cmd.args(args)
        .env("HF_ENDPOINT", hub.url())
        .env("HF_HOME", home)
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run preflight")
}

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
