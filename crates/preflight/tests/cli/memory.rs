//! `preflight plan`'s memory flags: the breakdown they add, the JSON they produce, and bad
//! values refused as bad usage (exit 2) before any source is read.

use serde_json::Value;

use crate::support::{fixtures, materialize, preflight};

fn local(name: &str) -> String {
    fixtures().join("local").join(name).to_string_lossy().into_owned()
}

#[test]
fn memory_flags_add_a_breakdown_per_artifact_and_device() {
    // The README's offline example.
    let out = preflight(&[
        "plan",
        &local("tiny-qwen3-moe-sharded"),
        "--devices",
        "l4",
        "--context",
        "4096",
        "--sequences",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "context 4,096 × 8 sequences · KV cache bf16 · weights as stored",
        // 2 layers × 2 (K, V) × 2 KV heads × 16 head_dim × 2 bytes = 256 bytes a token.
        "256 B/token · 2 full × 128 B × 4,096 tokens (× 8 sequences)",
        "MEMORY  vLLM 0.19.0 · total",
        // `--devices l4` named no count: the smallest that fits, said as a finding.
        "memory.devices_chosen          memory: 1 × l4 is the smallest count that fits",
        "device 0     l4",
        "FITS · max context that fits: 4,096 tokens × 8 sequences",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    assert!(!text.lines().any(|l| l.ends_with(' ')), "no trailing spaces:\n{text}");
}

#[test]
fn without_memory_flags_the_output_has_no_memory() {
    let out = preflight(&["plan", "--json", &local("tiny-llama")]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v.get("memory").is_none());
    assert!(v["artifacts"][0].get("memory").is_none());
}

#[test]
fn json_carries_the_memory_block() {
    let out = preflight(&[
        "plan",
        "--json",
        &local("tiny-qwen3-moe-sharded"),
        "--devices",
        "80GiB:2",
        "--sequences",
        "2",
        "--kv-dtype",
        "fp8",
        "--gpu-utilization",
        "0.5",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let m = &v["memory"];
    assert_eq!(m["tensor_parallel"], 2);
    assert_eq!(m["gpu_utilization"], 0.5);
    assert_eq!(m["per_device"].as_array().expect("devices").len(), 2);
    assert_eq!(m["per_device"][0]["usable_bytes"], 40u64 << 30);
    assert_eq!(m["fits"], true);
    let a = &v["artifacts"][0]["memory"];
    assert_eq!(a["kv_dtype"], "fp8");
    assert_eq!(a["context"], 4096);
    // fp8: 2 layers × 2 × 2 KV heads × 16 × 1 byte.
    assert_eq!(a["kv_cache_bytes_per_token"], 128);
    assert_eq!(a["kv_cache_bytes"], 128 * 4096 * 2);
    assert_eq!(a["per_rank"]["kv_cache_bytes"], 128 * 4096);
}

#[test]
fn bad_memory_options_exit_two_before_reading_anything() {
    let missing = "/nonexistent/checkpoint";
    for (args, needle) in [
        (&["--context", "0"][..], "invalid --context"),
        (&["--sequences", "0"][..], "invalid --sequences"),
        (
            &["--devices", "h100-80gb:4", "--tensor-parallel", "3"][..],
            "invalid --tensor-parallel",
        ),
        (&["--devices", "h900"][..], "h900"),
        (&["--gpu-utilization", "0"][..], "gpu_utilization"),
        (&["--kv-dtype", "int3"][..], "int3"),
        (&["--context", "18446744073709551616"][..], "--context"),
        (&["--engine", "tgi"][..], "`tgi` is not one of vllm, sglang, llama.cpp"),
        (&["--gpu-utilization", "1.5"][..], "1.5 is not a share in (0, 1]"),
        (&["--mem-fraction-static", "0"][..], "mem_fraction_static"),
        (
            &["--engine", "vllm", "--ubatch", "256"][..],
            "`ubatch` is a llama.cpp option, and the engine is vllm",
        ),
        (
            &["--max-num-seqs", "8", "--flash-attn", "on"][..],
            "`flash_attn` is a llama.cpp option and `max_num_seqs` a vllm one",
        ),
        (&["--block-size", "24"][..], "24 is not one of vLLM's block sizes"),
        (&["--compare", "weights-dtype=bf16"][..], "at least two values"),
        (&["--compare", "context=1,2"][..], "`context` cannot be compared"),
    ] {
        let mut argv = vec!["plan", missing];
        argv.extend_from_slice(args);
        let out = preflight(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// A degree the model does not split is a usage error naming the degrees that do — not a
/// verdict that the checkpoint is inadmissible.
#[test]
fn a_degree_that_cannot_split_the_model_is_bad_usage() {
    let args = [
        "plan",
        &local("tiny-llama"),
        "--devices",
        "l4:3",
        "--tensor-parallel",
        "3",
    ];
    let out = preflight(&args);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid --tensor-parallel: 3-way tensor parallelism cannot split"),
        "{stderr}"
    );
    assert!(
        stderr.contains("degrees that split it and divide the 3 devices: 1"),
        "{stderr}"
    );
    let out = preflight(&[&args[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("an error document");
    assert_eq!(v["error"]["code"], "invalid_options", "{v}");
}

#[test]
fn a_device_count_that_cannot_split_the_model_gets_the_largest_degree_that_does() {
    // tiny-llama's heads do not split 3 ways; with no degree given, 3 devices hold 3 replicas.
    let out = preflight(&["plan", "--json", &local("tiny-llama"), "--devices", "l4:3"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["memory"]["tensor_parallel"], 1);
    assert_eq!(v["memory"]["per_device"].as_array().map(Vec::len), Some(3));
    let codes: Vec<&str> = v["artifacts"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"memory.tensor_parallel_chosen"), "{codes:?}");
}

#[test]
fn the_bundled_gguf_plans_llama_cpps_kv_cache_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B-GGUF", dir.path());
    let gguf = repo.join("Qwen3-8B-Q4_K_M.gguf");
    let out = preflight(&["plan", "--json", gguf.to_str().expect("utf8"), "--context", "40960"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    // llama.cpp logs `CPU KV buffer size = 5760.00 MiB` for this file at n_ctx 40960.
    assert_eq!(v["artifacts"][0]["memory"]["kv_cache_bytes"], 5760u64 << 20);
}

#[test]
fn llama_cpp_offload_flags_place_layers_and_show_host_ram() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B-GGUF", dir.path());
    let gguf = repo.join("Qwen3-8B-Q4_K_M.gguf");
    let gguf = gguf.to_str().expect("utf8");
    let flags = [
        "--context",
        "8192",
        "--devices",
        "l4:2",
        "--gpu-layers",
        "20",
        "--tensor-split",
        "3,1",
        "--override-tensor",
        "output=CUDA1",
        "--no-kv-offload",
        "--host-memory",
        "64GiB",
    ];
    let mut argv = vec!["plan", gguf];
    argv.extend_from_slice(&flags);
    let out = preflight(&argv);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "host RAM",
        "/ 64.00 GiB host memory  fits",
        "estimate",
        "-ngl 20 -ts 3,1",
        "-nkvo",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    argv.push("--json");
    let out = preflight(&argv);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let m = &v["memory"];
    // Every layer's cells on the host (`--no-kv-offload`); the devices' and the host's terms
    // sum to the block's.
    assert_eq!(m["host"]["kv_cache_bytes"], m["kv_cache_bytes"]);
    let devices: u64 = m["per_device"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| d["total_bytes"].as_u64().expect("n"))
        .sum();
    assert_eq!(
        devices + m["host"]["total_bytes"].as_u64().expect("n"),
        m["total_bytes"].as_u64().expect("n")
    );
    assert_eq!(m["offload"]["gpu_layers"], 20);
    // The same knobs under vLLM are bad usage, naming the option.
    let out = preflight(&["plan", gguf, "--engine", "vllm", "--n-cpu-moe", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("n_cpu_moe"));
}

/// A Mac by chip and memory: llama.cpp sizes Metal by macOS's working set, said in the text
/// and in `--json`; host RAM is what the GPU leaves of the same memory; `--working-set` gives
/// the Mac's own figure; vLLM does not run there.
#[test]
fn apple_silicon_plans_against_the_working_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("Qwen/Qwen3-8B-GGUF", dir.path());
    let gguf = repo.join("Qwen3-8B-Q4_K_M.gguf");
    let gguf = gguf.to_str().expect("utf8");
    let out = preflight(&["plan", gguf, "--context", "8192", "--devices", "m4-max-40c=36GB"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "of the working set macOS gives Metal (m4-max-40c 27.00 GiB of 36.00 GiB unified; --working-set)",
        "/ 27.00 GiB usable  fits",
        "unified memory left  fits",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let json = |extra: &[&str]| -> Value {
        let mut argv = vec![
            "plan",
            "--json",
            gguf,
            "--context",
            "8192",
            "--devices",
            "m4-max-40c=36GB",
        ];
        argv.extend_from_slice(extra);
        let out = preflight(&argv);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let v = json(&[]);
    let device = &v["memory"]["per_device"][0];
    assert_eq!(device["working_set_bytes"], 27u64 << 30);
    assert_eq!(device["usable_bytes"], 27u64 << 30);
    assert_eq!(v["memory"]["host"]["unified_memory_bytes"], 36u64 << 30);
    let raised = json(&["--working-set", "30GiB"]);
    assert_eq!(raised["memory"]["per_device"][0]["usable_bytes"], 30u64 << 30);
    // vLLM has no Metal backend: it does not run on the Mac (exit 4, the finding named).
    let out = preflight(&["plan", gguf, "--engine", "vllm", "--devices", "m3-ultra=192GB"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("runtime.device_unsupported"));
    // A working set without a Mac, or a Mac without its memory, is bad usage.
    for args in [
        ["--devices", "l4", "--working-set", "20GiB"],
        ["--devices", "m3-ultra", "--context", "4096"],
    ] {
        let mut argv = vec!["plan", gguf];
        argv.extend_from_slice(&args);
        assert_eq!(preflight(&argv).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn deepseek_v3_on_eight_h200s_fits_its_whole_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("deepseek-ai/DeepSeek-V3", dir.path());
    let out = preflight(&["plan", repo.to_str().expect("utf8"), "--devices", "h200:8"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "68.62 KiB/token · 61 mla × 1.12 KiB × 163,840 tokens",
        "devices 0–7  h200",
        "FITS · max context that fits: 163,840 tokens × 1 sequence",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

/// Llama-3.1-8B as a download leaves it (sparse files of full size), and the CLI run on it.
fn llama_8b(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    let repo = materialize("meta-llama/Llama-3.1-8B", dir.path());
    let mut argv = vec!["plan", repo.to_str().expect("utf8")];
    argv.extend_from_slice(args);
    preflight(&argv)
}

#[test]
fn a_plan_that_does_not_fit_exits_four_and_says_so_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = llama_8b(&dir, &["--devices", "l4:1", "--context", "128k"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().is_some_and(|l| l.starts_with("DOES NOT FIT")),
        "{text}"
    );
}

/// The first artifact's finding codes.
fn codes(v: &Value) -> Vec<String> {
    v["artifacts"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_plan_with_under_five_percent_to_spare_is_a_tight_fit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = |context: &str| -> Value {
        let out = llama_8b(&dir, &["--json", "--devices", "l4:1", "--context", context]);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let roomy = json("4096");
    assert_eq!(roomy["memory"]["fits"], true);
    assert!(!codes(&roomy).contains(&"memory.tight_fit".to_owned()));
    // At the longest context that fits, the KV cache takes what the budget had left.
    let longest = roomy["memory"]["max_context_that_fits"].as_u64().expect("longest");
    let tight = json(&longest.to_string());
    assert_eq!(tight["memory"]["fits"], true);
    let device = &tight["memory"]["per_device"][0];
    let headroom = device["headroom_bytes"].as_i64().expect("headroom");
    assert!(headroom >= 0 && headroom * 20 < device["usable_bytes"].as_i64().expect("usable"));
    assert!(
        codes(&tight).contains(&"memory.tight_fit".to_owned()),
        "{:?}",
        codes(&tight)
    );
    // Said in sizes a person reads, not raw byte counts.
    let detail = tight["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(tight["artifacts"][0]["findings"].as_array().into_iter().flatten())
        .find(|f| f["code"] == "memory.tight_fit")
        .and_then(|f| f["detail"].as_str())
        .expect("detail")
        .to_owned();
    assert!(detail.contains(" GiB usable") && !detail.contains("bytes"), "{detail}");
}

#[test]
fn compare_plans_each_value_side_by_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "--devices",
        "h100-80gb:1",
        "--context",
        "32k",
        "--compare",
        "weights-dtype=bf16,fp8",
    ];
    let out = llama_8b(&dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("COMPARE --weights-dtype"), "{text}");
    assert!(text.contains("  bf16 ") && text.contains("  fp8 "), "{text}");
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&args);
    let v: Value = serde_json::from_slice(&llama_8b(&dir, &json_args).stdout).expect("json");
    let rows = v["compare"]["rows"].as_array().expect("rows");
    assert_eq!(v["compare"]["option"], "weights_dtype");
    let figure = |row: &Value, key: &str| row["memory"]["per_rank"][key].as_u64().expect(key);
    let pool = |row: &Value| row["memory"]["kv_pool_bytes"].as_u64().expect("pool");
    assert_eq!(
        (rows[0]["value"].as_str(), rows[1]["value"].as_str()),
        (Some("bf16"), Some("fp8"))
    );
    // FP8 halves the linear layers' bytes, and the budget that frees goes to the KV pool.
    assert!(figure(&rows[1], "weights_bytes") < figure(&rows[0], "weights_bytes"));
    assert_eq!(
        pool(&rows[1]) - pool(&rows[0]),
        figure(&rows[0], "weights_bytes") - figure(&rows[1], "weights_bytes")
    );
}

/// `--compare` exits as its worst row would; `auto` is a KV dtype it compares; an option
/// given and compared at once is refused rather than one of them ignored.
#[test]
fn compare_exits_as_its_worst_row_and_refuses_a_doubled_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Llama-3.1-8B on an L4 at 64k fits in FP8 (its pool holds ~100k tokens) and not in
    // BF16 (~48k): one row says NO, and the status says so.
    let out = llama_8b(
        &dir,
        &[
            "--devices",
            "l4:1",
            "--context",
            "64k",
            "--compare",
            "weights-dtype=fp8,bf16",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NO"), "{text}");
    assert_eq!(out.status.code(), Some(4), "{text}");
    let auto = llama_8b(
        &dir,
        &[
            "--devices",
            "h100-80gb:1",
            "--context",
            "8k",
            "--compare",
            "kv-dtype=auto,fp8",
        ],
    );
    assert_eq!(auto.status.code(), Some(0), "{}", String::from_utf8_lossy(&auto.stderr));
    let doubled = llama_8b(
        &dir,
        &[
            "--devices",
            "h100-80gb:1",
            "--weights-dtype",
            "int4",
            "--compare",
            "weights-dtype=bf16,fp8",
        ],
    );
    assert_eq!(doubled.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&doubled.stderr).contains("given and compared at once"),
        "{}",
        String::from_utf8_lossy(&doubled.stderr)
    );
}

#[test]
fn compare_kv_dtype_doubles_the_tokens_a_pool_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "--json",
        "--devices",
        "h100-80gb:1",
        "--context",
        "32k",
        "--compare",
        "kv-dtype=bf16,fp8",
    ];
    let out = llama_8b(&dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["compare"]["option"], "kv_dtype");
    let rows = v["compare"]["rows"].as_array().expect("rows");
    let memory = |i: usize, key: &str| rows[i]["memory"][key].as_u64().expect(key);
    // The KV dtype leaves the budget alone: the same pool, each token in half the bytes.
    assert_eq!(memory(0, "kv_pool_bytes"), memory(1, "kv_pool_bytes"));
    let (bf16, fp8) = (memory(0, "kv_pool_tokens"), memory(1, "kv_pool_tokens"));
    assert!(fp8.abs_diff(2 * bf16) <= 32, "whole pages of 16 tokens: {bf16} → {fp8}");
}

#[test]
fn a_plan_on_devices_prints_its_throughput_bounds_as_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = llama_8b(&dir, &["--devices", "h100-80gb:1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("BOUNDS"))
        .unwrap_or_else(|| panic!("no bounds line: {text}"));
    assert!(
        line.contains("upper bounds, not predictions") && line.contains("decode") && line.contains("prefill"),
        "{line}"
    );
    // Tens of thousands of tokens a second read with their separators (`prefill ≤ 40,121`).
    let prefill = line.split("prefill ≤ ").nth(1).expect("a prefill bound");
    let figure = prefill.split(' ').next().expect("figure");
    assert!(
        figure.contains(',') && figure.replace(',', "").parse::<u64>().is_ok(),
        "{line}"
    );
}

#[test]
fn llama_3_1_70b_on_two_h100s_at_32k_does_not_fit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("meta-llama/Llama-3.1-70B", dir.path());
    let out = preflight(&[
        "plan",
        repo.to_str().expect("utf8"),
        "--devices",
        "h100-80gb:2",
        "--context",
        "32k",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("DOES NOT FIT"), "{text}");
}

#[test]
fn llama_3_1_70b_on_two_h100s_is_a_tight_fit_at_the_longest_context_that_fits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = materialize("meta-llama/Llama-3.1-70B", dir.path());
    let plan = |context: &str| -> (Option<i32>, Value) {
        let out = preflight(&[
            "plan",
            repo.to_str().expect("utf8"),
            "--json",
            "--devices",
            "h100-80gb:2",
            "--context",
            context,
        ]);
        let v = serde_json::from_slice(&out.stdout).expect("json");
        (out.status.code(), v)
    };
    let (status, at_32k) = plan("32k");
    assert_eq!(status, Some(4));
    let longest = at_32k["memory"]["max_context_that_fits"].as_u64().expect("longest");
    assert!(longest < 32_768, "{longest}");
    // There the KV pool takes what the budget had left: it fits, with under 5% to spare.
    let (status, tight) = plan(&longest.to_string());
    assert_eq!(status, Some(0));
    assert_eq!(tight["memory"]["fits"], true);
    assert!(
        codes(&tight).contains(&"memory.tight_fit".to_owned()),
        "{:?}",
        codes(&tight)
    );
}

/// The per-rank line names every term its total sums — non-torch memory included — and the
/// artifact's lines add up to its total, in the JSON as in the text.
#[test]
fn the_per_rank_line_lists_every_term_it_sums() {
    let args = [
        "plan",
        &local("tiny-llama"),
        "--devices",
        "l4:2",
        "--tensor-parallel",
        "2",
        "--context",
        "1024",
    ];
    let out = preflight(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rank_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("per rank"))
        .expect("a per-rank line");
    for term in ["weights", "RoPE tables", "KV", "activations", "non-torch"] {
        assert!(rank_line.contains(term), "{term} missing from {rank_line:?}");
    }
    let out = preflight(&[&args[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let m = &v["artifacts"][0]["memory"];
    let terms = [
        "weights_bytes",
        "buffers_bytes",
        "kv_cache_bytes",
        "activation_bytes",
        "non_torch_bytes",
    ];
    let sum: u64 = terms.iter().map(|t| m[t].as_u64().expect(t)).sum();
    assert_eq!(m["total_bytes"].as_u64(), Some(sum));
    assert!(
        m["non_torch_bytes"].as_u64() > Some(0),
        "vLLM at TP 2 charges NCCL and workspaces: {m}"
    );
    let rank = &m["per_rank"];
    let sum: u64 = terms.iter().map(|t| rank[t].as_u64().expect(t)).sum();
    assert_eq!(rank["total_bytes"].as_u64(), Some(sum));
}

/// More sequences than the pool has pages for: the line says the sequences do not fit, not
/// that "not even one token" does beside a pool of hundreds of thousands.
#[test]
fn too_many_sequences_say_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = llama_8b(
        &dir,
        &["--devices", "h100-80gb:1", "--context", "4k", "--sequences", "100000"],
    );
    assert_eq!(out.status.code(), Some(4));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("100,000 sequences do not fit even at one token each"),
        "{text}"
    );
    assert!(!text.contains("not even one token fits"), "{text}");
}

/// A device given by size reads as a size everywhere, not as its byte count.
#[test]
fn a_device_given_by_size_reads_as_a_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = llama_8b(&dir, &["--devices", "24GiB:1", "--context", "4k"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("engines       on a 24.00 GiB device"), "{text}");
    // The hint to name the part gives the size back as one would type it.
    assert!(text.contains("rtx-4090=24GiB"), "{text}");
}

/// Each `--compare` value is a whole plan: a list longer than the cap is refused before any
/// source is read (issue 23: 10,000 values were 10,000 plans), and one at the cap still plans.
#[test]
fn compare_refuses_more_values_than_it_plans_side_by_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kv_dtypes = |n: usize| {
        ["auto", "fp8", "bf16", "f16"]
            .iter()
            .cycle()
            .take(n)
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    };
    let plan = |n: usize| {
        let compare = format!("kv-dtype={}", kv_dtypes(n));
        llama_8b(
            &dir,
            &["--devices", "h100-80gb:1", "--context", "8k", "--compare", &compare],
        )
    };
    let flood = plan(10_000);
    assert_eq!(flood.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&flood.stderr);
    assert!(stderr.contains("10000 values; at most 16"), "{stderr}");
    let capped = plan(16);
    assert_eq!(
        capped.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&capped.stderr)
    );
}

/// An H100 "80 GB" shows CUDA 79.19 GiB; vLLM's 90% is of that, 71.27 GiB.
#[test]
fn usable_says_it_is_a_share_of_what_cuda_sees() {
    let tiny = fixtures().join("local/tiny-llama");
    let out = preflight(&["plan", &tiny.to_string_lossy(), "--devices", "h100-80gb:1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("usable: 90% of what CUDA sees (h100-80gb 79.19 GiB of 80.00 GiB)"),
        "{text}"
    );
    assert!(text.contains("/ 71.27 GiB usable"), "{text}");
    let out = preflight(&["plan", &tiny.to_string_lossy(), "--devices", "80GiB:1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("usable: 90% of each device"), "{text}");
}
