//! The plan against what vLLM itself logged at startup (`fixtures/oracles/vllm-startup-logs.jsonl`,
//! a copy of the shared oracle: one record per startup, each with its source). Every record is
//! either planned and held to the bounds — weights a rank within 1%, KV pool within 3%,
//! the pool in tokens within 3% — or skipped with its reason; the table of all of them is
//! `docs/memory.md`'s, regenerated with `UPDATE_DOCS=1`.

use serde_json::Value;

use crate::support::{GIB, doc_section_is_current, fixtures, plan_with};

/// Records whose model has the same tensors as a bundled fixture under another name (the
/// llm-d sweep spells RedHatAI's repo `…-fp8-dynamic`: Hub repo names are case-insensitive).
const SAME_TENSORS: &[(&str, &str)] = &[
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
    (
        "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic",
        "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
    ),
];

/// The engine version whose accounting is modelled (vLLM 0.19.0, the version the startup logs cover: docs/memory.md).
const MODELLED: &str = "0.19.0";

/// Records the plan is known to miss, each with the term it lacks; shown in the table beside
/// the log, not held, until that term is modelled.
const KNOWN_MISSES: &[(u64, &str)] = &[];

const WEIGHTS_TOLERANCE: f64 = 0.01;
const POOL_TOLERANCE: f64 = 0.03;
/// The mean |error| over every held record, per figure (the bound; llm-d-planner
/// publishes 0.89% on weights and 0.34% on the KV cache over its own sweep).
const MEAN_TOLERANCE: f64 = 0.003;

/// Mean |error| of the held rows' weights, KV pool and KV pool tokens, and how many rows.
fn mean_errors(rows: &[Row]) -> ([f64; 3], usize) {
    let held: Vec<[Figure; 3]> = rows
        .iter()
        .filter(|r| matches!(r.assessed, Assessed::Held))
        .filter_map(|r| r.figures)
        .collect();
    let mut sums = [0.0; 3];
    for figures in &held {
        for (sum, (predicted, logged)) in sums.iter_mut().zip(figures) {
            *sum += error(*predicted, logged.expect("held rows are logged")).abs();
        }
    }
    (sums.map(|s| s / held.len().max(1) as f64), held.len())
}

fn records() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("oracles/vllm-startup-logs.jsonl")).expect("oracle records");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// The bundled fixture standing for a record's model, if any.
fn fixture_for(model: &str) -> Option<String> {
    let repo = SAME_TENSORS
        .iter()
        .find(|(m, _)| *m == model)
        .map_or(model, |(_, fixture)| fixture);
    let packed = fixtures()
        .join("packed")
        .join(format!("{}.tar.gz", repo.replace('/', "--")));
    (fixtures().join("hub").join(repo).exists() || packed.exists()).then(|| repo.to_owned())
}

/// The catalogue part a record's `gpu` label names, for records that log no device total
/// (an A100's 40 and 80 GB parts share their capability, which is all the weights need).
fn catalogue_device(r: &Value) -> Option<&'static str> {
    match r["gpu"].as_str()? {
        "A100" | "A100 80GB" => Some("a100-80gb"),
        _ => None,
    }
}

/// What the test does with a record.
enum Assessed {
    /// Planned and held to the bounds.
    Held,
    /// Planned and shown beside what was logged, not held, for the reason given: another
    /// vLLM version than the one modelled (how far its accounting lands), or a known miss.
    Compared(String),
    /// The modelled version, but the log gives no device total: only the weights a rank
    /// loads are held (planned on the catalogue part the log names).
    WeightsOnly,
    /// Outside what the plan models or can be checked against.
    Skipped(String),
}

