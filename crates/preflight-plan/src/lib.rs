//! The planner: staged facts in, a verdict out.
//!
//! **Invariant:** the planner performs no I/O. It sees only [`ArtifactFacts`]; the CLI, the
//! service and the Explorer all call [`plan`], so they give the same answer.

pub mod config;
mod config_keys;
mod counts;
pub mod devices;
mod engines;
pub mod families;
pub mod findings;
#[doc(hidden)]
pub mod fuzz;
mod gguf;
mod gguf_reader;
mod memory;
pub mod model;
pub mod options;
pub mod performance;
mod placement;
pub mod quant;
mod recommend;
mod runtimes;
mod safetensors;
pub mod source;
pub mod speculative;
mod tensors;
mod throughput;
pub mod verdict;
pub mod workload;

use std::borrow::Borrow;

use preflight_formats::facts::{ArtifactFacts, Content};

pub use findings::{Code, Finding, Severity};
pub use options::{
    ComputeDtype, Devices, Fraction, GpuLayers, KvDtype, MemoryEngine, OptionsError, OverrideTarget, PlanOptions,
    Speculative, SpeculativeMethod, SplitMode, TensorOverride, TensorSplit, WeightsDtype,
};
pub use verdict::*;

/// The verdict document's schema identifier.
pub const SCHEMA: &str = "preflight.verdict/v1";

/// Bumped only when some verdict could flip (a figure, a finding, admissibility). It is part
/// of the service's cache key, so a bump invalidates every cached verdict.
pub const SEMANTICS_VERSION: u32 = 13;

/// ggml graphs replayed on this thread so far: the planner's costliest work, counted so a
/// test can prove a plan did it once per distinct shape.
pub use engines::llama_cpp::ggml::replays_on_this_thread;

/// The engine release `runtimes.<engine>` verdicts are judged against (`0.19.0` for vLLM).
pub fn engine_version(engine: Engine) -> &'static str {
    runtimes::version(engine)
}

/// Plan a system of one or more artifacts. The facts may be owned or shared (`Arc`): the
/// service plans from its facts cache without a copy.
///
/// `Err` only for options no plan of these artifacts can honour — the caller's mistake
/// (exit 2, HTTP 400), never a verdict on the model: values bad on their own
/// ([`PlanOptions::validate`], which callers run before staging anything), a `kv_dtype` the
/// engine (chosen by the artifacts' format when not named) has no cache for, and a
/// `tensor_parallel` the model cannot be split over.
pub fn plan<F: Borrow<ArtifactFacts>>(facts: &[F], options: &PlanOptions) -> Result<Verdict, OptionsError> {
    plan_with_case(facts, options).map(|(verdict, _)| verdict)
}

