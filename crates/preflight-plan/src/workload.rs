//! What a deployment must serve and how fast: the workload (`isl=1024,osl=1024,concurrency=64`,
//! or `…,rate=5` for an open loop) and the latency targets (`ttft=2s,tpot=50ms`). The CLI's
//! `--workload`/`--slo` and the API's `"workload"`/`"slo"` read the same text, so the two can
//! never disagree on what a value means; each serialises back to one canonical spelling (the
//! options' JSON is a cache key).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::counts::{MAX_CONTEXT, MAX_SEQUENCES, tokens};

/// Highest request rate accepted, requests a second: past any single deployment's capacity by
/// orders of magnitude, and it keeps every product of rates and token counts far from overflow.
const MAX_RATE: f64 = 1_000_000.0;

/// Longest latency target accepted: a day, in microseconds.
const MAX_LIMIT_US: u64 = 86_400 * 1_000_000;

/// The traffic: prompt and output lengths, and how requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Workload {
    /// Input (prompt) tokens a request.
    pub isl: u64,
    /// Output tokens a request.
    pub osl: u64,
    pub arrivals: Arrivals,
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arrivals {
    /// A closed loop: this many clients, each sending its next request when the last completes.
    Concurrency(u64),
    /// An open loop: requests a second, in thousandths (held whole so options hash exactly).
    RateMilli(u64),
}

impl Arrivals {
    /// Requests a second of an open loop.
    pub fn rate(self) -> Option<f64> {
        match self {
            Arrivals::RateMilli(milli) => Some(milli as f64 / 1000.0),
            Arrivals::Concurrency(_) => None,
        }
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut isl = None;
        let mut osl = None;
        let mut arrivals = None;
        for (key, value) in pairs(s, "workload")? {
            let slot_taken = |taken: bool| match taken {
                true => Err(format!("`{key}` is given twice")),
                false => Ok(()),
            };
            match key {
                "isl" | "osl" => {
                    let n = tokens(value).map_err(|m| format!("{key}: {m}"))?;
                    if n == 0 || n > MAX_CONTEXT {
                        return Err(format!("{key}: must be 1 to {MAX_CONTEXT} tokens, not {n}"));
                    }
                    let slot = if key == "isl" { &mut isl } else { &mut osl };
                    slot_taken(slot.is_some())?;
                    *slot = Some(n);
                }
                "concurrency" => {
                    slot_taken(arrivals.is_some())?;
                    let n: u64 = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_SEQUENCES).contains(n))
                        .ok_or_else(|| {
                            format!("concurrency: `{value}` is not a client count from 1 to {MAX_SEQUENCES}")
                        })?;
                    arrivals = Some(Arrivals::Concurrency(n));
                }
                "rate" => {
                    slot_taken(arrivals.is_some())?;
                    let rate: f64 = value
                        .parse()
                        .ok()
                        .filter(|r: &f64| r.is_finite() && *r > 0.0 && *r <= MAX_RATE)
                        .ok_or_else(|| {
                            format!("rate: `{value}` is not requests a second, above 0 and at most {MAX_RATE}")
                        })?;
                    let milli = (rate * 1000.0).round() as u64;
                    if milli == 0 {
                        return Err(format!(
                            "rate: {value} requests a second rounds to none (the finest rate is 0.001)"
                        ));
                    }
                    arrivals = Some(Arrivals::RateMilli(milli));
                }
                other => {
                    return Err(format!(
                        "`{other}` is not a workload key: isl, osl, and concurrency (closed loop) or rate (requests a second, open loop)"
                    ));
                }
            }
        }
        let (Some(isl), Some(osl)) = (isl, osl) else {
            return Err(
                "give both isl and osl (prompt and output tokens a request), e.g. isl=1024,osl=1024,concurrency=64"
                    .into(),
            );
        };
        if isl.saturating_add(osl) > MAX_CONTEXT {
            return Err(format!(
                "isl + osl is more than the {MAX_CONTEXT} tokens a request accepted"
            ));
        }
        let arrivals = arrivals.ok_or_else(|| {
            "give concurrency=N (N clients, a closed loop) or rate=R (R requests a second, an open loop)".to_owned()
        })?;
        Ok(Workload { isl, osl, arrivals })
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "isl={},osl={},", self.isl, self.osl)?;
        match self.arrivals {
            Arrivals::Concurrency(n) => write!(f, "concurrency={n}"),
            Arrivals::RateMilli(milli) => write!(f, "rate={}", thousandths(milli)),
        }
    }
}

