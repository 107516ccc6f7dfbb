//! Serving performance under a workload — an **estimate**, always labelled so, with a range.
//! Physics from what the plan knows exactly (each step's bytes, FLOPs and collective traffic
//! from the checkpoint's layers and the memory plan's per-rank bytes, the KV pool in tokens,
//! the engine's scheduler limits); the fractions of peak the engine achieves and its fixed
//! costs from `calibration` — the one place preflight fits constants. docs/performance.md gives
//! the model, the calibration, and its error on rows it was not fitted on.

pub(crate) mod calibration;
pub(crate) mod serving;
pub(crate) mod step;

use crate::memory::{ServingEngine, Share, part_bytes};
use crate::model::Model;
use crate::options::{DeviceGroup, MemoryEngine, PlanOptions};
use crate::runtimes::Weights;
use crate::throughput::{attention_per_key, peak};
use crate::verdict::{ArtifactMemory, Component, Memory, Parameters, Performance, PerformanceLimit, Range, SloCheck};
use crate::workload::{Metric, Workload};
pub use calibration::Constants;

use crate::workload::Scheduler;
use calibration::Coverage;
use serving::Limit;
use step::{Hardware, Profile};

/// What the estimate reads of one artifact's plan.
pub(crate) struct Inputs<'a> {
    pub model: &'a Model,
    pub memory: &'a ArtifactMemory,
    pub parameters: &'a Parameters,
    /// Stored bytes of the routed experts and of the token embedding.
    pub routed_expert_bytes: u64,
    pub embedding_bytes: u64,
}

/// The per-rank profile of one replica.
fn profile(inputs: &Inputs, options: &PlanOptions, engine: &dyn ServingEngine) -> Option<Profile> {
    let Inputs {
        model,
        memory,
        parameters,
        ..
    } = inputs;
    let rank = memory.per_rank.as_ref()?;
    let tp = rank.tensor_parallel.max(1);
    let expert_ranks = match options.expert_parallel {
        true => engine.expert_parallel_ranks(options),
        false => engine.expert_width_ranks(options),
    }
    .max(1) as f64;
    // A what-if type re-prices the experts as the memory plan re-prices every linear layer.
    let routed = Share {
        params: parameters.by_component.get(&Component::Experts).copied().unwrap_or(0),
        bytes: inputs.routed_expert_bytes,
    };
    let expert_weight_bytes = part_bytes(Component::Experts, routed, options.weights_dtype) as f64 / expert_ranks;
    // A step reads the rows of the embedding its tokens name, not the table.
    let embedding = match model.tie_word_embeddings {
        true => 0.0,
        false => inputs.embedding_bytes as f64 / tp as f64,
    };
    let fixed_weight_bytes = (rank.weights_bytes as f64 - expert_weight_bytes - embedding).max(0.0);
    // One rank's share of one copy of the cache: 1/tp of GQA heads, all of an MLA latent.
    let one_copy: f64 = memory
        .kv_cache
        .iter()
        .map(|g| {
            let tokens = g.tokens_per_sequence.unwrap_or(0) as f64;
            (g.bytes_per_token_per_layer.unwrap_or(0) as f64 * tokens
                + g.bytes_per_sequence_per_layer.unwrap_or(0) as f64)
                * g.layers as f64
                * memory.sequences as f64
        })
        .sum();
    let held: f64 = memory.kv_cache.iter().map(|g| g.bytes as f64).sum::<f64>() / tp as f64;
    let share = if one_copy > 0.0 {
        (held / one_copy).min(1.0)
    } else {
        1.0 / tp as f64
    };
    let kv = memory
        .kv_cache
        .iter()
        .filter_map(|g| {
            let per_token = g.bytes_per_token_per_layer? as f64 * g.layers as f64 * share;
            Some((per_token, g.window))
        })
        .collect();
    let state_bytes = memory
        .kv_cache
        .iter()
        .map(|g| g.bytes_per_sequence_per_layer.unwrap_or(0) as f64 * g.layers as f64 * share)
        .sum();
    let embedding_params = match model.tie_word_embeddings {
        true => 0,
        false => parameters.by_component.get(&Component::Embedding).copied().unwrap_or(0),
    };
    let active = parameters.active_per_token.unwrap_or(parameters.total);
    // A token runs k of a layer's E routed experts.
    let expert_flops = model.moe.as_ref().map_or(0.0, |m| {
        let routed = parameters.by_component.get(&Component::Experts).copied().unwrap_or(0) as f64;
        2.0 * routed * m.active.min(m.experts) as f64 / m.experts.max(1) as f64
    });
    Some(Profile {
        layers: model.layers.len() as u64,
        hidden: model.hidden,
        fixed_weight_bytes,
        expert_weight_bytes,
        experts: model.moe.as_ref().map(|m| (m.experts, m.active)),
        moe_layers: model.moe.as_ref().map_or(0, |m| {
            (model.layers.len() as u64).saturating_sub(m.dense_layers.len() as u64)
        }),
        linear_flops: 2.0 * active.saturating_sub(embedding_params) as f64,
        expert_flops,
        attention: attention_per_key(model),
        kv,
        state_bytes,
        tensor_parallel: tp,
        expert_parallel: options.expert_parallel.then(|| engine.expert_parallel_ranks(options)),
    })
}

