//! The calibrated constants: what physics does not give — the fraction of a device's peak
//! bandwidth, FLOPs and links an engine's kernels achieve, and its fixed cost a step. Fitted by
//! `scripts/perf/calibrate.sh` on `oracles/perf/serving-measurements.jsonl.gz` (training rows
//! only) and compiled in from `data/performance.json`, each set with the rows it was fitted on
//! and its residuals on them (which give every estimate its range). The only fitted numbers in
//! preflight: memory is modelled from the engines' source, never fitted.

use std::sync::LazyLock;

use serde::Deserialize;

/// Fractions of peak and fixed costs one engine achieves on one device.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constants {
    pub memory_efficiency: f64,
    pub compute_efficiency: f64,
    /// The routed experts' share of peak FLOPs: grouped GEMMs of a few hundred tokens an
    /// expert, with their routing, gather and scatter, run well below a dense GEMM's.
    pub expert_compute_efficiency: f64,
    /// Of the scale-up link's bandwidth, against the bytes a ring all-reduce sends
    /// (`2 (n − 1)/n` of the activations): above 1 where the switch reduces (NVLink SHARP,
    /// which NCCL uses on NVSwitch systems) and each byte crosses the link once.
    pub link_efficiency: f64,
    pub collective_latency_s: f64,
    pub step_overhead_s: f64,
    /// What each layer adds to a step past its bytes and FLOPs: kernel launches and the gaps
    /// between them, which CUDA graphs shorten but do not remove.
    pub layer_overhead_s: f64,
    /// A closed loop's clients start together and their prompts arrive in waves: the share of
    /// that wave's prefill time (half of all the clients' prompts, on average) a request's
    /// TTFT carries beyond the steady state's. A property of how benchmarks start, not of
    /// the device: one wave in ten when each client sends ten requests.
    pub burst_share: f64,
    /// What a request waits before its prompt's first step and after its first token, past
    /// any step: admission, tokenization, the HTTP stream's first chunk.
    pub request_overhead_s: f64,
}

/// `measured ÷ estimated` on the rows a set was fitted on, 10th to 90th percentile, per metric:
/// the range an estimate is given with.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residuals {
    pub output_tokens_per_s: Spread,
    pub tpot: Spread,
    pub ttft: Spread,
}

/// One fitted set: an engine on a device (`device` null: the engine on every device it was
/// measured on, used where no set of its own exists).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    pub engine: String,
    pub device: Option<String>,
    /// The weights' compute type the set was fitted on (`bf16`, `fp8`, `fp4`), null: any.
    pub dtype: Option<String>,
    pub constants: Constants,
    pub residuals: Residuals,
    /// Ids of the measurement rows it was fitted on.
    pub fitted_on: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct File {
    sets: Vec<Set>,
}

static SETS: LazyLock<Vec<Set>> = LazyLock::new(|| {
    let file: File = serde_json::from_str(include_str!("../../data/performance.json"))
        .expect("data/performance.json is valid (a unit test parses it)");
    file.sets
});

/// How closely the set used matches the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Fitted on this engine, device and compute type.
    Exact,
    /// Fitted on this engine and device, another compute type.
    OtherDtype,
    /// Fitted on this engine on other devices.
    OtherDevice,
}

/// The set for `engine` on `device` computing in `dtype`: the most specific one fitted.
/// `None` when the engine was never calibrated.
pub fn lookup(engine: &str, device: &str, dtype: &str) -> Option<(&'static Set, Coverage)> {
    let sets = SETS.iter().filter(|s| s.engine == engine);
    let on_device = |s: &&Set| s.device.as_deref() == Some(device);
    sets.clone()
        .find(|s| on_device(s) && s.dtype.as_deref() == Some(dtype))
        .map(|s| (s, Coverage::Exact))
        .or_else(|| sets.clone().find(on_device).map(|s| (s, Coverage::OtherDtype)))
        .or_else(|| {
            sets.clone()
                .find(|s| s.device.is_none())
                .map(|s| (s, Coverage::OtherDevice))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_is_physical_and_names_its_rows() {
        assert!(!SETS.is_empty());
        for set in SETS.iter() {
            let c = set.constants;
            for share in [c.memory_efficiency, c.compute_efficiency, c.expert_compute_efficiency] {
                assert!(share > 0.0 && share <= 1.0, "{set:?}");
            }
            // A ring sends 2 (n − 1)/n of the data; an in-switch reduction no less than once.
            assert!(c.link_efficiency > 0.0 && c.link_efficiency <= 2.0, "{set:?}");
            assert!(c.collective_latency_s >= 0.0 && c.step_overhead_s >= 0.0, "{set:?}");
            assert!(c.layer_overhead_s >= 0.0, "{set:?}");
            assert!((0.0..=1.0).contains(&c.burst_share), "{set:?}");
            assert!(c.request_overhead_s >= 0.0, "{set:?}");
            assert!(!set.fitted_on.is_empty(), "{set:?}");
            let r = &set.residuals;
            for s in [r.output_tokens_per_s, r.tpot, r.ttft] {
                assert!(s.low > 0.0 && s.low <= s.high, "{set:?}");
            }
        }
    }
}
