//! The plan against what SGLang itself logged at startup (`fixtures/oracles/sglang-startup-logs.jsonl`,
//! a copy of the shared oracle: one record per public startup, each with its quote and source).
//! Every record whose model has a bundled fixture is planned with `--engine sglang@0.5.23` and
//! held where its log can hold it:
//!
//! - **bytes a token costs on a rank**, wherever the log prints the pool's K and V sizes (or
//!   MLA's one `KV size`): SGLang allocates `#tokens + page_size` rows of every layer
//!   (`memory_pool.py`, `MHATokenToKVPool._create_buffers`: `(self.size + self.page_size,
//!   head_num, head_dim)`; MLA's `(self.size + self.page_size, 1, kv_cache_dim)`) and prints
//!   their bytes in GiB to two places (`_finalize_allocation_log`). Those two figures pin the
//!   bytes a token costs to an interval a few bytes wide; preflight's figure must lie in it —
//!   exactly, since the interval is narrower than one layer's bytes;
//! - **the pool in tokens within 1%**, where the pool is sized by memory (not capped by
//!   `--max-total-tokens`), the log says what SGLang budgets from (its free memory before
//!   loading, `pre_model_load_memory`) and `mem_fraction_static`, and the record's SGLang
//!   follows the pool rule preflight models (read from 0.3.5, 0.4.2, 0.4.3.post2,
//!   0.4.4.post1, 0.4.6.post2, 0.5.8.post1, 0.5.19 and 0.5.23: the same for these models).
//!
//! Everything else is skipped with its reason; the table of all of them is docs/memory.md's,
//! regenerated with `UPDATE_DOCS=1`.

use preflight_plan::findings::grouped;
use serde_json::Value;

use crate::support::{GIB, doc_section_is_current, fixtures, plan_with};

/// The release whose accounting is modelled, named as a user would (`sglang@0.5.23`).
const MODELLED: &str = "0.5.23";

const POOL_TOLERANCE: f64 = 0.01;

/// Rows SGLang allocates beyond `#tokens` (`size + page_size`): every record ran an attention
/// backend of page size 1 (FlashInfer, FA3 and Triton default to it; none passed `--page-size`).
const PAGE_SIZE: u64 = 1;

/// Records whose model has the tensors of a bundled fixture under another name: the same
/// architecture and widths, so the same weights and the same cache; what differs (an
/// instruct tune, `rope_theta`, a Llama 3 `rope_scaling`) changes neither. Where the pool is
/// held, the maximum position (the RoPE table) is the fixture's too: DeepSeek-R1-Distill-Qwen-7B
/// is Qwen2.5-Math-7B's layout, 131,072 positions as Qwen2.5-7B; DeepSeek-R1 is DeepSeek-V3's.
const SAME_TENSORS: &[(&str, &str)] = &[
    ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "Qwen/Qwen2.5-7B"),
];

/// Records that do not print `mem_fraction_static` but whose SGLang's default is known from
/// its source: record 40 (sglang PR #4760, 2025-03-25, one GPU) ran between 0.4.3.post2 and
/// 0.4.6.post2, whose `ServerArgs.__post_init__` both give 0.88 at TP 1 on a part of ≤ 80 GiB
/// (0.4.3.post2 `server_args.py` l.195-205, 0.4.4.post1 l.204-214, 0.4.6.post2 l.226-238).
const VERSION_DEFAULTS: &[(u64, f64)] = &[(40, 0.88)];

/// Records whose release sized the pool by another rule: planned under that rule, shown beside
/// the log, not held. Record 36 (sglang PR #4826, March 2025) ran when `ModelRunner.__init__`
/// multiplied `mem_fraction_static` by 0.95 for any multimodal model, a given fraction too
/// (0.4.4.post1 `model_executor/model_runner.py` l.242-243): 0.88 became 0.836. 0.5.23 lowers
/// only its own default for a VLM (`arg_groups/memory_hook.py` `adjust_mem_fraction_for_vlm`).
const RELEASE_RULES: &[(u64, f64, &str)] = &[(
    36,
    0.95,
    "SGLang of March 2025 took 0.95 × mem_fraction_static for a multimodal model",
)];

