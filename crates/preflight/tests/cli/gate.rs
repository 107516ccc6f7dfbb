//! `preflight gate` against a real `preflight serve` process and the fixture Hub: it passes
//! on the right order and fails on a server that looks the cache up after staging.

use std::process::{Command, Output};
use std::time::Duration;

use preflight_testhub::{Fault, TestHub};

use crate::support::{serve, serve_logging};

/// Added to every fixture Hub request: a hit costs one probe (0.2 s), a hit after staging
/// costs several sequential reads on top (≥ 0.8 s) — either side of the 0.5 s ceiling.
const LATENCY: Duration = Duration::from_millis(200);

fn gate(url: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["gate", "--url", url, "--source", "hf://Qwen/Qwen3-0.6B"])
        .output()
        .expect("run gate")
}

#[test]
fn the_gate_passes_on_a_server_that_looks_up_before_work() {
    let hub = TestHub::builder().start_blocking().expect("hub");
    hub.add_fault(Fault::latency(LATENCY));
    let data = tempfile::tempdir().expect("tempdir");
    let (_server, url) = serve(&hub, data.path(), &[]);
    let out = gate(&url);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for check in [
        "PASS  capabilities",
        "PASS  plan",
        "PASS  repeat is cached",
        "PASS  hit cost",
        "PASS  local path refused",
    ] {
        assert!(text.contains(check), "missing {check:?} in\n{text}");
    }
    assert!(
        text.contains("admissible=true"),
        "the plan line names the answer: {text}"
    );
    assert!(
        !text.contains("Some("),
        "no Rust debug text in the gate's report: {text}"
    );
}

/// A service's log in a file (not a terminal) is plain text: no colour escape codes.
#[test]
fn the_service_logs_no_escape_codes_off_a_terminal() {
    let hub = TestHub::builder().start_blocking().expect("hub");
    let data = tempfile::tempdir().expect("tempdir");
    let log_path = data.path().join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let (server, url) = serve_logging(&hub, data.path(), &[], "info", log.into());
    assert_eq!(gate(&url).status.code(), Some(0));
    drop(server);
    let text = std::fs::read_to_string(&log_path).expect("log");
    assert!(
        text.contains("INFO"),
        "the service logged at info (a level a terminal colours): {text}"
    );
    assert!(!text.contains('\u{1b}'), "escape codes in a log file: {text:?}");
    // One line a request at the default verbosity: method, path, status, cached, time.
    let plans: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" request ") && l.contains("/v1/plan"))
        .collect();
    assert!(!plans.is_empty(), "no request lines: {text}");
    for line in &plans {
        for field in ["method=POST", "status=", "ms="] {
            assert!(line.contains(field), "{field} missing: {line}");
        }
        // An answered plan says whether a cache answered it.
        assert_eq!(line.contains("status=200"), line.contains("cached="), "{line}");
    }
    assert!(plans.iter().any(|l| l.contains("status=200")), "{text}");
}

#[test]
fn the_gate_fails_on_a_server_that_stages_before_the_lookup() {
    let hub = TestHub::builder().start_blocking().expect("hub");
    hub.add_fault(Fault::latency(LATENCY));
    let data = tempfile::tempdir().expect("tempdir");
    let (_server, url) = serve(&hub, data.path(), &["--debug-lookup-after-staging"]);
    let out = gate(&url);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL  hit cost"), "{text}");
    // The repeat still says cached: only the cost of the hit gives the broken order away.
    assert!(text.contains("PASS  repeat is cached"), "{text}");
}

#[test]
fn the_gate_reports_an_unreachable_server() {
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["gate", "--url", "http://127.0.0.1:9"])
        .output()
        .expect("run gate");
    assert_eq!(out.status.code(), Some(3));
}

/// Usage mistakes are said plainly, exit 2, before any request: a URL without its scheme
/// (reqwest would say "builder error"), and fewer health samples than the floor needs.
#[test]
fn bad_gate_flags_are_usage_errors() {
    for (args, needle) in [
        (
            &["--url", "localhost:18080"][..],
            "did you mean http://localhost:18080?",
        ),
        (&["--url", "ftp://example.com"][..], "the scheme must be http or https"),
        (
            &["--url", "http://127.0.0.1:9", "--health-samples", "1"][..],
            "--health-samples",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
            .arg("gate")
            .args(args)
            .output()
            .expect("run gate");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// A plan the server does not answer leaves no hit to cost: the gate says so rather than
/// printing "0.000s over a 0.000s floor", and fails.
#[test]
fn a_failed_plan_leaves_the_hit_cost_unmeasured() {
    let hub = TestHub::builder().start_blocking().expect("hub");
    let data = tempfile::tempdir().expect("tempdir");
    let (_server, url) = serve(&hub, data.path(), &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["gate", "--url", &url, "--source", "hf://nobody/nothing"])
        .output()
        .expect("run gate");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("FAIL  plan"), "{text}");
    let cost = text.lines().find(|l| l.contains("hit cost")).expect("a hit cost line");
    assert!(cost.starts_with("FAIL") && cost.contains("not measured"), "{cost}");
    assert!(!text.contains("0.000s"), "{text}");
}

/// A gated source needs a token: `--token` (or `HF_TOKEN`) goes with each plan.
#[test]
fn the_gate_sends_a_token_for_a_gated_source() {
    let hub = crate::support::hub_with_token("hf_gate_token");
    let data = tempfile::tempdir().expect("tempdir");
    let (_server, url) = serve(&hub, data.path(), &[]);
    let run = |token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_preflight"));
        command
            .args(["gate", "--url", &url, "--source", "hf://meta-llama/Llama-3.1-8B"])
            .env_remove("HF_TOKEN");
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        let out = command.output().expect("run gate");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(run(None).contains("FAIL  plan"), "gated without a token");
    let with = run(Some("hf_gate_token"));
    assert!(with.contains("PASS  plan"), "{with}");
}
