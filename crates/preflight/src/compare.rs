//! `--compare OPTION=A,B,…`: one staging, one plan per value, and a side-by-side table of
//! what each costs — the what-if operators ask ("FP8 or BF16?", "H100 or H200?", "vLLM or
//! SGLang?") without re-reading anything. With `--workload`, each row adds its estimate.

use std::fmt::Write as _;

use preflight_formats::facts::ArtifactFacts;
use preflight_plan::{OptionsError, PerformanceLimit, PlanOptions, Verdict};

use crate::units::{bytes, thousands};

/// The options `--compare` can vary, by their flag name.
const COMPARABLE: &[&str] = &["weights-dtype", "kv-dtype", "engine", "devices"];

/// One option and the values to plan it at, each already a full set of options.
#[derive(Debug, Clone)]
pub struct Compare {
    option: &'static str,
    values: Vec<String>,
}

/// `weights-dtype=bf16,fp8`: the option must be comparable and every value valid for it.
/// Values one `--compare` may name: each is a whole plan and a column a person reads, and
/// every comparable option has fewer choices than this.
pub const MAX_COMPARED: usize = 16;

pub fn parse(s: &str) -> Result<Compare, String> {
    let (key, values) = s.split_once('=').ok_or_else(|| {
        format!("`{s}` is not OPTION=VALUE,VALUE (e.g. weights-dtype=bf16,fp8 or devices=h100-80gb:8,h200:8)")
    })?;
    let key = key.trim().trim_start_matches("--");
    let option = COMPARABLE
        .iter()
        .find(|c| **c == key || c.replace('-', "_") == key)
        .ok_or_else(|| format!("`{key}` cannot be compared; choose one of {}", COMPARABLE.join(", ")))?;
    let values: Vec<String> = values
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if values.len() < 2 {
        return Err(format!("`{s}`: give at least two values to compare"));
    }
    if values.len() > MAX_COMPARED {
        return Err(format!(
            "--compare {key}: {} values; at most {MAX_COMPARED} are compared side by side (each is a plan)",
            values.len()
        ));
    }
    let compare = Compare { option, values };
    compare.variants(&PlanOptions::default())?;
    Ok(compare)
}

impl Compare {
    /// The base options with the compared option set to each value in turn. The option may
    /// not also be given on its own (which would it be?); `kv-dtype=auto` is the model's own.
    pub fn variants(&self, base: &PlanOptions) -> Result<Vec<PlanOptions>, String> {
        let given = match self.option {
            "weights-dtype" => base.weights_dtype.is_some(),
            "kv-dtype" => base.kv_dtype.is_some(),
            "devices" => base.devices.is_some(),
            _ => base.engine.is_some(),
        };
        if given {
            return Err(format!(
                "--{0} is given and compared at once: drop --{0}, or add its value to --compare {0}=…",
                self.option
            ));
        }
        self.values
            .iter()
            .map(|value| {
                let mut options = base.clone();
                let parsed = match self.option {
                    "weights-dtype" => value.parse().map(|d| options.weights_dtype = Some(d)),
                    "kv-dtype" if value.eq_ignore_ascii_case("auto") => {
                        options.kv_dtype = None;
                        Ok(())
                    }
                    "kv-dtype" => value.parse().map(|d| options.kv_dtype = Some(d)),
                    // One deployment a value, counted: uncounted types ask for recommendations,
                    // a table of their own.
                    "devices" => value
                        .parse()
                        .and_then(|d: preflight_plan::Devices| match d.all_uncounted() {
                            true => Err(OptionsError {
                                option: "devices",
                                message: format!("`{value}`: give each compared deployment its count (e.g. {value}:8)"),
                            }),
                            false => {
                                options.devices = Some(d);
                                Ok(())
                            }
                        }),
                    _ => value.parse().map(|e| options.engine = Some(e)),
                };
                parsed.map_err(|e| format!("--compare {}: {}", self.option, e.message))?;
                options
                    .validate()
                    .map_err(|e| format!("--compare {}={value}: {}: {}", self.option, e.option, e.message))?;
                Ok(options)
            })
            .collect()
    }
}

/// Plan each variant; the verdicts in value order, or the first variant's options the
/// artifacts cannot honour.
pub fn plan(facts: &[ArtifactFacts], variants: &[PlanOptions]) -> Result<Vec<Verdict>, OptionsError> {
    variants.iter().map(|o| preflight_plan::plan(facts, o)).collect()
}