/// [`plan`], with the performance estimate's inputs for the calibration to replay under
/// candidate constants (`tests/plan/performance_oracle.rs`); `None` when the plan gives none
/// (no workload, several artifacts, an engine or device not modelled).
#[doc(hidden)]
pub fn plan_with_case<F: Borrow<ArtifactFacts>>(
    facts: &[F],
    options: &PlanOptions,
) -> Result<(Verdict, Option<performance::Case>), OptionsError> {
    options.validate()?;
    if options.recommends() {
        return recommend::recommend(facts, options);
    }
    let memory_options = options.asks_for_memory().then_some(options);
    let formats: Vec<Format> = facts.iter().map(|f| format_of(&f.borrow().content)).collect();
    let engine = memory::engine_for(options, &formats);
    if let (Some(dtype), true) = (options.kv_dtype, options.asks_for_memory()) {
        engine.check_kv_dtype(dtype)?;
    }
    options.check_engine(engine)?;
    // Placement first (how many devices, which degree), then every artifact sized for it.
    // With speculative decoding the second source may be a draft head, read as one.
    let draft = speculative::draft_index(options);
    let mut described: Vec<Described> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| describe(f.borrow(), Some(i) == draft))
        .collect();
    if memory_options.is_some() && options.speculative.is_some() {
        for (artifact, facts) in described.iter_mut().zip(facts) {
            let first_mtp = artifact.model.as_ref().map_or(u64::MAX, |m| m.mtp_first_index);
            artifact.skipped = speculative::scan(facts.borrow(), first_mtp);
        }
        speculative::check(&described, options, engine)?;
    }
    let placed = memory_options.map(|o| placement::choose(&described, o, engine));
    // Runtimes are judged on the devices as planned (a chosen count included).
    let devices: Vec<options::DeviceGroup> = match placed.as_ref().map_or(options, |p| &p.options).devices.as_ref() {
        Some(devices) => devices.groups().to_vec(),
        None => Vec::new(),
    };
    let mut findings: Vec<findings::Findings> = described.iter_mut().map(|a| std::mem::take(&mut a.findings)).collect();
    let prepared = match &placed {
        Some(p) => speculative::prepare(&described, &p.options, engine, &mut findings),
        None => speculative::Prepared {
            sizings: described.iter().map(|_| None).collect(),
            draft: None,
        },
    };
    for (artifact, findings) in described.iter_mut().zip(findings) {
        artifact.findings = findings;
    }
    let sizings = &prepared.sizings;
    // Placement only picks degrees that split: one that does not was the caller's.
    if let (Some(options), Some(refused)) = (
        memory_options,
        described
            .iter()
            .zip(sizings)
            .find(|(_, s)| s.as_ref().is_some_and(|s| !s.splits())),
    ) {
        return Err(placement::unsplit_degree(&described, &refused.0.name, options, engine));
    }
    // The system's memory only when every artifact's is known: a sum with a gap is wrong.
    let mut system_findings: Vec<(Code, String)> = Vec::new();
    let mut memory = placed.as_ref().and_then(|placed| {
        system_findings.extend(placed.notes.iter().map(|(code, detail)| (*code, detail.clone())));
        let sizings: Vec<&memory::Sizing> = prepared.planned()?;
        if sizings.is_empty() {
            return None;
        }
        let (memory, tight) = memory::system(&sizings, &placed.options, engine);
        system_findings.extend(tight.map(|detail| (Code::MemoryTightFit, detail)));
        Some(memory)
    });
    let device = placed
        .as_ref()
        .and_then(|p| p.options.devices.as_ref()?.smallest().cloned());
    let count = described.len();
    let mut loads = Vec::with_capacity(count);
    let mut estimate_made = None;
    let mut case_made = None;
    let target_name = described.first().map(|d| d.name.clone()).unwrap_or_default();
    // The context a draft head is planned at: the option's, else its target's declared maximum.
    let planned_context = placed
        .as_ref()
        .and_then(|p| p.options.context)
        .or_else(|| described.first()?.model.as_ref().map(|m| m.context));
    let artifacts: Vec<ArtifactVerdict> = described
        .into_iter()
        .zip(sizings)
        .enumerate()
        .map(|(index, (mut artifact, sizing))| {
            if Some(index) == prepared.draft {
                let detail = speculative::draft_note(&artifact, &target_name, planned_context);
                artifact.findings.push(Code::MemorySpeculativeDraft, "memory", detail);
            }
            // System-wide findings sit with the last artifact, after its own.
            if index + 1 == count {
                for (code, detail) in &system_findings {
                    artifact.findings.push(*code, "memory", detail.clone());
                }
            }
            let memory_report = sizing.as_ref().zip(placed.as_ref()).map(|(s, p)| {
                s.report(&memory::Target {
                    engine,
                    options: &p.options,
                    device: device.as_ref(),
                })
            });
            let load = match (&placed, &artifact.model, &memory_report) {
                (Some(p), Some(model), Some(report)) if !report.lower_bound => throughput::load(
                    model,
                    report,
                    &artifact.parameters,
                    artifact.layout.component_bytes(Component::Experts),
                    &p.options,
                ),
                _ => None,
            };
            loads.push(load);
            if let (Some(workload), Some(system), Some(report), Some(model), Some(group), Some(p)) = (
                options.workload.as_ref(),
                memory.as_ref(),
                memory_report.as_ref(),
                artifact.model.as_ref(),
                device.as_ref(),
                placed.as_ref(),
            ) {
                let estimated = match count {
                    1 => performance::case(
                        &performance::Inputs {
                            model,
                            memory: report,
                            parameters: &artifact.parameters,
                            routed_expert_bytes: artifact.layout.component_bytes(Component::Experts),
                            embedding_bytes: artifact.layout.component_bytes(Component::Embedding),
                        },
                        system,
                        &p.options,
                        workload,
                        engine,
                        group,
                        throughput::computed_in(model, &p.options),
                    ),
                    _ => Err("several artifacts share the devices: a performance estimate is for one model".into()),
                };
                let estimated = estimated.and_then(|case| {
                    let estimate = case.estimate(options.slo.as_ref());
                    case_made = Some(case);
                    estimate
                });
                match estimated {
                    Ok(estimate) => {
                        if !estimate.calibration_matches {
                            let detail = format!(
                                "no calibration was fitted on {} × {} × {}: the constants and the range are {}'s",
                                engine.name(),
                                group.name,
                                estimate.compute_dtype,
                                estimate.calibrated_on
                            );
                            artifact
                                .findings
                                .push(Code::PerformanceUncalibrated, "performance", detail);
                        }
                        estimate_made = Some(estimate);
                    }
                    Err(why) => {
                        artifact.findings.push(Code::PerformanceUnavailable, "performance", why);
                    }
                }
            }
            let subject = runtimes::Subject::new(facts[index].borrow(), artifact.format, artifact.model.as_ref());
            let runtimes = engines::judge(index, &subject, &devices);
            artifact.finish(index, memory_report, runtimes)
        })
        .collect();
    // The figures follow one engine: if it cannot load an artifact there, nothing fits.
    if let Some(memory) = memory.as_mut() {
        memory.does_not_run = artifacts.iter().find_map(|a| {
            let finding = a.runtimes.get(engine.runtime()).deciding()?;
            Some(DoesNotRun {
                artifact: a.name.clone(),
                finding: finding.clone(),
            })
        });
        if memory.does_not_run.is_some() {
            memory.fits = Some(false);
            memory.max_context_that_fits = None;
            memory.max_context_limited_by = None;
        }
    }
    let require_engine = options.require_engine.map(|engine| RequiredEngine {
        engine,
        met: artifacts.iter().all(|a| a.runtimes.get(engine).supported.runs()),
    });
    // Bounds for one model on its devices; a system of several has no one token to bound, and
    // a drafter's steps are not what the roofline models.
    if let (Some(memory), [Some(load)], Some(p), None) =
        (memory.as_mut(), loads.as_slice(), placed.as_ref(), options.speculative)
    {
        memory.throughput_bounds = throughput::bounds(load, &devices, p.options.tensor_parallel_degree());
        throughput::withhold_split_decode(memory, options);
    }
    let mut summary = Summary::default();
    for finding in artifacts.iter().flat_map(|a| &a.findings) {
        match finding.severity {
            Severity::Blocking => summary.blocking += 1,
            Severity::Warning => summary.warnings += 1,
            Severity::Info => summary.info += 1,
        }
    }
    let runs = memory.as_ref().is_some_and(|m| m.does_not_run.is_none());
    let verdict = Verdict {
        schema: SCHEMA.to_owned(),
        planner: PlannerVersion {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            semantics_version: SEMANTICS_VERSION,
        },
        admissible: summary.blocking == 0,
        summary,
        staging: facts.iter().map(|f| f.borrow().staging.clone()).collect(),
        artifacts,
        performance: estimate_made.filter(|_| runs),
        recommendations: Vec::new(),
        memory,
        require_engine,
        engines: releases(),
    };
    Ok((verdict, case_made.filter(|_| runs)))
}

