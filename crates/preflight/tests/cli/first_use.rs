//! What a new user types and sees (issue 14's first-use list): exit status 4 and DOES NOT FIT
//! for a plan that cannot be served, JSON errors under `--json`, the inputs people type
//! (`32k`, `h100`, `ORG/NAME`, a pasted Hub URL, a GGUF name the repo lacks), an empty
//! `HF_TOKEN`, and a Hub that rate-limits forever. Assertions are on exit codes and error
//! codes, not on message wording (beyond the suggestion itself).

use std::process::Output;

use preflight_testhub::{Fault, TestHub};
use serde_json::Value;

use crate::support::fixtures;

const TOKEN: &str = "hf_first_use_token";

fn hub() -> TestHub {
    crate::support::hub_with_token(TOKEN)
}

fn run(hub: &TestHub, home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    crate::support::run_against(hub, home, env, args)
}

fn local(name: &str) -> String {
    fixtures().join("local").join(name).to_str().expect("utf8").to_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON error document `--json` prints on failure.
fn json_error(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON document on stdout");
    assert!(v["error"]["message"].is_string(), "{v}");
    v["error"].clone()
}

#[test]
fn an_admissible_plan_that_does_not_fit_exits_four_and_says_so_first() {
    let tiny = local("tiny-llama");
    let out = crate::support::preflight(&["plan", &tiny, "--devices", "1MiB"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("DOES NOT FIT"), "{text}");

    let out = crate::support::preflight(&["plan", "--json", &tiny, "--devices", "1MiB"]);
    assert_eq!(out.status.code(), Some(4));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (v["admissible"].as_bool(), v["memory"]["fits"].as_bool()),
        (Some(true), Some(false))
    );

    // It fits on a device that can hold it: 0.
    let out = crate::support::preflight(&["plan", &tiny, "--devices", "l4"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn inadmissible_comes_before_does_not_fit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("tiny");
    std::fs::create_dir(&copy).expect("mkdir");
    for entry in std::fs::read_dir(local("tiny-llama")).expect("dir") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, copy.join(path.file_name().expect("name"))).expect("copy");
    }
    let config_path = copy.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&config_path).expect("read")).expect("json");
    config["attention_chunk_size"] = 8192.into(); // read by the references, not modelled: blocking
    std::fs::write(&config_path, config.to_string()).expect("write");
    let out = crate::support::preflight(&["plan", copy.to_str().expect("utf8"), "--devices", "1MiB"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn json_errors_are_json_documents_with_the_services_codes() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    for (args, exit, code) in [
        (vec!["plan", "--json", "/no/such/checkpoint"], 3, "not_found"),
        (vec!["plan", "--json", "hf://nobody/nothing"], 3, "repo_not_found"),
        (vec!["plan", "--json", "hf://meta-llama/Llama-3.1-8B"], 3, "gated"),
        (vec!["plan", "--json", "hf://org/na..me"], 2, "invalid_source"),
        (
            vec!["plan", "--json", "hf://Qwen/Qwen3-0.6B", "--sequences", "0"],
            2,
            "invalid_options",
        ),
        // Refused by the flag's own parser, before any option is checked: still a document.
        (
            vec!["plan", "--json", "hf://Qwen/Qwen3-0.6B", "--devices", "h100"],
            2,
            "invalid_options",
        ),
        (
            vec!["plan", "--json", "hf://Qwen/Qwen3-0.6B", "--no-such-flag"],
            2,
            "invalid_options",
        ),
    ] {
        let out = run(&hub, home.path(), &[], &args);
        assert_eq!(out.status.code(), Some(exit), "{args:?}: {}", stderr(&out));
        assert_eq!(json_error(&out)["code"], code, "{args:?}");
    }
}

#[test]
fn context_takes_32k_and_devices_h100_asks_which_one() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "--json", "hf://Qwen/Qwen3-0.6B", "--context", "32k"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["artifacts"][0]["memory"]["context"], 32_768);

    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "hf://Qwen/Qwen3-0.6B", "--devices", "h100"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("did you mean h100-80gb or h100-pcie or h100-94gb"),
        "{err}"
    );
    assert!(hub.requests().len() <= 4, "only the first plan reached the Hub");
}

/// A device's "GB" is read as GiB everywhere, as vendors and the catalogue mean it: `24GB`,
/// `24GiB` and the catalogue's 24 GB L4 are one capacity.
#[test]
fn a_capacity_in_gb_is_the_same_gib_as_the_catalogues() {
    let capacity = |devices: &str| {
        let out = crate::support::preflight(&["plan", "--json", &local("tiny-llama"), "--devices", devices]);
        assert_eq!(out.status.code(), Some(0), "{devices}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        v["memory"]["per_device"][0]["capacity_bytes"]
            .as_u64()
            .expect("capacity")
    };
    let gib24 = 24 * (1u64 << 30);
    assert_eq!(capacity("24GB"), gib24);
    assert_eq!(capacity("24GiB"), gib24);
    assert_eq!(capacity("l4:1"), gib24, "the catalogue's L4 is \"24GB\" too");
}

#[test]
fn a_repo_id_without_hf_asks_did_you_mean_and_a_pasted_hub_url_plans() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(&hub, home.path(), &[], &["plan", "Qwen/Qwen3-8B"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean hf://Qwen/Qwen3-8B?"),
        "{}",
        stderr(&out)
    );
    assert!(hub.requests().is_empty(), "a suggestion, not a guess: nothing was read");
    let out = run(&hub, home.path(), &[], &["plan", "--json", "Qwen/Qwen3-8B"]);
    assert_eq!(json_error(&out)["code"], "invalid_source");

    for pasted in [
        "https://huggingface.co/Qwen/Qwen3-0.6B",
        "https://huggingface.co/Qwen/Qwen3-0.6B/tree/main",
    ] {
        let out = run(&hub, home.path(), &[], &["plan", "--json", pasted]);
        assert_eq!(out.status.code(), Some(0), "{pasted}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["artifacts"][0]["source"]["repo"], "Qwen/Qwen3-0.6B");
    }
}

#[test]
fn a_missing_gguf_name_lists_the_gguf_files_the_repo_has() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q8_0.gguf"],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("Qwen3-8B-Q4_K_M.gguf"), "{}", stderr(&out));
    let out = run(
        &hub,
        home.path(),
        &[],
        &["plan", "--json", "hf://Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q8_0.gguf"],
    );
    assert_eq!(json_error(&out)["code"], "file_not_found");
}

#[test]
fn an_empty_hf_token_falls_back_to_the_token_file() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(home.path().join("token"), format!("{TOKEN}\n")).expect("token file");
    let out = run(
        &hub,
        home.path(),
        &[("HF_TOKEN", "")],
        &["plan", "hf://meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Hole 5 as a user meets it: `preflight plan` against a Hub answering `429 Retry-After: 1`
/// forever ends, with a rate-limit error, after a bounded number of attempts.
#[test]
fn a_hub_rate_limiting_forever_ends_the_plan_after_bounded_retries() {
    let hub = hub();
    let home = tempfile::tempdir().expect("tempdir");
    hub.add_fault(Fault::rate_limit(1));
    let out = run(&hub, home.path(), &[], &["plan", "--json", "hf://Qwen/Qwen3-8B"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(json_error(&out)["code"], "upstream_rate_limited");
    let attempts = hub.requests().iter().filter(|r| r.status == 429).count();
    assert_eq!(attempts, 5, "one request and its 4 retries, then the CLI gave up");
}
