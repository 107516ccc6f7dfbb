//! `--compare OPTION=A,B,…`: one staging, one plan per value, and a side-by-side table of
//! what each costs — the what-if operators ask ("FP8 or BF16?") without re-reading anything.

use std::fmt::Write as _;

use preflight_formats::facts::ArtifactFacts;
use preflight_plan::{OptionsError, PlanOptions, Verdict};

use crate::units::{bytes, thousands};

/// The options `--compare` can vary, by their flag name.
const COMPARABLE: &[&str] = &["weights-dtype", "kv-dtype", "engine"];

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
    let (key, values) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not OPTION=VALUE,VALUE (e.g. weights-dtype=bf16,fp8)"))?;
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
            Ok(serde_json::json!({
                "value": value,
                "admissible": v.admissible,
                "memory": serde_json::to_value(&v.memory)?,
            }))
        })
        .collect::<serde_json::Result<Vec<_>>>()?;
    let table = serde_json::json!({ "compare": { "option": compare.option.replace('-', "_"), "rows": rows } });
    serde_json::to_string_pretty(&table)
}

pub fn text(compare: &Compare, verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "COMPARE --{}", compare.option);
    let header = [
        "value",
        "weights/rank",
        "KV pool/rank",
        "pool tokens",
        "concurrency",
        "fits",
        "max context",
    ];
    let mut rows: Vec<[String; 7]> = vec![header.map(str::to_owned)];
    for (value, v) in compare.values.iter().zip(verdicts) {
        let m = v.memory.as_ref();
        let rank = m.and_then(|m| m.per_rank.as_ref());
        let dash = || "—".to_owned();
        rows.push([
            value.clone(),
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
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
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