/// Records the pool is known to miss, each with the term it lacks; shown beside the log, not
/// held, until that term is modelled.
const KNOWN_MISSES: &[(u64, &str)] = &[
    (3, LOAD_HOLDS_MORE),
    (30, LOAD_HOLDS_MORE),
    (
        4,
        "SGLang 0.5.8.post1 on ROCm holds Kimi-K2.5's INT4 experts in more than the checkpoint's bytes (last column); its ROCm MoE layout is not modelled",
    ),
];

/// Small pools: what else SGLang's load leaves resident beside the weights and FP32 tables.
const LOAD_HOLDS_MORE: &str = "the load holds more than the weights and FP32 tables (last column: allocator rounding and what loading leaves resident, not modelled), over 1% of so small a pool";

/// The docs CI's cap (`--max-total-tokens 20480`, from about March 2025: the oracle's README).
const DOCS_CI_CAP: u64 = 20_480;

fn records() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("oracles/sglang-startup-logs.jsonl")).expect("oracle records");
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

/// The figure after `key` in a log line (`avail mem=78.81 GB` → 78.81).
fn figure_after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// What SGLang budgets from, in GiB: the free memory before the target model loads
/// (`pre_model_load_memory`; 0.4's `total_gpu_memory`), as its first `Load weight begin`
/// line prints it, else as `Load weight end` implies it (`avail mem` + `mem usage`, the two
/// readings SGLang subtracts).
fn baseline_gib(r: &Value) -> Option<f64> {
    let quote = r["quote"].as_str().unwrap_or("");
    let begin = quote
        .lines()
        .find(|l| l.contains("Load weight begin"))
        .and_then(|l| figure_after(l, "avail mem="));
    begin.or_else(|| Some(r["avail_after_weights_gib"].as_f64()? + r["weights_gib"].as_f64()?))
}

/// What the target model's load took, in GiB, when the log says.
fn loaded_gib(r: &Value) -> Option<f64> {
    let quote = r["quote"].as_str().unwrap_or("");
    let begin = quote
        .lines()
        .find(|l| l.contains("Load weight begin"))
        .and_then(|l| figure_after(l, "avail mem="));
    r["weights_gib"]
        .as_f64()
        .or_else(|| Some(begin? - r["avail_after_weights_gib"].as_f64()?))
}

/// The catalogue part a record's `gpu` label names (for the runtime verdict; its memory is
/// the logged baseline, given as `NAME=SIZE`).
fn catalogue_device(r: &Value) -> Option<&'static str> {
    let gpu = r["gpu"].as_str()?;
    [
        ("H100 80GB", "h100-80gb"),
        ("H200", "h200"),
        ("RTX 3090", "rtx-3090"),
        ("RTX 4090", "rtx-4090"),
        ("MI355X", "mi355x"),
        ("L4", "l4"),
    ]
    .into_iter()
    .find(|(label, _)| gpu.contains(label))
    .map(|(_, name)| name)
}

/// The pools one log line of `KV Cache is allocated` names: K + V (or MLA's KV) in GiB, as
/// printed, in the order SGLang allocated them. A hybrid SWA model logs two (0.5.8-era
/// `SWAKVPool.__init__` builds the SWA pool, then the full one: `swa_memory_pool.py` l.63, 72).
fn logged_pools(r: &Value) -> Vec<f64> {
    if let (Some(k), Some(v)) = (r["k_size_gib"].as_f64(), r["v_size_gib"].as_f64()) {
        return vec![k + v];
    }
    if let Some(kv) = r["kv_size_gib"].as_f64() {
        return vec![kv];
    }
    let mut pools: Vec<f64> = Vec::new();
    for line in r["quote"].as_str().unwrap_or("").lines() {
        if !line.contains("KV Cache is allocated") {
            continue;
        }
        if let (Some(k), Some(v)) = (figure_after(line, "K size: "), figure_after(line, "V size: "))
            && !pools.contains(&(k + v))
        {
            pools.push(k + v);
        }
    }
    pools
}

/// The bytes a token costs one pool on a rank, as the log pins them: the logged GiB are each
/// rounded to 0.01, over `#tokens + page_size` rows.
#[derive(Debug, Clone, Copy)]
struct Pinned {
    low: f64,
    high: f64,
}

