//! The plan against every buffer llama.cpp itself logged (llama-cpp-python 0.3.36, CPU backend,
//! header stubs of the very files loaded), from two oracles:
//! - `fixtures/oracles/llamacpp/` (the shared one): five GGUFs of real dimensions — gpt-oss,
//!   Llama, Qwen3-MoE, Gemma 3;
//! - `fixtures/oracles/llamacpp-graphs/` (measured by this project with
//!   `scripts/llamacpp/measure.py`): DeepSeek-V3 (`deepseek2`), Phi-3-mini, Qwen3.5-35B-A3B and
//!   Qwen3.5-0.8B (`qwen35moe`, `qwen35`), Nemotron-H-56B (`nemotron_h`), Nemotron-3-Nano
//!   (`nemotron_h_moe`), GLM-4.5-Air (`glm4moe`), Mistral-Small-3.1 and a Ministral 3 form of it
//!   (`mistral3`), Llama 4 Scout (`llama4`, windowed and `swa_full`) and two shapes of it
//!   (Maverick's experts and dense layers; no window), Qwen2.5-7B (`qwen2`), Qwen2-57B-A14B
//!   (`qwen2moe`), Gemma-2-2B-it (`gemma2`).
//!
//! Weights, KV and recurrent state must be exact; compute + output exact where the
//! architecture's graph is replayed, else within 5% with flash attention and 10% without —
//! unified or not, windowed or `swa_full`. Rows the oracle itself skipped (its RAM cap) carry
//! no figures.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use preflight_formats::facts::ArtifactFacts;
use preflight_plan::plan;
use serde_json::Value;

use crate::support::{MIB, fixtures, options};

/// llama.cpp logs MiB with two decimals: a figure is exact if it rounds to the logged one.
const LOGGED_PRECISION_MIB: f64 = 0.005;

/// Tolerances on compute + output where it is estimated (ggml-alloc's largest stage, not its
/// placement).
const WITH_FLASH_ATTN: f64 = 0.05;
const WITHOUT_FLASH_ATTN: f64 = 0.10;

/// Architectures whose llama.cpp graph the planner replays through ggml-alloc: compute +
/// output must round to the logged figures (each logged to 0.01 MiB).
const REPLAYED: &[&str] = &[
    "gpt-oss",
    "llama",
    "qwen3moe",
    "gemma3",
    "phi3",
    "nemotron_h",
    "nemotron_h_moe",
    "deepseek2",
    "qwen35",
    "qwen35moe",
    "mistral3",
    "glm4moe",
    "llama4",
    "qwen2",
    "qwen2moe",
    "gemma2",
];

/// The oracles' directories under `fixtures/oracles/`.
const SHARED: &str = "llamacpp";
const GRAPHS: &str = "llamacpp-graphs";

fn oracle_dir(oracle: &str) -> PathBuf {
    fixtures().join("oracles").join(oracle)
}

fn rows(oracle: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(oracle_dir(oracle).join("llamacpp-oracle.jsonl")).expect("oracle");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// Each stub's facts (a file name is unique across both oracles), parsed once.
pub fn facts(file: &str) -> ArtifactFacts {
    static CACHE: OnceLock<BTreeMap<String, ArtifactFacts>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let mut all = BTreeMap::new();
        for oracle in [SHARED, GRAPHS] {
            for row in rows(oracle).iter().filter(|r| r["model_load"] != true) {
                let name = row["gguf_file"].as_str().expect("file").to_owned();
                if all.contains_key(&name) {
                    continue;
                }
                let dir = oracle_dir(oracle);
                let size: u64 = std::fs::read_to_string(dir.join(format!("{name}.size")))
                    .expect("size")
                    .trim()
                    .parse()
                    .expect("a size");
                let stub = preflight_testhub::facts::gguf_stub(&dir.join(format!("{name}.stub.gz")), size);
                all.insert(name, stub);
            }
        }
        all
    });
    cache[file].clone()
}

/// A measured row preflight can be held against, and why not otherwise.
fn skip_reason(row: &Value) -> Option<&'static str> {
    match () {
        _ if row["model_load"] == true => Some("model load line"),
        _ if row["ok"] != true => Some("not measured (the oracle's RAM cap)"),
        _ => None,
    }
}

/// What preflight predicts for one row, in bytes: (weights, KV, compute + output).
struct Predicted {
    weights: u64,
    kv: u64,
    activation: u64,
    /// Each recurrent-state group's element types, conv (`R`) then state (`S`).
    state_dtypes: Vec<[String; 2]>,
}