fn assess(r: &Value) -> Assessed {
    let text = |k: &str| r[k].as_str().unwrap_or("");
    if text("engine") != "vllm" {
        return Assessed::Skipped(format!(
            "{} startup (only vLLM's accounting is held to logs)",
            text("engine")
        ));
    }
    if r["pp"].as_u64().unwrap_or(1) > 1 {
        return Assessed::Skipped("pipeline parallel".into());
    }
    if fixture_for(text("model")).is_none() {
        return Assessed::Skipped("no bundled fixture".into());
    }
    if r["gpu_total_gib"].as_f64().is_none() || r["kv_cache_gib"].as_f64().is_none() {
        // The weights a rank loads do not depend on the device: show them against the log.
        return match (
            r["weights_gib"].as_f64(),
            text("engine_version") == MODELLED,
            catalogue_device(r),
        ) {
            (Some(_), true, Some(_)) => Assessed::WeightsOnly,
            _ => Assessed::Skipped("device total or KV pool not logged".into()),
        };
    }
    if let Some((_, why)) = KNOWN_MISSES.iter().find(|(id, _)| r["id"].as_u64() == Some(*id)) {
        return Assessed::Compared((*why).to_owned());
    }
    if text("engine_version") != MODELLED {
        return Assessed::Compared(format!(
            "vLLM {}, not held: modelled {MODELLED}",
            r["engine_version"].as_str().unwrap_or("version unknown")
        ));
    }
    Assessed::Held
}

/// A figure: what the plan predicts, and what the engine logged (when it logged it).
type Figure = (f64, Option<f64>);

struct Row {
    id: u64,
    model: String,
    setup: String,
    /// Weights GiB a rank, KV pool GiB, pool tokens; `None` when skipped.
    figures: Option<[Figure; 3]>,
    assessed: Assessed,
}

fn plan_record(r: &Value) -> [Figure; 3] {
    let model = r["model"].as_str().expect("model");
    let repo = fixture_for(model).expect("fixture");
    let tp = r["tp"].as_u64().unwrap_or(1);
    let devices = match r["gpu_total_gib"].as_f64() {
        Some(total) => format!("{}:{tp}", (total * GIB as f64).round() as u64),
        // No logged total: the catalogue's part, whose capability picks the kernels (and
        // so how vLLM lays out quantized experts); only the weights are compared.
        None => format!("{}:{tp}", catalogue_device(r).expect("assessed WeightsOnly")),
    };
    let mut options = serde_json::json!({
        // The release whose accounting the records are held to, named as a user would.
        "engine": format!("vllm@{MODELLED}"),
        "devices": devices,
        "gpu_utilization": r["gpu_memory_utilization"].as_f64().expect("utilisation"),
        "context": r["max_model_len"].as_u64().expect("max_model_len"),
    });
    for knob in ["max_num_seqs", "max_num_batched_tokens", "block_size"] {
        if let Some(n) = r[knob].as_u64() {
            options[knob] = n.into();
        }
    }
    if let Some(kv) = r["kv_cache_dtype"].as_str().filter(|k| *k != "auto") {
        options["kv_dtype"] = kv.into();
    }
    // `--dtype float32`, as the engine config line prints it (`torch.float32`).
    if let Some(dtype) = r["dtype"].as_str().and_then(|d| d.strip_prefix("torch.")) {
        options["dtype"] = dtype.into();
    }
    // vLLM's online `--quantization fp8`: the linear layers' weights in FP8 at load.
    if r["quantization"].as_str() == Some("fp8") {
        options["weights_dtype"] = "fp8".into();
    }
    let verdict = plan_with(&[&repo], &options.to_string());
    let memory = verdict
        .memory
        .unwrap_or_else(|| panic!("record {}: no memory", r["id"]));
    let rank = memory.per_rank.expect("placed");
    let gib = |b: u64| b as f64 / GIB as f64;
    // "Model loading took" counts the module buffers (the RoPE tables) with the weights.
    [
        (gib(rank.weights_bytes + rank.buffers_bytes), r["weights_gib"].as_f64()),
        (gib(memory.kv_pool_bytes.expect("pool")), r["kv_cache_gib"].as_f64()),
        (
            memory.kv_pool_tokens.expect("tokens") as f64,
            r["kv_cache_tokens"].as_f64(),
        ),
    ]
}

fn rows() -> Vec<Row> {
    records()
        .iter()
        .map(|r| {
            let assessed = assess(r);
            Row {
                id: r["id"].as_u64().expect("id"),
                model: r["model"].as_str().unwrap_or("?").to_owned(),
                setup: format!(
                    "{} TP {} · util {} · len {} · kv {}",
                    r["gpu"].as_str().unwrap_or("?"),
                    r["tp"].as_u64().map_or("?".into(), |t| t.to_string()),
                    r["gpu_memory_utilization"]
                        .as_f64()
                        .map_or("?".into(), |u| u.to_string()),
                    r["max_model_len"].as_u64().map_or("?".into(), |l| l.to_string()),
                    r["kv_cache_dtype"].as_str().unwrap_or("auto"),
                ),
                figures: (!matches!(assessed, Assessed::Skipped(_))).then(|| plan_record(r)),
                assessed,
            }
        })
        .collect()
}