impl Pinned {
    fn of(logged_gib: f64, figures: usize, tokens: u64) -> Pinned {
        // Each printed figure is within half a hundredth of a GiB.
        let slack = 0.005 * figures as f64;
        let rows = (tokens + PAGE_SIZE) as f64;
        Pinned {
            low: (logged_gib - slack) * GIB as f64 / rows,
            high: (logged_gib + slack) * GIB as f64 / rows,
        }
    }

    fn holds(&self, bytes: u64) -> bool {
        (self.low..=self.high).contains(&(bytes as f64))
    }
}

/// One pool's bytes a token: what preflight plans on a rank, over how many layers, and the
/// log's interval.
#[derive(Debug, Clone, Copy)]
struct PerToken {
    planned: u64,
    layers: u64,
    logged: Pinned,
}

/// What the test does with a record's pool.
enum Pool {
    /// Planned and held within [`POOL_TOLERANCE`].
    Held,
    /// Planned and shown beside the log, not held, for the reason given.
    Compared(String),
    Skipped(String),
}

struct Row {
    id: u64,
    model: String,
    setup: String,
    /// Skipped outright (no plan), with the reason.
    skipped: Option<String>,
    per_token: Vec<PerToken>,
    per_token_note: Option<String>,
    /// Tokens planned and logged.
    pool: Option<(f64, f64)>,
    pool_assessed: Pool,
    /// Weights and RoPE tables a rank: planned and logged, GiB.
    weights: Option<(f64, Option<f64>)>,
}

fn text<'a>(r: &'a Value, key: &str) -> &'a str {
    r[key].as_str().unwrap_or("")
}

/// Why a record's pool is not held, if it is not.
fn pool_assessment(r: &Value, fraction: Option<f64>, baseline: Option<f64>) -> Pool {
    let id = r["id"].as_u64().expect("id");
    let Some(tokens) = r["kv_cache_tokens"].as_u64() else {
        return Pool::Skipped("no pool logged".into());
    };
    if tokens == DOCS_CI_CAP && text(r, "source").contains("sgl-project.github.io") {
        return Pool::Skipped("capped: the docs CI passes --max-total-tokens 20480".into());
    }
    if fraction.is_none() {
        return Pool::Skipped("mem_fraction_static not logged (its release's default not known)".into());
    }
    if baseline.is_none() {
        return Pool::Skipped("the free memory SGLang budgets from is not logged".into());
    }
    if logged_pools(r).len() > 1 {
        return Pool::Skipped("hybrid SWA pools (sized by --swa-full-tokens-ratio)".into());
    }
    if let Some((_, _, why)) = RELEASE_RULES.iter().find(|(known, _, _)| *known == id) {
        return Pool::Compared((*why).to_owned());
    }
    if let Some((_, why)) = KNOWN_MISSES.iter().find(|(known, _)| *known == id) {
        return Pool::Compared((*why).to_owned());
    }
    Pool::Held
}

