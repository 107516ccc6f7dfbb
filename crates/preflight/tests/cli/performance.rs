//! `--workload` and `--slo`: the performance block they add (an estimate, with its range and
//! calibration), and bad values refused as bad usage (exit 2) before any source is read.

use serde_json::Value;

use crate::support::{materialize, preflight};

fn qwen3_8b(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    let repo = materialize("Qwen/Qwen3-8B", dir.path());
    let mut argv = vec!["plan", repo.to_str().expect("utf8"), "--devices", "h100-80gb:1"];
    argv.extend_from_slice(args);
    preflight(&argv)
}

#[test]
fn a_workload_adds_an_estimate_with_its_range_and_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = qwen3_8b(
        &dir,
        &[
            "--json",
            "--workload",
            "isl=1024,osl=256,concurrency=8",
            "--slo",
            "tpot=1s,ttft=1us",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &v["performance"];
    assert_eq!(p["estimate"], true);
    assert_eq!(p["workload"], "isl=1024,osl=256,concurrency=8");
    assert_eq!(p["batch"], 8.0);
    let range = (
        p["range"]["low"].as_f64().expect("low"),
        p["range"]["high"].as_f64().expect("high"),
    );
    assert!(range.0 <= 1.0 && 1.0 <= range.1, "{range:?}");
    let (tokens, per_gpu) = (
        p["output_tokens_per_s"].as_f64(),
        p["output_tokens_per_s_per_gpu"].as_f64(),
    );
    assert!(tokens.is_some_and(|t| t > 0.0) && tokens == per_gpu, "one GPU: {p}");
    // The closed loop's identity: 8 clients each complete 256 tokens an end-to-end latency.
    let e2e = p["e2e_ms"].as_f64().expect("e2e");
    assert!((tokens.expect("tokens") - 8.0 * 256.0 / (e2e / 1000.0)).abs() < 1e-6 * e2e);
    // tpot=1s is met, ttft=1us cannot be.
    assert_eq!(p["slo"][0]["target"], "ttft=0.001ms");
    assert_eq!(
        (p["slo"][0]["met"].as_bool(), p["slo"][1]["met"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(p["meets_slo"], false);
    // The text says it is an estimate, what it was calibrated on, and each target's fate.
    let out = qwen3_8b(
        &dir,
        &["--workload", "isl=1024,osl=256,concurrency=8", "--slo", "tpot=1s"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "PERFORMANCE (estimate) isl=1024,osl=256,concurrency=8",
        "calibrated on vllm",
        "target        tpot=1000ms: met",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn an_engine_without_a_modelled_scheduler_says_why_there_is_no_estimate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B-GGUF", dir.path());
    let gguf = repo.join("Qwen3-8B-Q4_K_M.gguf");
    let out = preflight(&[
        "plan",
        "--json",
        gguf.to_str().expect("utf8"),
        "--devices",
        "rtx-4090",
        "--context",
        "8k",
        "--workload",
        "isl=1000,osl=100,rate=1",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v.get("performance").is_none());
    let finding = v["artifacts"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["code"] == "performance.unavailable")
        .expect("performance.unavailable");
    assert!(
        finding["detail"].as_str().is_some_and(|d| d.contains("llama.cpp")),
        "{finding}"
    );
}

#[test]
fn bad_workloads_and_targets_are_bad_usage() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--devices", "h100-80gb", "--workload", "isl=1024,osl=128"],
            "concurrency=N",
        ),
        (
            &["--devices", "h100-80gb", "--workload", "isl=1024,osl=128,qps=3"],
            "`qps` is not a workload key",
        ),
        (
            &[
                "--devices",
                "h100-80gb",
                "--workload",
                "isl=1k,osl=1k,rate=1",
                "--slo",
                "ttft=2",
            ],
            "needs a unit",
        ),
        (&["--devices", "h100-80gb", "--slo", "ttft=2s"], "give workload too"),
        (&["--workload", "isl=1k,osl=1k,rate=1"], "give devices too"),
    ];
    for (args, want) in cases {
        let mut argv = vec!["plan", "hf://Qwen/Qwen3-8B"];
        argv.extend_from_slice(args);
        let out = preflight(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        // The same as a JSON error document on stdout.
        argv.push("--json");
        let out = preflight(&argv);
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["error"]["code"], "invalid_options", "{args:?}: {v}");
    }
}

#[test]
fn device_types_without_counts_are_recommended_and_none_meeting_exits_4() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B", dir.path());
    let run = |slo: &str| {
        preflight(&[
            "plan",
            repo.to_str().expect("utf8"),
            "--devices",
            "l4,h100-80gb",
            "--workload",
            "isl=1024,osl=256,concurrency=8",
            "--slo",
            slo,
            "--gpu-price",
            "l4=0.8,h100-80gb=2.5",
        ])
    };
    let out = run("tpot=1s");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("RECOMMENDATIONS (estimates)  8 of 8 deployments meet the targets"),
        "{text}"
    );
    assert!(text.contains("a million tokens"), "{text}");
    let out = run("ttft=1us");
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("misses ttft=0.001ms"));
}

/// `--compare devices=…` and `--compare engine=…` with a workload: each row plans its own
/// deployment and carries its estimate, the same as planning that deployment alone.
#[test]
fn compare_over_devices_and_engines_adds_each_rows_estimate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B", dir.path());
    let repo = repo.to_str().expect("utf8");
    let workload = ["--workload", "isl=1024,osl=256,concurrency=8"];
    let run = |extra: &[&str]| {
        let mut argv = vec!["plan", repo];
        argv.extend_from_slice(&workload);
        argv.extend_from_slice(extra);
        let out = preflight(&argv);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let compared: Value =
        serde_json::from_slice(&run(&["--json", "--compare", "devices=h100-80gb:1,b200:2"]).stdout).expect("json");
    let rows = compared["compare"]["rows"].as_array().expect("rows");
    assert_eq!(compared["compare"]["option"], "devices");
    for (row, devices) in rows.iter().zip(["h100-80gb:1", "b200:2"]) {
        let alone: Value = serde_json::from_slice(&run(&["--json", "--devices", devices]).stdout).expect("json");
        assert_eq!(row["value"], devices);
        assert_eq!(row["performance"], alone["performance"], "{devices}");
        assert_eq!(row["performance"]["estimate"], true);
    }
    // Two B200s at TP 2 outrun one H100.
    let tokens = |row: &Value| row["performance"]["output_tokens_per_s"].as_f64().expect("tokens");
    assert!(tokens(&rows[1]) > tokens(&rows[0]), "{rows:?}");
    // The table gains the estimate's columns, marked as estimates.
    let text = String::from_utf8_lossy(&run(&["--devices", "h100-80gb:1", "--compare", "engine=vllm,sglang"]).stdout)
        .into_owned();
    assert!(text.starts_with("COMPARE --engine"), "{text}");
    assert!(
        text.contains("tok/s/GPU") && text.contains("TPOT ms") && text.contains("≈"),
        "{text}"
    );
}

/// A compared device set without a count would ask for recommendations (a table of their
/// own): refused as bad usage before any source is read, as is `--devices` given as well.
#[test]
fn compare_over_devices_wants_counts_and_no_devices_beside_it() {
    for (args, needle) in [
        (
            &["--compare", "devices=h100-80gb,h200"][..],
            "give each compared deployment its count",
        ),
        (
            &["--devices", "h200:1", "--compare", "devices=h100-80gb:1,h200:1"][..],
            "given and compared at once",
        ),
    ] {
        let mut argv = vec![
            "plan",
            "/nonexistent/checkpoint",
            "--workload",
            "isl=1,osl=1,concurrency=1",
        ];
        argv.extend_from_slice(args);
        let out = preflight(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle) && !stderr.contains("nonexistent"), "{stderr}");
    }
}