/// Why no estimate is given.
pub(crate) type Unavailable = String;

/// Everything an estimate needs but the calibrated constants: the deployment's per-rank
/// profile, the device's peaks, the scheduler, the workload. Built once per plan; the
/// calibration (`tests/plan/performance_oracle.rs`) replays it under candidate constants.
#[derive(Debug, Clone)]
pub struct Case {
    profile: Profile,
    hardware: Hardware,
    scheduler: Scheduler,
    workload: Workload,
    replicas: u64,
    gpus: u64,
    engine: MemoryEngine,
    device: String,
    dtype: &'static str,
}

/// A case's figures under one set of constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub output_tokens_per_s: f64,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: f64,
    pub batch: f64,
    pub overloaded: bool,
    limited_by: Limit,
}

/// The case for one artifact served by `engine` on `group` (the smallest device named), with
/// its memory plan; `Err` says why there is none.
pub(crate) fn case(
    inputs: &Inputs,
    system: &Memory,
    options: &PlanOptions,
    workload: &Workload,
    engine: MemoryEngine,
    group: &DeviceGroup,
    weights: Weights,
) -> Result<Case, Unavailable> {
    let unit = engine.unit();
    let device = group.device().ok_or_else(|| {
        format!(
            "{} is not in the device catalogue: its bandwidth and FLOPs are not known",
            group.name
        )
    })?;
    let profile = profile(inputs, options, unit).ok_or("the plan places no rank")?;
    let pool_tokens = system
        .kv_pool_tokens
        .ok_or_else(|| format!("{} reports no KV pool for this plan", unit.engine().label()))?;
    let scheduler = unit
        .scheduler(options, group, pool_tokens, inputs.memory.context)
        .ok_or_else(|| format!("{}'s scheduler is not modelled", unit.engine().label()))?;
    let (flops, dtype) = peak(device, weights);
    let hardware = Hardware {
        bandwidth: device
            .memory_bandwidth_bytes_per_s
            .ok_or_else(|| format!("{} has no vendor memory bandwidth in the catalogue", device.name))?,
        flops: flops.ok_or_else(|| format!("{} has no vendor {dtype} TFLOPS in the catalogue", device.name))?,
        link: device.scale_up.and_then(|s| s.per_direction_bytes_per_s()),
    };
    let replicas = system.data_parallel.max(1);
    Ok(Case {
        profile,
        hardware,
        scheduler,
        workload: *workload,
        replicas,
        gpus: system.tensor_parallel.max(1) * replicas,
        engine,
        device: device.name.clone(),
        dtype,
    })
}

