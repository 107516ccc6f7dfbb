//! The planner: staged facts in, a verdict out.
//!
//! **Invariant:** the planner performs no I/O. It sees only [`ArtifactFacts`]; the CLI, the
//! service and the Explorer all call [`plan`], so they give the same answer.

pub mod config;
pub mod devices;
pub mod families;
pub mod findings;
mod gguf;
mod memory;
pub mod model;
pub mod options;
pub mod quant;
mod runtimes;
mod safetensors;
mod tensors;
mod throughput;
pub mod verdict;

use preflight_formats::facts::{ArtifactFacts, Content};

pub use findings::{Code, Finding, Severity};
pub use options::{Devices, Fraction, KvDtype, OptionsError, PlanOptions, WeightsDtype};
pub use verdict::*;

/// The verdict document's schema identifier.
pub const SCHEMA: &str = "preflight.verdict/v1";

/// Bumped only when some verdict could flip (a figure, a finding, admissibility). It is part
/// of the service's cache key, so a bump invalidates every cached verdict.
pub const SEMANTICS_VERSION: u32 = 4;

/// The engine release `runtimes.<engine>` verdicts are judged against (`0.33.0` for vLLM).
pub fn engine_version(engine: Engine) -> &'static str {
    runtimes::version(engine)
}

/// Plan a system of one or more artifacts. Callers check [`PlanOptions::validate`] first
/// (bad options are bad input); options that fail it are planned without memory.
pub fn plan(facts: &[ArtifactFacts], options: &PlanOptions) -> Verdict {
    let valid = options.validate().is_ok();
    let memory_options = (options.asks_for_memory() && valid).then_some(options);
    let devices = match (valid, &options.devices) {
        (true, Some(devices)) => devices.groups(),
        _ => &[],
    };
    let mut artifacts = Vec::with_capacity(facts.len());
    let mut sizings = Vec::with_capacity(facts.len());
    let mut loads = Vec::with_capacity(facts.len());
    for (i, f) in facts.iter().enumerate() {
        let planned = plan_artifact(i, f, memory_options, devices);
        artifacts.push(planned.verdict);
        sizings.push(planned.sizing);
        loads.push(planned.load);
    }
    let require_engine = options.require_engine.map(|engine| RequiredEngine {
        engine,
        met: artifacts.iter().all(|a| a.runtimes.get(engine).supported.runs()),
    });
    // The system's memory only when every artifact's is known: a sum with a gap is wrong.
    let mut memory = memory_options.and_then(|options| {
        let sizings: Vec<memory::Sizing> = sizings.into_iter().collect::<Option<_>>()?;
        (!sizings.is_empty()).then(|| memory::system(&sizings, options))
    });
    // Bounds for one model on its devices; a system of several has no one token to bound.
    if let (Some(memory), [Some(load)]) = (memory.as_mut(), loads.as_slice()) {
        memory.throughput_bounds = throughput::bounds(load, devices, options.tensor_parallel_degree());
    }
    let mut summary = Summary::default();
    for finding in artifacts.iter().flat_map(|a| &a.findings) {
        match finding.severity {
            Severity::Blocking => summary.blocking += 1,
            Severity::Warning => summary.warnings += 1,
            Severity::Info => summary.info += 1,
        }
    }
    Verdict {
        schema: SCHEMA.to_owned(),
        planner: PlannerVersion {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            semantics_version: SEMANTICS_VERSION,
        },
        admissible: summary.blocking == 0,
        summary,
        staging: facts.iter().map(|f| f.staging.clone()).collect(),
        artifacts,
        memory,
        require_engine,
    }
}

/// One artifact planned: its verdict, and what the system's memory and bounds need of it.
struct Planned {
    verdict: ArtifactVerdict,
    sizing: Option<memory::Sizing>,
    load: Option<throughput::Load>,
}

fn plan_artifact(
    index: usize,
    facts: &ArtifactFacts,
    memory_options: Option<&PlanOptions>,
    devices: &[options::DeviceGroup],
) -> Planned {
    let mut findings = findings::Findings::default();
    let (format, model, parameters, weights_bytes, tensor_elements_by_dtype, layout) = match &facts.content {
        Content::Safetensors {
            files,
            index,
            missing_files,
        } => {
            let p = safetensors::plan(facts, files, index.as_ref(), missing_files, &mut findings);
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
    let sizing = memory_options.and_then(|options| {
        let inputs = memory::Inputs {
            model: model.as_ref(),
            format,
            parameters: &parameters,
            layout: &layout,
            weights_bytes,
        };
        memory::prepare(&inputs, options, &mut findings)
    });
    let runtimes = runtimes::judge(index, &runtimes::Subject::new(facts, format, model.as_ref()), devices);
    let report = sizing.as_ref().map(memory::Sizing::report);
    let load = match (memory_options, &model, &report) {
        (Some(options), Some(model), Some(report)) if !report.lower_bound => throughput::load(
            model,
            report,
            &parameters,
            layout.component_bytes(Component::Experts),
            options,
        ),
        _ => None,
    };
    let verdict = ArtifactVerdict {
        name: artifact_name(facts),
        source: facts.source.clone(),
        format,
        architecture: model.as_ref().map(model::Model::architecture),
        parameters,
        weights_bytes,
        tensor_elements_by_dtype,
        memory: report,
        runtimes,
        findings: findings.finish(index),
    };
    Planned { verdict, sizing, load }
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
