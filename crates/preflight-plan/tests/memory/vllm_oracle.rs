//! The plan against what vLLM itself logged at startup (`fixtures/oracles/vllm-startup-logs.jsonl`,
//! a copy of the shared oracle: one record per startup, each with its source). Every record is
//! either planned and held to the bounds — weights a rank within 1%, KV pool within 3%,
//! the pool in tokens within 3% — or skipped with its reason; the table of all of them is
//! `docs/memory.md`'s, regenerated with `UPDATE_DOCS=1`.

use serde_json::Value;

use crate::support::{GIB, fixtures, plan_with};

/// Records whose model has the same tensors as a bundled fixture under another name.
const SAME_TENSORS: &[(&str, &str)] = &[("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B")];

/// The engine version whose accounting is modelled (DECISIONS: vLLM 0.19.0).
const MODELLED: &str = "0.19.0";

const WEIGHTS_TOLERANCE: f64 = 0.01;
const POOL_TOLERANCE: f64 = 0.03;

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

/// Why a record is outside what the engine-memory plan models, or `None` to plan it.
fn skipped(r: &Value) -> Option<String> {
    let text = |k: &str| r[k].as_str().unwrap_or("");
    if text("engine") != "vllm" {
        return Some(format!("{} (not modelled yet)", text("engine")));
    }
    if text("engine_version") != MODELLED {
        return Some(format!(
            "vLLM {} (modelled: {MODELLED})",
            r["engine_version"].as_str().unwrap_or("unknown")
        ));
    }
    if r["pp"].as_u64().unwrap_or(1) > 1 {
        return Some("pipeline parallel".into());
    }
    if text("dtype").contains("float32") {
        return Some("--dtype float32".into());
    }
    if r["quantization"].as_str() == Some("fp8") {
        return Some("runtime --quantization fp8".into());
    }
    if r["gpu_total_gib"].as_f64().is_none() || r["kv_cache_gib"].as_f64().is_none() {
        return Some("device total or KV pool not logged".into());
    }
    if fixture_for(text("model")).is_none() {
        return Some("no bundled fixture".into());
    }
    None
}

struct Row {
    id: u64,
    model: String,
    setup: String,
    /// (predicted, logged) weights GiB a rank, KV pool GiB, pool tokens.
    figures: Option<[(f64, f64); 3]>,
    skipped: Option<String>,
}

fn plan_record(r: &Value) -> [(f64, f64); 3] {
    let model = r["model"].as_str().expect("model");
    let repo = fixture_for(model).expect("fixture");
    let total = (r["gpu_total_gib"].as_f64().expect("total") * GIB as f64).round() as u64;
    let tp = r["tp"].as_u64().unwrap_or(1);
    let mut options = serde_json::json!({
        "engine": "vllm",
        "devices": format!("{total}:{tp}"),
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
    let verdict = plan_with(&[&repo], &options.to_string());
    let memory = verdict
        .memory
        .unwrap_or_else(|| panic!("record {}: no memory", r["id"]));
    let rank = memory.per_rank.expect("placed");
    let gib = |b: u64| b as f64 / GIB as f64;
    [
        (gib(rank.weights_bytes), r["weights_gib"].as_f64().expect("weights")),
        (
            gib(memory.kv_pool_bytes.expect("pool")),
            r["kv_cache_gib"].as_f64().expect("kv"),
        ),
        (
            memory.kv_pool_tokens.expect("tokens") as f64,
            r["kv_cache_tokens"].as_f64().expect("tokens"),
        ),
    ]
}

fn rows() -> Vec<Row> {
    records()
        .iter()
        .map(|r| {
            let skipped = skipped(r);
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
                figures: skipped.is_none().then(|| plan_record(r)),
                skipped,
            }
        })
        .collect()
}

fn error(predicted: f64, logged: f64) -> f64 {
    (predicted - logged) / logged
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "<!-- generated from fixtures/oracles/vllm-startup-logs.jsonl by crates/preflight-plan/tests/memory/vllm_oracle.rs -->\n\n\
         | record | model | setup | weights GiB a rank: predicted / logged (error) | KV pool GiB | KV pool tokens |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        match (&row.figures, &row.skipped) {
            (Some(f), _) => {
                let cell = |(p, l): (f64, f64), decimals: usize| {
                    format!("{p:.decimals$} / {l:.decimals$} ({:+.2}%)", error(p, l) * 100.0)
                };
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} |\n",
                    row.id,
                    row.model,
                    row.setup,
                    cell(f[0], 2),
                    cell(f[1], 2),
                    cell(f[2], 0)
                ));
            }
            (None, Some(why)) => {
                out.push_str(&format!(
                    "| {} | {} | {} | skipped: {why} | | |\n",
                    row.id, row.model, row.setup
                ));
            }
            (None, None) => unreachable!("a row is planned or skipped"),
        }
    }
    out
}

#[test]
fn vllm_0_19_startups_are_met_within_bounds() {
    let rows = rows();
    let planned: Vec<&Row> = rows.iter().filter(|r| r.figures.is_some()).collect();
    assert!(
        planned.len() >= 8,
        "the Llama-3.1-8B sweep alone has 8 plannable records"
    );
    for row in &planned {
        let [weights, pool, tokens] = row.figures.expect("planned");
        let id = row.id;
        assert!(
            error(weights.0, weights.1).abs() <= WEIGHTS_TOLERANCE,
            "record {id}: weights {weights:?}"
        );
        assert!(
            error(pool.0, pool.1).abs() <= POOL_TOLERANCE,
            "record {id}: KV pool {pool:?}"
        );
        assert!(
            error(tokens.0, tokens.1).abs() <= POOL_TOLERANCE,
            "record {id}: tokens {tokens:?}"
        );
    }
}

/// `docs/memory.md` carries the table of every record between two markers.
#[test]
fn the_docs_table_is_current() {
    let path = fixtures().join("../docs/memory.md");
    let doc = std::fs::read_to_string(&path).expect("docs/memory.md");
    let (begin, end) = ("<!-- vllm-oracle-table -->\n", "<!-- /vllm-oracle-table -->");
    let (Some(start), Some(stop)) = (doc.find(begin), doc.find(end)) else {
        panic!("docs/memory.md lacks the {begin:?} … {end:?} markers");
    };
    let want = table(&rows());
    let have = &doc[start + begin.len()..stop];
    if std::env::var_os("UPDATE_DOCS").is_some() && have != want {
        let updated = format!("{}{want}{}", &doc[..start + begin.len()], &doc[stop..]);
        std::fs::write(&path, updated).expect("write docs/memory.md");
        return;
    }
    assert!(
        have == want,
        "docs/memory.md's oracle table is stale: run UPDATE_DOCS=1 cargo test -p preflight-plan --test memory vllm_oracle"
    );
}