/// Each engine's one release: what its `runtimes` data was read from and, for the engines
/// whose memory is modelled, the release those rules follow (a unit test holds them equal).
fn releases() -> Releases {
    let release = |engine| Release {
        version: runtimes::version(engine).to_owned(),
    };
    Releases {
        vllm: release(Engine::Vllm),
        sglang: release(Engine::Sglang),
        llama_cpp: release(Engine::LlamaCpp),
        transformers: release(Engine::Transformers),
    }
}

fn format_of(content: &Content) -> Format {
    match content {
        Content::Safetensors { .. } => Format::Safetensors,
        Content::Gguf { .. } => Format::Gguf,
    }
}

/// One artifact as read, before memory: what sizing it needs, and its findings so far.
pub(crate) struct Described {
    name: String,
    source: Source,
    format: Format,
    model: Option<model::Model>,
    parameters: Parameters,
    weights_bytes: u64,
    tensor_elements_by_dtype: std::collections::BTreeMap<String, u64>,
    layout: memory::WeightsLayout,
    findings: findings::Findings,
    /// Some finding made reading it is blocking (see [`memory::Inputs::untrusted`]).
    blocked: bool,
    replays: std::sync::Arc<memory::Replays>,
    /// Stored tensors a speculative drafter's engine does not keep (read only when asked).
    skipped: memory::speculative::Skipped,
}