fn error(predicted: f64, logged: f64) -> f64 {
    (predicted - logged) / logged
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "<!-- generated from fixtures/oracles/vllm-startup-logs.jsonl by crates/preflight-plan/tests/plan/vllm_oracle.rs -->\n\n\
         | record | model | setup | weights + RoPE tables GiB a rank: predicted / logged (error) | KV pool GiB | KV pool tokens |\n|---|---|---|---|---|---|\n",
    );
    let cell = |(p, l): Figure, decimals: usize| match l {
        Some(l) => format!("{p:.decimals$} / {l:.decimals$} ({:+.2}%)", error(p, l) * 100.0),
        None => format!("{p:.decimals$} / not logged"),
    };
    for row in rows {
        let (model, figures) = match (&row.assessed, &row.figures) {
            (Assessed::Skipped(why), _) => {
                out.push_str(&format!(
                    "| {} | {} | {} | skipped: {why} | | |\n",
                    row.id, row.model, row.setup
                ));
                continue;
            }
            (Assessed::Held, Some(f)) => (row.model.clone(), f),
            (Assessed::Compared(why), Some(f)) => (format!("{} ({why})", row.model), f),
            (Assessed::WeightsOnly, Some(f)) => {
                out.push_str(&format!(
                    "| {} | {} (device total not logged: weights held) | {} | {} | | |\n",
                    row.id,
                    row.model,
                    row.setup,
                    cell(f[0], 2)
                ));
                continue;
            }
            (_, None) => unreachable!("a planned row has figures"),
        };
        out.push_str(&format!(
            "| {} | {model} | {} | {} | {} | {} |\n",
            row.id,
            row.setup,
            cell(figures[0], 2),
            cell(figures[1], 2),
            cell(figures[2], 0)
        ));
    }
    let ([weights, pool, tokens], held) = mean_errors(rows);
    out.push_str(&format!(
        "\nMean |error| over the {held} held records (vLLM {MODELLED}, planned with `--engine vllm@{MODELLED}`): \
         weights {:.2}%, KV pool {:.2}%, KV pool tokens {:.2}%.\n",
        weights * 100.0,
        pool * 100.0,
        tokens * 100.0
    ));
    out
}

#[test]
fn vllm_0_19_startups_are_met_within_bounds() {
    let rows = rows();
    let held: Vec<&Row> = rows.iter().filter(|r| matches!(r.assessed, Assessed::Held)).collect();
    assert!(held.len() >= 8, "the Llama-3.1-8B sweep alone has 8 plannable records");
    for row in rows.iter().filter(|r| matches!(r.assessed, Assessed::WeightsOnly)) {
        let (predicted, logged) = row.figures.expect("planned")[0];
        let logged = logged.expect("weights logged");
        assert!(
            error(predicted, logged).abs() <= WEIGHTS_TOLERANCE,
            "record {}: weights a rank predicted {predicted} against {logged} logged",
            row.id
        );
    }
    let (means, _) = mean_errors(&rows);
    for (mean, what) in means.into_iter().zip(["weights", "KV pool", "KV pool tokens"]) {
        assert!(mean <= MEAN_TOLERANCE, "mean |error| of {what} is {:.3}%", mean * 100.0);
    }
    for row in &held {
        let id = row.id;
        let figures = row.figures.expect("planned");
        for ((predicted, logged), (what, bound)) in figures.into_iter().zip([
            ("weights a rank", WEIGHTS_TOLERANCE),
            ("KV pool", POOL_TOLERANCE),
            ("KV pool tokens", POOL_TOLERANCE),
        ]) {
            let logged = logged.unwrap_or_else(|| panic!("record {id}: {what} not logged"));
            assert!(
                error(predicted, logged).abs() <= bound,
                "record {id}: {what} predicted {predicted} against {logged} logged"
            );
        }
    }
}

/// `docs/memory.md` carries the table of every record between two markers.
#[test]
fn the_docs_table_is_current() {
    doc_section_is_current("vllm-oracle-table", &table(&rows()), "vllm_oracle");
}