pub fn json(compare: &Compare, verdicts: &[Verdict]) -> serde_json::Result<String> {
    let rows = compare
        .values
        .iter()
        .zip(verdicts)
        .map(|(value, v)| {
            let mut row = serde_json::json!({
                "value": value,
                "admissible": v.admissible,
                "memory": serde_json::to_value(&v.memory)?,
            });
            if let Some(p) = &v.performance {
                row["performance"] = serde_json::to_value(p)?;
            }
            Ok(row)
        })
        .collect::<serde_json::Result<Vec<_>>>()?;
    let table = serde_json::json!({ "compare": { "option": compare.option.replace('-', "_"), "rows": rows } });
    serde_json::to_string_pretty(&table)
}

/// A row's memory cells, then (when the workload asks for them) its estimate's.
fn cells(value: &str, v: &Verdict, performance: bool) -> Vec<String> {
    let m = v.memory.as_ref();
    let rank = m.and_then(|m| m.per_rank.as_ref());
    let dash = || "—".to_owned();
    let mut row = vec![
        value.to_owned(),
        rank.map_or_else(dash, |r| bytes(r.weights_bytes)),
        m.and_then(|m| m.kv_pool_bytes).map_or_else(dash, bytes),
        m.and_then(|m| m.kv_pool_tokens).map_or_else(dash, thousands),
        m.and_then(|m| m.max_concurrency)
            .map_or_else(dash, |c| format!("{c:.2}")),
        match (v.admissible, m.and_then(|m| m.fits)) {
            (false, _) => "inadmissible".to_owned(),
            (true, Some(true)) => "yes".to_owned(),
            (true, Some(false)) => "NO".to_owned(),
            (true, None) => "—".to_owned(),
        },
        m.and_then(|m| m.max_context_that_fits).map_or_else(dash, thousands),
    ];
    if performance {
        let p = v.performance.as_ref();
        let whole = |x: f64| thousands(x.round() as u64);
        row.extend([
            p.map_or_else(dash, |p| format!("≈{}", whole(p.output_tokens_per_s))),
            p.map_or_else(dash, |p| format!("≈{}", whole(p.output_tokens_per_s_per_gpu))),
            p.and_then(|p| p.ttft_ms).map_or_else(dash, |t| format!("≈{t:.0}")),
            p.map_or_else(dash, |p| format!("≈{:.1}", p.tpot_ms)),
            p.map_or_else(dash, |p| limit(p.limited_by).to_owned()),
            p.and_then(|p| p.meets_slo)
                .map_or_else(dash, |met| if met { "yes" } else { "NO" }.to_owned()),
        ]);
    }
    row
}

/// What bounds the estimate, in a table cell's few words.
fn limit(limit: PerformanceLimit) -> &'static str {
    match limit {
        PerformanceLimit::MemoryBandwidth => "memory bandwidth",
        PerformanceLimit::Compute => "compute",
        PerformanceLimit::Communication => "communication",
        PerformanceLimit::KvCapacity => "KV capacity",
        PerformanceLimit::Scheduling => "scheduling",
    }
}

pub fn text(compare: &Compare, verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "COMPARE --{}", compare.option);
    let performance = verdicts.iter().any(|v| v.performance.is_some());
    let mut header = vec![
        "value",
        "weights/rank",
        "KV pool/rank",
        "pool tokens",
        "concurrency",
        "fits",
        "max context",
    ];
    if performance {
        header.extend(["tok/s", "tok/s/GPU", "TTFT ms", "TPOT ms", "limited by", "meets"]);
    }
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    rows.extend(
        compare
            .values
            .iter()
            .zip(verdicts)
            .map(|(value, v)| cells(value, v, performance)),
    );
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    if performance {
        let _ = writeln!(
            out,
            "  (≈: estimates from calibrated constants, each with its range in --json; docs/performance.md)"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ten_thousand_values_are_refused_before_any_plan() {
        let values: Vec<String> = (0..10_000).map(|_| "bf16".to_owned()).collect();
        let error = super::parse(&format!("weights-dtype={}", values.join(","))).expect_err("capped");
        assert!(error.contains("at most"), "{error}");
    }
}