impl TryFrom<String> for Workload {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Workload> for String {
    fn from(w: Workload) -> String {
        w.to_string()
    }
}

/// What an engine schedules a workload with, per replica (each engine's module gives its own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scheduler {
    /// Requests running at once at most (vLLM `max_num_seqs`, SGLang `max_running_requests`).
    pub max_running: u64,
    /// Tokens one step may carry (vLLM `max_num_batched_tokens`, SGLang `chunked_prefill_size`).
    pub step_tokens: u64,
    /// The KV pool, in tokens.
    pub pool_tokens: u64,
    /// Prompt chunks ride in the decode steps (vLLM's chunked prefill), rather than in
    /// prefill batches of their own that the decode waits for (SGLang without
    /// `--enable-mixed-chunk`).
    pub mixes_prefill: bool,
}

/// A latency a target bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first (inter-token latency).
    Tpot,
    /// End to end: the first token's wait plus every later token.
    E2e,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::E2e => "e2e",
        }
    }
}

/// Percentiles a target may name: the median unless said.
const PERCENTILES: &[u8] = &[50, 90, 95, 99];

/// One latency target: the metric's `percentile` must be at most `limit_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub metric: Metric,
    pub percentile: u8,
    pub limit_us: u64,
}

impl Target {
    pub fn limit_ms(self) -> f64 {
        self.limit_us as f64 / 1000.0
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = match self.percentile {
            50 => String::new(),
            p => format!("_p{p}"),
        };
        write!(f, "{}{suffix}={}ms", self.metric.name(), thousandths(self.limit_us))
    }
}

/// Latency targets, each metric and percentile at most once, in a canonical order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Slo {
    pub targets: Vec<Target>,
}

impl FromStr for Slo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut targets: Vec<Target> = Vec::new();
        for (key, value) in pairs(s, "slo")? {
            let (metric, percentile) = match key.split_once("_p") {
                Some((metric, p)) => (metric, p),
                None => (key, "50"),
            };
            let metric = match metric {
                "ttft" => Metric::Ttft,
                "tpot" | "itl" => Metric::Tpot,
                "e2e" => Metric::E2e,
                _ => {
                    return Err(format!(
                        "`{key}` is not a target: ttft, tpot or e2e, with a percentile as ttft_p99 (p50, p90, p95, p99; the median unless said)"
                    ));
                }
            };
            let percentile = percentile
                .parse::<u8>()
                .ok()
                .filter(|p| PERCENTILES.contains(p))
                .ok_or_else(|| format!("`{key}`: the percentile is one of p50, p90, p95, p99"))?;
            let limit_us = duration_us(value).map_err(|m| format!("{key}: {m}"))?;
            if targets.iter().any(|t| t.metric == metric && t.percentile == percentile) {
                return Err(format!("`{key}` is given twice"));
            }
            targets.push(Target {
                metric,
                percentile,
                limit_us,
            });
        }
        targets.sort();
        Ok(Slo { targets })
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.targets.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{t}")?;
        }
        Ok(())
    }
}

impl TryFrom<String> for Slo {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Slo> for String {
    fn from(slo: Slo) -> String {
        slo.to_string()
    }
}

/// `key=value` pairs separated by commas; at least one, none empty.
fn pairs<'a>(s: &'a str, what: &str) -> Result<Vec<(&'a str, &'a str)>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    s.split(',')
        .map(|pair| {
            let pair = pair.trim();
            pair.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .ok_or_else(|| format!("`{pair}` is not key=value"))
        })
        .collect()
}

/// A duration with its unit (`50ms`, `2s`, `1.5s`, `800us`), in microseconds. A bare number
/// is refused: milliseconds and seconds are both common, and a guess would be a wrong target.
fn duration_us(s: &str) -> Result<u64, String> {
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000.0)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000.0)
    } else {
        return Err(format!("`{s}` needs a unit: ms or s (50ms, 2s)"));
    };
    let us = number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
        .map(|n| (n * scale).round())
        .filter(|us| *us >= 1.0 && *us <= MAX_LIMIT_US as f64)
        .ok_or_else(|| format!("`{s}` is not a latency from 1us to a day"))?;
    Ok(us as u64)
}