fn row(r: &Value) -> Row {
    let id = r["id"].as_u64().expect("id");
    let model = text(r, "model").to_owned();
    let tp = r["tp"].as_u64().unwrap_or(1);
    let fraction = r["mem_fraction_static"]
        .as_f64()
        .or_else(|| VERSION_DEFAULTS.iter().find(|(d, _)| *d == id).map(|(_, f)| *f));
    let baseline = baseline_gib(r);
    let setup = format!(
        "{} · TP {tp} · SGLang {} · mem_fraction_static {} · free before load {}",
        r["gpu"].as_str().map_or("?", |g| g.split(" (").next().unwrap_or(g)),
        r["engine_version"]
            .as_str()
            .map_or("?", |v| v.split(' ').next().unwrap_or(v)),
        fraction.map_or("?".into(), |f| format!("{f:.3}")),
        baseline.map_or("?".into(), |b| format!("{b:.2} GiB")),
    );
    let mut out = Row {
        id,
        model: model.clone(),
        setup,
        skipped: None,
        per_token: Vec::new(),
        per_token_note: None,
        pool: None,
        pool_assessed: Pool::Skipped(String::new()),
        weights: None,
    };
    let Some(repo) = fixture_for(&model) else {
        out.skipped = Some("no bundled fixture".into());
        return out;
    };
    let pools = logged_pools(r);
    let tokens = r["kv_cache_tokens"].as_u64();
    if tokens.is_none() {
        // Failed before the pool (DeepSeek-V4-Pro: the weights alone exceeded the share).
        out.skipped = Some(format!("no pool logged ({})", text(r, "outcome")));
        return out;
    }
    // `--tp T --dp D --enable-dp-attention`: D attention groups inside a TP group of T.
    let dp = r["dp"].as_u64().unwrap_or(1).max(1);
    let mut options = serde_json::json!({
        "engine": format!("sglang@{MODELLED}"),
        "tensor_parallel": tp / dp,
        "data_parallel": dp,
    });
    if let (Some(baseline), Some(fraction)) = (baseline, fraction) {
        let bytes = (baseline * GIB as f64).round() as u64;
        options["devices"] = match catalogue_device(r) {
            Some(name) => format!("{name}={bytes}:{tp}"),
            None => format!("{bytes}:{tp}"),
        }
        .into();
        let factor = RELEASE_RULES
            .iter()
            .find(|(known, _, _)| *known == id)
            .map_or(1.0, |(_, factor, _)| *factor);
        options["mem_fraction_static"] = (fraction * factor).into();
    }
    if let Some(context) = r["context_length"].as_u64() {
        options["context"] = context.into();
    }
    if let Some(kv) = r["kv_cache_dtype"].as_str().filter(|k| *k != "auto") {
        options["kv_dtype"] = kv.into();
    }
    let verdict = plan_with(&[&repo], &options.to_string());
    let memory = verdict.artifacts[0]
        .memory
        .as_ref()
        .unwrap_or_else(|| panic!("record {id}: no memory: {:#?}", verdict.artifacts[0].findings));
    // Per pool: the per-token groups preflight plans, their bytes a token on one rank (each
    // group's bytes over the ranks, the tokens it keeps and its layers).
    let group_bytes = |windowed: Option<bool>| {
        let groups = memory
            .kv_cache
            .iter()
            .filter(|g| g.bytes_per_token_per_layer.is_some())
            .filter(|g| windowed.is_none_or(|w| g.window.is_some() == w));
        let (mut bytes, mut layers) = (0u64, 0u64);
        for g in groups {
            let kept = g.tokens_per_sequence.expect("per-token group") * memory.sequences * tp;
            assert_eq!(g.bytes % kept, 0, "record {id}: whole rows");
            bytes += g.bytes / kept;
            layers += g.layers;
        }
        (bytes, layers)
    };
    let tokens = tokens.expect("pool");
    match pools.as_slice() {
        [] => out.per_token_note = Some("K/V sizes not logged".into()),
        [one] => {
            let (planned, layers) = group_bytes(None);
            let figures = if r["kv_size_gib"].is_null() { 2 } else { 1 };
            out.per_token.push(PerToken {
                planned,
                layers,
                logged: Pinned::of(*one, figures, tokens),
            });
        }
        [swa, full] => {
            for (logged, windowed) in [(swa, true), (full, false)] {
                let (planned, layers) = group_bytes(Some(windowed));
                out.per_token.push(PerToken {
                    planned,
                    layers,
                    logged: Pinned::of(*logged, 2, tokens),
                });
            }
        }
        _ => panic!("record {id}: more than two pools"),
    }
    let system = verdict.memory.as_ref().expect("system memory");
    let rank = system.per_rank.as_ref().expect("placed on ranks");
    let gib = |b: u64| b as f64 / GIB as f64;
    out.weights = Some((gib(rank.weights_bytes + rank.buffers_bytes), loaded_gib(r)));
    out.pool_assessed = pool_assessment(r, fraction, baseline);
    if !matches!(out.pool_assessed, Pool::Skipped(_)) {
        let planned = system.kv_pool_tokens.expect("pool tokens") as f64;
        out.pool = Some((planned, tokens as f64));
    }
    out
}

fn rows() -> Vec<Row> {
    records().iter().map(row).collect()
}

fn error(predicted: f64, logged: f64) -> f64 {
    (predicted - logged) / logged
}

