//! `preflight gate` against a real `preflight serve` process and the fixture Hub: it passes
//! on the right order and fails on a server that looks the cache up after staging.

use std::process::{Command, Output};
use std::time::Duration;

use preflight_testhub::{Fault, TestHub};

use crate::support::serve;

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