fn predict(row: &Value) -> Predicted {
    let sequences = row["n_seq_max"].as_u64().expect("n_seq_max");
    let requested = row["n_ctx_requested"].as_u64().expect("n_ctx");
    // `--context` is per sequence; the oracle asked llama.cpp for n_ctx = context × sequences
    // (a stream is `pad256(n_ctx / sequences)` cells either way).
    let json = format!(
        r#"{{"engine": "llama.cpp", "context": {}, "sequences": {sequences}, "flash_attn": {}, "batch": {}, "ubatch": {}, "kv_unified": {}, "swa_full": {}}}"#,
        requested.div_ceil(sequences),
        row["flash_attn"],
        row["n_batch"],
        row["n_ubatch"],
        row["kv_unified"],
        row["swa_full"],
    );
    let file = row["gguf_file"].as_str().expect("file");
    let verdict = plan(&[facts(file)], &options(&json)).expect("valid options");
    // Headers of files llama.cpp loaded: every check the planner makes of a GGUF (shapes
    // against keys, each block's tensors against its kind) passes on them.
    let blocking: Vec<_> = verdict.artifacts[0]
        .findings
        .iter()
        .filter(|f| f.severity == preflight_plan::Severity::Blocking)
        .collect();
    assert!(blocking.is_empty(), "{file}: {blocking:#?}");
    let memory = verdict.artifacts[0]
        .memory
        .clone()
        .unwrap_or_else(|| panic!("{file}: no memory: {:#?}", verdict.artifacts[0].findings));
    assert!(!memory.lower_bound, "{file}: the planner refused the architecture");
    Predicted {
        weights: memory.weights_bytes,
        kv: memory.kv_cache_bytes,
        activation: memory.activation_bytes,
        state_dtypes: memory
            .kv_cache
            .iter()
            .filter_map(|g| g.state_dtypes.as_ref())
            .map(|d| [d.conv.clone(), d.recurrent.clone()])
            .collect(),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

fn logged(row: &Value, field: &str) -> f64 {
    row[field].as_f64().unwrap_or_else(|| panic!("{field}"))
}

#[test]
fn every_row_of_the_shared_oracle_matches_what_llama_cpp_allocated() {
    // Every measured line (`oracles/llamacpp/README.md`: 186 runs, 24 skipped by its RAM cap).
    holds_against(SHARED, 186);
}

#[test]
fn every_row_of_the_graphs_oracle_matches_what_llama_cpp_allocated() {
    // 15 GGUFs × 4 contexts × 3 sequence settings × flash attention on and off, and the three
    // windowed stubs' (two Llama 4, Gemma 2) 24 again with `swa_full` off.
    holds_against(GRAPHS, 432);
}

/// Every measured row of `oracle`: weights, KV and state exact, compute + output exact where
/// replayed and within tolerance where estimated; `held` rows in all.
fn holds_against(oracle: &str, want_held: usize) {
    let rows = rows(oracle);
    let mut table = String::from(
        "| file | n_ctx × seqs | cache | FA | weights MiB (pred / logged) | KV MiB (pred / logged) | compute + output MiB (pred / logged) | error |\n|---|---|---|---|---|---|---|---|\n",
    );
    let (mut held, mut replayed, mut misses) = (0, 0, Vec::new());
    for row in &rows {
        if skip_reason(row).is_some() {
            continue;
        }
        held += 1;
        let p = predict(row);
        let flash = row["flash_attn"] == true;
        let (unified, swa_full) = (row["kv_unified"] == true, row["swa_full"] == true);
        let sliding = row["caches"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["role"] == "SWA"));
        let cache = match (unified, swa_full && sliding) {
            (false, false) => "",
            (true, false) => "unified",
            (false, true) => "swa_full",
            (true, true) => "unified, swa_full",
        };
        let activation_logged = logged(row, "compute_mib") + logged(row, "output_mib");
        let error = (mib(p.activation) - activation_logged) / activation_logged;
        table.push_str(&format!(
            "| {} | {} × {} | {cache} | {} | {:.2} / {} | {:.2} / {} | {:.2} / {:.2} | {:+.1}% |\n",
            row["gguf_file"].as_str().unwrap_or("?"),
            row["n_ctx_requested"],
            row["n_seq_max"],
            if flash { "on" } else { "off" },
            mib(p.weights),
            row["model_mapped_mib"],
            mib(p.kv),
            row["kv_mib"],
            mib(p.activation),
            activation_logged,
            error * 100.0,
        ));
        let at = format!(
            "{} at {} × {} {cache}, flash attention {flash}",
            row["gguf_file"], row["n_ctx_requested"], row["n_seq_max"]
        );
        if (mib(p.weights) - logged(row, "model_mapped_mib")).abs() >= LOGGED_PRECISION_MIB {
            misses.push(format!("weights {at}: {:.2} MiB", mib(p.weights)));
        }
        // Two logged figures, each rounded.
        if (mib(p.kv) - logged(row, "kv_mib") - logged(row, "rs_mib")).abs() > 2.0 * LOGGED_PRECISION_MIB {
            misses.push(format!("KV + state {at}: {:.2} MiB", mib(p.kv)));
        }
        // The types llama.cpp's recurrent memory logs (`R (f32)`, `S (f32)`), for every state group.
        let logged_state_dtypes: Vec<[String; 2]> = row["caches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["kind"] == "recurrent")
            .map(|c| [&c["type_r"], &c["type_s"]].map(|t| t.as_str().unwrap_or("?").to_owned()))
            .collect();
        let wrong_type = match logged_state_dtypes.first() {
            Some(logged) => p.state_dtypes.is_empty() || p.state_dtypes.iter().any(|d| d != logged),
            None => !p.state_dtypes.is_empty(),
        };
        if wrong_type {
            misses.push(format!(
                "state types {at}: {:?}, logged {logged_state_dtypes:?}",
                p.state_dtypes
            ));
        }
        let exact = REPLAYED.contains(&row["arch"].as_str().unwrap_or(""));
        if exact {
            replayed += 1;
            if (mib(p.activation) - activation_logged).abs() > 2.0 * LOGGED_PRECISION_MIB {
                misses.push(format!("{at}: replayed {:.2} MiB", mib(p.activation)));
            }
        }
        let tolerance = if flash { WITH_FLASH_ATTN } else { WITHOUT_FLASH_ATTN };
        if error.abs() > tolerance {
            misses.push(format!("{at}: {:+.1}%", error * 100.0));
        }
    }
    eprintln!("{table}");
    assert_eq!(held, want_held);
    assert!(misses.is_empty(), "outside tolerance:\n{}", misses.join("\n"));
    assert_eq!(replayed, held, "every architecture the oracle measured is replayed");
}

/// The Llama-3.1-8B Q4_K_M-like stub at 4,096 tokens on one L4, offloading `gpu_layers`.
fn offloaded(gpu_layers: Option<u64>) -> (preflight_plan::ArtifactMemory, preflight_plan::HostMemory) {
    let knob = gpu_layers.map_or(String::new(), |n| format!(r#", "gpu_layers": {n}"#));
    let json = format!(r#"{{"engine": "llama.cpp", "context": 4096, "devices": "l4:1"{knob}}}"#);
    let verdict = plan(&[facts("Llama-3.1-8B-Q4_K_M-like.gguf")], &options(&json)).expect("valid options");
    let host = verdict.memory.expect("memory").host.expect("host");
    (verdict.artifacts[0].memory.clone().expect("memory"), host)
}

/// Token embedding of the stub: 128,256 rows of 4,096 Q4_K elements, 16 blocks of 144 bytes.
const LLAMA_TOKEN_EMBD: u64 = 128_256 * 16 * 144;
/// The output buffer at one sequence: one f32 row of the 128,256-token vocabulary.
const LLAMA_OUTPUT: u64 = 128_256 * 4;
/// One layer's KV at 4,096 cells: 8 KV heads × 128 × (K + V) × f16.
const LLAMA_LAYER_KV: u64 = 4096 * 8 * 128 * 2 * 2;
/// The host compute buffer with every layer offloaded (an estimate): the embedding's rows of
/// the 512-token micro-batch, 512 × 4,096 × f32.
const LLAMA_INPUT_ROWS: u64 = 512 * 4096 * 4;

#[test]
fn offloading_keeps_the_token_embedding_and_the_output_buffer_in_host_ram() {
    let (m, host) = offloaded(None);
    let rank = m.per_rank.clone().expect("per rank");
    assert_eq!(host.weights_bytes, LLAMA_TOKEN_EMBD);
    assert_eq!(host.output_bytes, LLAMA_OUTPUT);
    assert_eq!(host.compute_bytes, LLAMA_INPUT_ROWS);
    assert_eq!(m.host_bytes, Some(LLAMA_TOKEN_EMBD + LLAMA_OUTPUT + LLAMA_INPUT_ROWS));
    assert_eq!(rank.weights_bytes, m.weights_bytes - LLAMA_TOKEN_EMBD);
    assert_eq!(rank.kv_cache_bytes, m.kv_cache_bytes);
}

#[test]
fn layers_gpu_layers_leaves_behind_stay_in_host_ram_with_their_kv() {
    // `--gpu-layers 17` of 32 layers + output: llama.cpp offloads the output layer and the
    // last 16 layers, so the first 16 and their KV stay on the host.
    let (all, all_host) = offloaded(None);
    let (some, host) = offloaded(Some(17));
    let rank = some.per_rank.clone().expect("per rank");
    assert_eq!(rank.kv_cache_bytes, 16 * LLAMA_LAYER_KV);
    assert_eq!(host.kv_cache_bytes, 16 * LLAMA_LAYER_KV);
    assert_eq!(rank.weights_bytes + host.weights_bytes, some.weights_bytes);
    assert!(host.weights_bytes > all_host.weights_bytes);
    assert_eq!(host.layers, 16);
    // The host runs layers now: it reserves the whole graph's compute buffer (an estimate).
    assert_eq!(
        host.compute_bytes,
        all.activation_bytes - LLAMA_OUTPUT - LLAMA_INPUT_ROWS
    );
    // `--gpu-layers 0`: nothing on the device, everything in host RAM.
    let (none, host) = offloaded(Some(0));
    let rank = none.per_rank.clone().expect("per rank");
    assert_eq!(
        (rank.weights_bytes, rank.kv_cache_bytes, rank.activation_bytes),
        (0, 0, 0)
    );
    assert_eq!(none.host_bytes, Some(none.total_bytes));
    assert_eq!(host.total_bytes, none.total_bytes);
}

#[test]
fn without_devices_everything_is_in_host_ram() {
    let json = r#"{"engine": "llama.cpp", "context": 4096}"#;
    let verdict = plan(&[facts("Llama-3.1-8B-Q4_K_M-like.gguf")], &options(json)).expect("valid options");
    let m = verdict.artifacts[0].memory.clone().expect("memory");
    assert_eq!(m.host_bytes, Some(m.total_bytes));
}

#[test]
fn several_devices_split_the_offloaded_layers_between_them() {
    // llama.cpp's default `--split-mode layer`, split by memory: two equal devices take
    // layers k/33 < 0.5 (k = 0…16, 17 layers) and the rest (15 layers and the output), each
    // with its layers' KV and a compute buffer of its own.
    let json = r#"{"engine": "llama.cpp", "context": 4096, "devices": "l4:2"}"#;
    let verdict = plan(&[facts("Llama-3.1-8B-Q4_K_M-like.gguf")], &options(json)).expect("valid options");
    let system = verdict.memory.expect("system");
    let kv: Vec<u64> = system.per_device.iter().map(|d| d.kv_cache_bytes).collect();
    assert_eq!(kv, [17 * LLAMA_LAYER_KV, 15 * LLAMA_LAYER_KV]);
    let layers: Vec<Option<u64>> = system.per_device.iter().map(|d| d.layers).collect();
    assert_eq!(layers, [Some(17), Some(16)]);
    assert_eq!(
        system.per_device[0].activation_bytes,
        system.per_device[1].activation_bytes
    );
}

#[test]
fn any_device_count_splits_layers_where_tensor_parallelism_could_not() {
    // gemma-3-1b's 4 heads and one KV head do not split three ways as tensors; llama.cpp
    // splits layers, so three devices are a plan, not a refusal.
    let json = r#"{"engine": "llama.cpp", "context": 4096, "devices": "l4:3"}"#;
    let verdict = plan(&[facts("gemma-3-1b-it-Q4_K_M-like.gguf")], &options(json)).expect("valid options");
    let codes: Vec<&str> = verdict.artifacts[0].findings.iter().map(|f| f.code.as_str()).collect();
    assert!(!codes.contains(&"memory.tensor_parallel_invalid"), "{codes:?}");
    let m = verdict.artifacts[0].memory.clone().expect("memory");
    assert!(m.per_rank.is_some());
    assert_eq!(verdict.memory.expect("system").per_device.len(), 3);
}

/// Settings the oracle did not vary — micro-batches of 256, 1,024 and 2,048 tokens, two and
/// three sequences (whose micro-batch llama.cpp rounds up to 513 tokens) — measured the same
/// way (`fixtures/llamacpp-gpt-oss-settings.jsonl`, fixtures/README.md says how): the
/// replayed graph lands on them too.
#[test]
fn gpt_oss_replay_holds_at_settings_the_oracle_did_not_vary() {
    holds_at_settings("llamacpp-gpt-oss-settings.jsonl", 6);
}

/// Three sequences round the 512-token micro-batch up to 513 while the last layer, cut to its
/// 512 output rows, runs its experts on those: Qwen3-MoE, GLM-4.5 and DeepSeek-V3's MoE.
#[test]
fn moe_replays_hold_where_the_last_layer_runs_fewer_rows_than_the_micro_batch() {
    holds_at_settings("llamacpp-moe-settings.jsonl", 16);
}

/// Compute + output to the logged 0.01 MiB on every row of `file` (under `fixtures/`).
fn holds_at_settings(file: &str, want: usize) {
    let text = std::fs::read_to_string(fixtures().join(file)).expect("measurements");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    assert_eq!(rows.len(), want);
    for row in &rows {
        let logged = logged(row, "compute_mib") + logged(row, "output_mib");
        let predicted = mib(predict(row).activation);
        assert!(
            (predicted - logged).abs() <= 2.0 * LOGGED_PRECISION_MIB,
            "{} at {} × {}: predicted {predicted:.2} MiB, llama.cpp {logged:.2}",
            row["gguf_file"],
            row["n_ctx_requested"],
            row["n_seq_max"]
        );
    }
}

/// A checkpoint in safetensors, planned for llama.cpp, is the graph its GGUF gets: its compute +
/// output is what llama.cpp logged for the converted file's (one sequence), whatever the
/// weights' dtype.
fn plans_the_graph_its_gguf_gets(repo: &str, gguf_file: &str, want: usize) {
    let rows = rows(GRAPHS);
    let gguf_rows = rows
        .iter()
        .filter(|r| r["gguf_file"] == gguf_file && r["n_seq_max"] == 1);
    let mut checked = 0;
    for row in gguf_rows {
        let json = format!(
            r#"{{"engine": "llama.cpp", "context": {}, "flash_attn": {}, "swa_full": {}}}"#,
            row["n_ctx_requested"], row["flash_attn"], row["swa_full"]
        );
        let m = crate::support::memory_of(repo, &json);
        assert!(m.estimated.is_empty(), "{repo} {json}: {:?}", m.estimated);
        let logged = logged(row, "compute_mib") + logged(row, "output_mib");
        let planned = mib(m.activation_bytes);
        assert!(
            (planned - logged).abs() <= 2.0 * LOGGED_PRECISION_MIB,
            "{repo} {json}: {planned:.2} MiB, llama.cpp {logged:.2}"
        );
        checked += 1;
    }
    assert_eq!(checked, want);
}

/// Gemma 2's config says what llama.cpp's `gemma2` rules say (a window every other layer,
/// both soft-caps), so its safetensors plan the graph the converted file got.
#[test]
fn a_gemma_2_checkpoint_plans_the_graph_its_gguf_gets() {
    plans_the_graph_its_gguf_gets("google/gemma-2-2b-it", "gemma-2-2b-it-Q8_0.gguf", 16);
}

/// `convert_hf_to_gguf` writes a Mistral as `mistral3`, llama's nodes.
#[test]
fn a_mistral_checkpoint_plans_the_graph_its_gguf_gets() {
    plans_the_graph_its_gguf_gets(
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        "Mistral-Small-3.1-24B-Instruct-2503-Q8_0.gguf",
        8,
    );
}

/// Scout's config says what llama.cpp's `llama4` rules say (an 8,192 chunk on the roped
/// layers, a NoPE layer every 4th, experts on every layer).
#[test]
fn a_llama_4_checkpoint_plans_the_graph_its_gguf_gets() {
    plans_the_graph_its_gguf_gets(
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "Llama-4-Scout-17B-16E-Instruct-Q8_0.gguf",
        16,
    );
}

/// Qwen2.5's config turns its window off (`use_sliding_window` false): `qwen2.cpp`'s graph.
#[test]
fn a_qwen2_checkpoint_plans_the_graph_its_gguf_gets() {
    plans_the_graph_its_gguf_gets("Qwen/Qwen2.5-7B", "Qwen2.5-7B-Q8_0.gguf", 8);
}

/// Qwen2-57B-A14B's config routes every layer and slides none, as llama.cpp's `qwen2moe` does.
#[test]
fn a_qwen2_moe_checkpoint_plans_the_graph_its_gguf_gets() {
    plans_the_graph_its_gguf_gets("Qwen/Qwen2-57B-A14B", "Qwen2-57B-A14B-Q8_0.gguf", 8);
}
