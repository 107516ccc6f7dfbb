//! The planner: staged facts in, a verdict out.
//!
//! **Invariant:** the planner performs no I/O. It sees only [`ArtifactFacts`]; the CLI, the
//! service and the Explorer all call [`plan`], so they give the same answer.

pub mod config;
pub mod families;
pub mod findings;
mod gguf;
pub mod quant;
mod safetensors;
pub mod verdict;

use preflight_formats::facts::{ArtifactFacts, Content};
use serde::{Deserialize, Serialize};

pub use findings::{Code, Finding, Severity};
pub use verdict::*;

/// The verdict document's schema identifier.
pub const SCHEMA: &str = "preflight.verdict/v1";

/// Bumped only when some verdict could flip (a figure, a finding, admissibility). It is part
/// of the service's cache key, so a bump invalidates every cached verdict.
pub const SEMANTICS_VERSION: u32 = 1;

/// What the caller asks of the plan beyond the facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOptions {}

/// Plan a system of one or more artifacts.
pub fn plan(facts: &[ArtifactFacts], _options: &PlanOptions) -> Verdict {
    let artifacts: Vec<ArtifactVerdict> = facts.iter().enumerate().map(|(i, f)| plan_artifact(i, f)).collect();
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
    }
}

fn plan_artifact(index: usize, facts: &ArtifactFacts) -> ArtifactVerdict {
    let mut findings = findings::Findings::default();
    let (format, architecture, parameters, weights_bytes, tensor_elements_by_dtype) = match &facts.content {
        Content::Safetensors {
            files,
            index,
            missing_files,
        } => {
            let p = safetensors::plan(facts, files, index.as_ref(), missing_files, &mut findings);
            (
                Format::Safetensors,
                p.architecture,
                p.parameters,
                p.weights_bytes,
                p.tensor_elements_by_dtype,
            )
        }
        Content::Gguf { parts, missing_parts } => {
            let p = gguf::plan(parts, missing_parts, &mut findings);
            (
                Format::Gguf,
                p.architecture,
                p.parameters,
                p.weights_bytes,
                p.tensor_elements_by_dtype,
            )
        }
    };
    ArtifactVerdict {
        name: artifact_name(facts),
        source: facts.source.clone(),
        format,
        architecture,
        parameters,
        weights_bytes,
        tensor_elements_by_dtype,
        findings: findings.finish(index),
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