/// `milli` thousandths as the shortest decimal: 5000 → `5`, 2500 → `2.5`, 1 → `0.001`.
fn thousandths(milli: u64) -> String {
    let whole = milli / 1000;
    match milli % 1000 {
        0 => whole.to_string(),
        frac => format!("{whole}.{}", format!("{frac:03}").trim_end_matches('0')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_reads_its_keys_in_any_order_and_prints_canonically() {
        let w: Workload = "concurrency=64, osl=1k,isl=1024".parse().expect("valid");
        assert_eq!((w.isl, w.osl, w.arrivals), (1024, 1024, Arrivals::Concurrency(64)));
        assert_eq!(w.to_string(), "isl=1024,osl=1024,concurrency=64");
        let open: Workload = "isl=4000,osl=1000,rate=2.5".parse().expect("valid");
        assert_eq!(open.arrivals.rate(), Some(2.5));
        assert_eq!(open.to_string(), "isl=4000,osl=1000,rate=2.5");
    }

    #[test]
    fn a_workload_says_what_is_wrong_with_it() {
        let cases = [
            ("", "empty"),
            ("isl=1024,osl=1024", "concurrency=N"),
            ("isl=1024,concurrency=4", "both isl and osl"),
            ("isl=1024,osl=1024,concurrency=4,rate=2", "twice"),
            ("isl=0,osl=1,concurrency=1", "isl: must be 1"),
            ("isl=1,osl=1,rate=0", "rate: `0`"),
            ("isl=1,osl=1,rate=0.0001", "rounds to none"),
            ("isl=1,osl=1,concurrency=-3", "concurrency"),
            ("isl=1,osl=1,qps=3", "`qps` is not a workload key"),
            ("isl=1,osl", "not key=value"),
        ];
        for (text, want) in cases {
            let err = text.parse::<Workload>().expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn targets_take_units_and_percentiles_and_print_canonically() {
        let slo: Slo = "tpot=50ms,ttft=2s,ttft_p99=3.5s,e2e_p90=800us".parse().expect("valid");
        assert_eq!(slo.to_string(), "ttft=2000ms,ttft_p99=3500ms,tpot=50ms,e2e_p90=0.8ms");
        assert_eq!(slo.targets[0].limit_ms(), 2000.0);
        let again: Slo = slo.to_string().parse().expect("canonical text reads back");
        assert_eq!(again, slo);
    }

    #[test]
    fn prices_name_catalogued_gpus_in_dollars_an_hour() {
        let p: GpuPrices = "h200=3.5,h100-80gb-sxm=$2.49".parse().expect("valid");
        assert_eq!(p.to_string(), "h100-80gb=2.49,h200=3.5");
        let h200 = crate::devices::find("h200").expect("h200");
        assert_eq!(p.per_hour(h200), Some(3.5));
        for (text, want) in [
            ("warp=1", "not a catalogued"),
            ("h200=0", "above 0"),
            ("h200=1,h200=2", "twice"),
        ] {
            let err = text.parse::<GpuPrices>().expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn targets_say_what_is_wrong_with_them() {
        let cases = [
            ("ttft=2", "needs a unit"),
            ("ttft=-2s", "not a latency"),
            ("ttft_p42=2s", "percentile"),
            ("latency=2s", "not a target"),
            ("ttft=2s,ttft_p50=1s", "twice"),
            ("ttft=2days", "not a latency"),
        ];
        for (text, want) in cases {
            let err = text.parse::<Slo>().expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}

/// Dollars an hour for one GPU of each type (`h100-80gb=2.5,h200=3.5`), to cost a
/// recommendation; held in thousandths of a cent so options hash exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GpuPrices {
    prices: Vec<(String, u64)>,
}

impl GpuPrices {
    /// Dollars an hour for one GPU named `device` (or one of its names), if priced.
    pub fn per_hour(&self, device: &crate::devices::Device) -> Option<f64> {
        self.prices
            .iter()
            .find(|(name, _)| *name == device.name || device.aliases.iter().any(|a| a == name))
            .map(|(_, milli_cents)| *milli_cents as f64 / 100_000.0)
    }
}

impl FromStr for GpuPrices {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut prices: Vec<(String, u64)> = Vec::new();
        for (name, value) in pairs(s, "price list")? {
            let name = name.to_ascii_lowercase();
            let device = crate::devices::find(&name)
                .ok_or_else(|| format!("`{name}` is not a catalogued device (the prices are per GPU type)"))?;
            let dollars: f64 = value
                .trim_start_matches('$')
                .parse()
                .ok()
                .filter(|d: &f64| d.is_finite() && *d > 0.0 && *d < 1e6)
                .ok_or_else(|| format!("{name}: `{value}` is not dollars an hour above 0"))?;
            if prices.iter().any(|(n, _)| *n == device.name) {
                return Err(format!("{name} is priced twice"));
            }
            prices.push((device.name.clone(), (dollars * 100_000.0).round() as u64));
        }
        prices.sort();
        Ok(GpuPrices { prices })
    }
}

impl fmt::Display for GpuPrices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, milli_cents)) in self.prices.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            // Whole thousandths of a cent: five decimals of a dollar at most.
            let dollars = format!("{:.5}", *milli_cents as f64 / 100_000.0);
            write!(f, "{sep}{name}={}", dollars.trim_end_matches('0').trim_end_matches('.'))?;
        }
        Ok(())
    }
}

impl TryFrom<String> for GpuPrices {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<GpuPrices> for String {
    fn from(p: GpuPrices) -> String {
        p.to_string()
    }
}