/// Mean |error| of the held pools, and how many.
fn mean_pool_error(rows: &[Row]) -> (f64, usize) {
    let held: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| matches!(r.pool_assessed, Pool::Held))
        .filter_map(|r| r.pool)
        .collect();
    let sum: f64 = held.iter().map(|(p, l)| error(*p, *l).abs()).sum();
    (sum / held.len().max(1) as f64, held.len())
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "<!-- generated from fixtures/oracles/sglang-startup-logs.jsonl by crates/preflight-plan/tests/plan/sglang_oracle.rs -->\n\n\
         | record | model | setup | bytes a token on a rank, per pool: planned (a layer) / the log's interval | pool tokens: planned / logged (error) | weights + tables GiB a rank: planned / loaded |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        if let Some(why) = &row.skipped {
            out.push_str(&format!(
                "| {} | {} | {} | skipped: {why} | | |\n",
                row.id, row.model, row.setup
            ));
            continue;
        }
        let per_token = match (&row.per_token_note, row.per_token.as_slice()) {
            (Some(note), _) => note.clone(),
            (None, pools) => pools
                .iter()
                .map(|p| {
                    format!(
                        "{} ({}) / {}–{}",
                        grouped(p.planned),
                        grouped(p.planned / p.layers.max(1)),
                        grouped(p.logged.low.ceil() as u64),
                        grouped(p.logged.high.floor() as u64)
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        };
        let pool = match (&row.pool_assessed, row.pool) {
            (Pool::Skipped(why), _) => format!("not held: {why}"),
            (Pool::Held, Some((p, l))) => format!(
                "{} / {} ({:+.2}%)",
                grouped(p as u64),
                grouped(l as u64),
                error(p, l) * 100.0
            ),
            (Pool::Compared(why), Some((p, l))) => format!(
                "{} / {} ({:+.2}%; not held: {why})",
                grouped(p as u64),
                grouped(l as u64),
                error(p, l) * 100.0
            ),
            (_, None) => unreachable!("a planned pool has figures"),
        };
        let weights = match row.weights {
            Some((p, Some(l))) => format!("{p:.2} / {l:.2}"),
            Some((p, None)) => format!("{p:.2} / not logged"),
            None => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {per_token} | {pool} | {weights} |\n",
            row.id, row.model, row.setup
        ));
    }
    let (mean, held) = mean_pool_error(rows);
    let exact = rows.iter().filter(|r| !r.per_token.is_empty()).count();
    out.push_str(&format!(
        "\nPlanned with `--engine sglang@{MODELLED}`. Bytes a token held exactly on {exact} records; \
         pool tokens held within 1% on {held} records (mean |error| {:.2}%).\n",
        mean * 100.0
    ));
    out
}

#[test]
fn sglang_startups_are_met() {
    let rows = rows();
    let mut exact = 0;
    for row in &rows {
        for pool in &row.per_token {
            let PerToken {
                planned,
                layers,
                logged,
            } = *pool;
            assert!(
                logged.holds(planned),
                "record {}: {planned} bytes a token planned, the log says {:.1}–{:.1}",
                row.id,
                logged.low,
                logged.high
            );
            // The log pins the figure closer than one layer's bytes: no other count of layers
            // (nor a cache of another width) could pass.
            assert!(
                logged.high - logged.low < (planned / layers.max(1)) as f64,
                "record {}: the log's interval is too wide to hold the figure exactly",
                row.id
            );
            exact += 1;
        }
    }
    assert!(exact >= 10, "{exact} pools held exactly");
    let mut held = 0;
    for row in rows.iter().filter(|r| matches!(r.pool_assessed, Pool::Held)) {
        let (planned, logged) = row.pool.expect("planned");
        assert!(
            error(planned, logged).abs() <= POOL_TOLERANCE,
            "record {}: pool of {planned} tokens planned against {logged} logged",
            row.id
        );
        held += 1;
    }
    assert!(held >= 4, "the Llama-3.1-8B docs runs alone have four uncapped pools");
}

/// `docs/memory.md` carries the table of every record between two markers.
#[test]
fn the_docs_table_is_current() {
    doc_section_is_current("sglang-oracle-table", &table(&rows()), "sglang_oracle");
}