impl Case {
    /// The engine, device and compute type whose calibration applies.
    pub fn calibration_key(&self) -> (&'static str, &str, &'static str) {
        (self.engine.name(), &self.device, self.dtype)
    }

    /// The figures under `constants`; `None` when the pool holds not one request.
    pub fn predict(&self, constants: &Constants) -> Option<Prediction> {
        let outcome = serving::steady_state(
            &self.profile,
            self.hardware,
            constants,
            self.scheduler,
            &self.workload,
            self.replicas,
        )?;
        Some(Prediction {
            output_tokens_per_s: outcome.requests_per_s * self.workload.osl as f64 * self.replicas as f64,
            ttft_ms: outcome.ttft_s.map(|s| s * 1000.0),
            tpot_ms: outcome.tpot_s * 1000.0,
            batch: outcome.batch,
            overloaded: outcome.overloaded,
            limited_by: outcome.limited_by,
        })
    }

    /// The verdict's block: the prediction under the most specific calibration set, with its
    /// range and the targets checked; `Err` when there is none.
    pub(crate) fn estimate(&self, slo: Option<&crate::workload::Slo>) -> Result<Performance, Unavailable> {
        let (engine, device, dtype) = self.calibration_key();
        let (set, coverage) = calibration::lookup(engine, device, dtype)
            .ok_or_else(|| format!("{} was never calibrated", self.engine.runtime().label()))?;
        let p = self.predict(&set.constants).ok_or_else(|| {
            format!(
                "the KV pool ({} tokens a replica) holds not one request of {} tokens",
                self.scheduler.pool_tokens,
                self.workload.isl + self.workload.osl
            )
        })?;
        let e2e_ms = p
            .ttft_ms
            .map(|t| t + p.tpot_ms * self.workload.osl.saturating_sub(1) as f64);
        let r = &set.residuals;
        let range = |s: calibration::Spread| Range {
            low: s.low,
            high: s.high,
        };
        let checks: Vec<SloCheck> = slo
            .iter()
            .flat_map(|slo| &slo.targets)
            .map(|target| {
                let (estimate, spread) = match target.metric {
                    Metric::Ttft => (p.ttft_ms, r.ttft),
                    Metric::Tpot => (Some(p.tpot_ms), r.tpot),
                    Metric::E2e => (e2e_ms, r.tpot),
                };
                // A percentile past the median is held against the range's high end.
                let held = estimate.map(|e| if target.percentile > 50 { e * spread.high } else { e });
                SloCheck {
                    target: target.to_string(),
                    estimate_ms: held,
                    met: held.is_some_and(|h| h <= target.limit_ms()),
                }
            })
            .collect();
        Ok(Performance {
            workload: self.workload.to_string(),
            estimate: true,
            output_tokens_per_s: p.output_tokens_per_s,
            output_tokens_per_s_per_gpu: p.output_tokens_per_s / self.gpus as f64,
            ttft_ms: p.ttft_ms,
            tpot_ms: p.tpot_ms,
            e2e_ms,
            batch: p.batch,
            limited_by: match p.limited_by {
                Limit::MemoryBandwidth => PerformanceLimit::MemoryBandwidth,
                Limit::Compute => PerformanceLimit::Compute,
                Limit::Communication => PerformanceLimit::Communication,
                Limit::KvCapacity => PerformanceLimit::KvCapacity,
                Limit::Scheduling => PerformanceLimit::Scheduling,
            },
            overloaded: p.overloaded,
            range: range(r.output_tokens_per_s),
            ttft_range: range(r.ttft),
            tpot_range: range(r.tpot),
            compute_dtype: dtype.to_owned(),
            calibrated_on: format!(
                "{} × {} × {}",
                set.engine,
                set.device.as_deref().unwrap_or("every device measured"),
                set.dtype.as_deref().unwrap_or("any type")
            ),
            calibration_rows: set.fitted_on.len() as u64,
            calibration_matches: coverage == Coverage::Exact,
            meets_slo: (!checks.is_empty()).then(|| checks.iter().all(|c| c.met)),
            slo: checks,
        })
    }
}