impl Described {
    pub(crate) fn inputs(&self) -> memory::Inputs<'_> {
        memory::Inputs {
            model: self.model.as_ref(),
            format: self.format,
            parameters: &self.parameters,
            layout: &self.layout,
            weights_bytes: self.weights_bytes,
            replays: self.replays.clone(),
            untrusted: self.blocked,
        }
    }

    fn finish(self, index: usize, memory: Option<ArtifactMemory>, runtimes: Runtimes) -> ArtifactVerdict {
        ArtifactVerdict {
            name: self.name,
            source: self.source,
            format: self.format,
            architecture: self.model.as_ref().map(model::Model::architecture),
            parameters: self.parameters,
            weights_bytes: self.weights_bytes,
            tensor_elements_by_dtype: self.tensor_elements_by_dtype,
            memory,
            runtimes,
            findings: self.findings.finish(index),
        }
    }
}

/// `draft`: the source is a speculative draft head (`speculative: eagle3:K`'s second).
fn describe(facts: &ArtifactFacts, draft: bool) -> Described {
    let mut findings = findings::Findings::default();
    let (format, model, parameters, weights_bytes, tensor_elements_by_dtype, layout) = match &facts.content {
        Content::Safetensors {
            files,
            index,
            missing_files,
        } => {
            let p = safetensors::plan(facts, files, index.as_ref(), missing_files, draft, &mut findings);
            (
                Format::Safetensors,
                p.model,
                p.parameters,
                p.weights_bytes,
                p.tensor_elements_by_dtype,
                p.layout,
            )
        }
        Content::Gguf { parts, missing_parts } => {
            let p = gguf::plan(parts, missing_parts, &mut findings);
            (
                Format::Gguf,
                p.model,
                p.parameters,
                p.weights_bytes,
                p.tensor_elements_by_dtype,
                p.layout,
            )
        }
    };
    let source = source::describe(facts, &mut findings);
    Described {
        name: artifact_name(facts),
        source,
        format,
        model,
        parameters,
        weights_bytes,
        tensor_elements_by_dtype,
        layout,
        blocked: findings.any_blocking(),
        findings,
        replays: Default::default(),
        skipped: Default::default(),
    }
}

/// The repo (and file, for a GGUF) or the path's last component.
fn artifact_name(facts: &ArtifactFacts) -> String {
    match (&facts.source.repo, &facts.content) {
        (Some(repo), Content::Gguf { parts, .. }) if !parts.is_empty() => format!("{repo}/{}", parts[0].name),
        (Some(repo), _) => repo.clone(),
        (None, _) => facts
            .source
            .spec
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(&facts.source.spec)
            .to_owned(),
    }
}
