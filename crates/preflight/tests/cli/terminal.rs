//! Colour and progress are for a person at a terminal: a pipe, a redirected log or `--json`
//! gets neither. A terminal is made with util-linux's `script`, which runs the binary on a
//! pseudo-terminal.

use std::process::{Command, Output};
use std::time::Duration;

use preflight_testhub::{Fault, TestHub};

const ESC: u8 = 0x1b;
/// Long enough a Hub round trip that staging outlasts the progress line's delay (300 ms):
/// Qwen3-8B stages in three dependent rounds.
const SLOW: Duration = Duration::from_millis(400);

fn slow_hub() -> TestHub {
    let hub = crate::support::hub_with_token("hf_terminal_token");
    hub.add_fault(Fault::latency(SLOW));
    hub
}

/// `preflight ARGS` on a pseudo-terminal (stdout and stderr both), with `env` added.
fn on_a_terminal(hub: &TestHub, home: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let command = std::iter::once(env!("CARGO_BIN_EXE_preflight"))
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new("script");
    cmd.args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("HF_ENDPOINT", hub.url())
        .env("HF_HOME", home)
        .env("PREFLIGHT_CACHE", home.join("preflight-cache"))
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run preflight under script(1)")
}

fn has_escape(bytes: &[u8]) -> bool {
    bytes.contains(&ESC)
}

#[test]
fn piped_output_carries_no_escape_codes() {
    let hub = slow_hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = crate::support::run_against(&hub, home.path(), &[], &["plan", "hf://Qwen/Qwen3-8B"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ADMISSIBLE"));
    assert!(!has_escape(&out.stdout), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!has_escape(&out.stderr), "{}", String::from_utf8_lossy(&out.stderr));
    // A verdict that does not fit (the words a terminal would get in red and yellow) too.
    let tiny = crate::support::fixtures().join("local/tiny-llama");
    let out = crate::support::preflight(&["plan", "--devices", "1MiB", tiny.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(4));
    assert!(!has_escape(&out.stdout) && !has_escape(&out.stderr));
}

#[test]
fn a_terminal_gets_colour_and_progress_unless_no_color_or_json() {
    let hub = slow_hub();
    let home = tempfile::tempdir().expect("tempdir");
    let out = on_a_terminal(&hub, home.path(), &[], &["plan", "--no-cache", "hf://Qwen/Qwen3-8B"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("\x1b[1;32mADMISSIBLE\x1b[0m"), "{text}");
    assert!(
        text.contains("staging hf://Qwen/Qwen3-8B: "),
        "progress while staging: {text}"
    );

    let out = on_a_terminal(
        &hub,
        home.path(),
        &[("NO_COLOR", "1")],
        &["plan", "--no-cache", "hf://Qwen/Qwen3-8B"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ADMISSIBLE") && !text.contains("\x1b[1;3"), "{text}");

    let out = on_a_terminal(
        &hub,
        home.path(),
        &[],
        &["plan", "--json", "--no-cache", "hf://Qwen/Qwen3-8B"],
    );
    assert!(!has_escape(&out.stdout), "{}", String::from_utf8_lossy(&out.stdout));
}
