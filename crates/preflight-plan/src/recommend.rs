//! Recommendations: given a workload, latency targets and device **types** without counts
//! (`devices: "h100-80gb,h200,b200"`), every deployment worth trying planned in full — memory,
//! fit, the engine's verdict and the performance estimate — and ranked: those meeting the
//! targets first, fewest GPUs first, then the most output tokens a second per GPU. Each
//! rejected deployment says why. Pure: it is the planner run once per candidate.

use std::borrow::Borrow;

use preflight_formats::facts::ArtifactFacts;

use crate::options::{Devices, OptionsError, PlanOptions};
use crate::performance::Case;
use crate::verdict::{Recommendation, Verdict};
use crate::workload::Arrivals;

/// GPU counts a deployment is tried at: one scale-up domain (8 GPUs) at most, as the
/// measurements the estimate is calibrated on.
const COUNTS: &[u64] = &[1, 2, 4, 8];

/// Most copies of a deployment an open loop's rate is spread over.
const MAX_REPLICAS: u64 = 64;

/// A plan and, where it has one, its performance case.
type Planned = (Verdict, Option<Case>);

/// The verdict for the best deployment, with every candidate ranked in `recommendations`.
pub(crate) fn recommend<F: Borrow<ArtifactFacts>>(facts: &[F], options: &PlanOptions) -> Result<Planned, OptionsError> {
    let (Some(devices), Some(workload)) = (options.devices.as_ref(), options.workload) else {
        return crate::plan_with_case(facts, options);
    };
    let mut planned: Vec<(Recommendation, Option<Planned>)> = Vec::new();
    let dp = options.data_parallel.unwrap_or(1).max(1);
    for group in devices.groups() {
        for &count in COUNTS {
            if count % dp != 0 || options.tensor_parallel.is_some_and(|tp| count % (tp * dp) != 0) {
                continue;
            }
            // Expert parallelism is a choice only where there are experts and more than one
            // GPU to spread them over; the plan without it says whether there are.
            let mut moe = false;
            for expert_parallel in [false, true] {
                if expert_parallel && (options.expert_parallel || count == 1 || !moe) {
                    continue;
                }
                let mut candidate = options.clone();
                candidate.devices = Some(Devices::one(group, count));
                candidate.tensor_parallel = Some(options.tensor_parallel.unwrap_or(count / dp));
                candidate.expert_parallel = options.expert_parallel || expert_parallel;
                candidate.context = Some(options.context.unwrap_or(workload.isl + workload.osl));
                let planned_one = plan_replicated(facts, &candidate, options);
                moe |= planned_one.1.as_ref().is_some_and(|(v, _)| {
                    v.artifacts
                        .iter()
                        .any(|a| a.architecture.as_ref().is_some_and(|x| x.moe.is_some()))
                });
                planned.push(planned_one);
            }
        }
    }
    planned.sort_by(|(a, _), (b, _)| {
        b.meets.cmp(&a.meets).then(a.total_gpus.cmp(&b.total_gpus)).then(
            b.output_tokens_per_s_per_gpu
                .unwrap_or(0.0)
                .total_cmp(&a.output_tokens_per_s_per_gpu.unwrap_or(0.0)),
        )
    });
    let recommendations: Vec<Recommendation> = planned.iter().map(|(r, _)| r.clone()).collect();
    // The verdict shown is the best deployment's: the first that plans.
    let best = planned.into_iter().find_map(|(_, v)| v);
    let (mut verdict, case) = match best {
        Some(best) => best,
        None => crate::plan_with_case(facts, &first_counted(options))?,
    };
    verdict.recommendations = recommendations;
    Ok((verdict, case))
}

/// `options` with every device type counted once: what a verdict says when no candidate plans.
fn first_counted(options: &PlanOptions) -> PlanOptions {
    let mut one = options.clone();
    one.devices = options.devices.as_ref().map(|d| d.with_count(1));
    one
}

/// One candidate planned, an open loop's rate spread over as many copies as it takes.
fn plan_replicated<F: Borrow<ArtifactFacts>>(
    facts: &[F],
    candidate: &PlanOptions,
    asked: &PlanOptions,
) -> (Recommendation, Option<Planned>) {
    let open = matches!(candidate.workload.map(|w| w.arrivals), Some(Arrivals::RateMilli(_)));
    let mut replicas = 1;
    let mut doublings = 0;
    loop {
        let mut options = candidate.clone();
        if let Some(mut w) = options.workload
            && let Arrivals::RateMilli(milli) = w.arrivals
        {
            w.arrivals = Arrivals::RateMilli(milli.div_ceil(replicas).max(1));
            options.workload = Some(w);
        }
        let outcome = crate::plan_with_case(facts, &options);
        let mut r = judged(&options, asked, &outcome, replicas);
        let performance = outcome.as_ref().ok().and_then(|(v, _)| v.performance.as_ref());
        let overloaded = performance.is_some_and(|p| p.overloaded);
        let missed = performance.is_some_and(|p| p.meets_slo == Some(false));
        // An open loop's rate spreads over copies: as many as its capacity says when the
        // rate overloads one, then twice as many (up to four times) while a target is missed.
        let next = match performance {
            Some(p) if open && r.fits && overloaded => {
                let capacity = p.output_tokens_per_s / candidate.workload.map_or(1, |w| w.osl) as f64;
                let rate = candidate.workload.and_then(|w| w.arrivals.rate()).unwrap_or(0.0);
                Some(((rate / capacity.max(1e-9)).ceil() as u64).max(replicas + 1))
            }
            Some(_) if open && r.fits && missed && doublings < 4 => {
                doublings += 1;
                Some(replicas * 2)
            }
            _ => None,
        };
        match next {
            Some(next) if next <= MAX_REPLICAS => replicas = next,
            Some(_) => {
                r.meets = false;
                r.rejected = Some(format!("more than {MAX_REPLICAS} copies would not serve the rate"));
                return (r, outcome.ok());
            }
            None => return (r, outcome.ok()),
        }
    }
}

/// A candidate's line: its layout, whether it fits and runs, its estimate, why it fails.
fn judged(
    options: &PlanOptions,
    asked: &PlanOptions,
    outcome: &Result<Planned, OptionsError>,
    replicas: u64,
) -> Recommendation {
    let group = options.devices.as_ref().and_then(|d| d.groups().first().cloned());
    let gpus = group.as_ref().map_or(0, |g| g.count);
    let mut r = Recommendation {
        devices: group
            .as_ref()
            .map(|g| format!("{}:{}", g.name, g.count))
            .unwrap_or_default(),
        gpus,
        replicas,
        total_gpus: gpus * replicas,
        tensor_parallel: options.tensor_parallel.unwrap_or(1),
        data_parallel: options.data_parallel.unwrap_or(1),
        expert_parallel: options.expert_parallel,
        fits: false,
        meets: false,
        output_tokens_per_s: None,
        output_tokens_per_s_per_gpu: None,
        ttft_ms: None,
        tpot_ms: None,
        cost_per_million_output_tokens: None,
        rejected: None,
    };
    let (verdict, _) = match outcome {
        Ok(planned) => planned,
        Err(e) => {
            r.rejected = Some(format!("cannot be planned: {e}"));
            return r;
        }
    };
    let memory = verdict.memory.as_ref();
    r.fits = verdict.admissible && memory.and_then(|m| m.fits) == Some(true);
    if let Some(why) = memory.and_then(|m| m.does_not_run.as_ref()) {
        r.rejected = Some(format!("the engine does not run it: {}", why.finding.detail));
        return r;
    }
    if !r.fits {
        r.rejected = Some(match memory.and_then(|m| m.per_device.first()) {
            Some(d) => format!(
                "does not fit: {:.1} GiB a GPU of {:.1} GiB usable",
                d.total_bytes as f64 / (1u64 << 30) as f64,
                d.usable_bytes as f64 / (1u64 << 30) as f64
            ),
            None => "does not fit (see the memory findings)".into(),
        });
        return r;
    }
    let Some(p) = verdict.performance.as_ref() else {
        r.rejected = Some(
            verdict
                .artifacts
                .iter()
                .flat_map(|a| &a.findings)
                .find(|f| f.code == crate::Code::PerformanceUnavailable)
                .map_or("no estimate".into(), |f| format!("no estimate: {}", f.detail)),
        );
        return r;
    };
    r.output_tokens_per_s = Some(p.output_tokens_per_s * replicas as f64);
    r.output_tokens_per_s_per_gpu = Some(p.output_tokens_per_s_per_gpu);
    r.ttft_ms = p.ttft_ms;
    r.tpot_ms = Some(p.tpot_ms);
    let price = group
        .as_ref()
        .and_then(|g| g.device())
        .and_then(|d| asked.gpu_price.as_ref()?.per_hour(d));
    r.cost_per_million_output_tokens = price
        .filter(|_| p.output_tokens_per_s > 0.0)
        .map(|dollars| dollars * gpus as f64 / (p.output_tokens_per_s * 3600.0) * 1e6);
    let missed: Vec<String> = p
        .slo
        .iter()
        .filter(|c| !c.met)
        .map(|c| match c.estimate_ms {
            Some(e) => format!("misses {} (estimate {:.1} ms)", c.target, e),
            None => format!("misses {} (the queue grows without bound)", c.target),
        })
        .collect();
    r.meets = missed.is_empty() && !p.overloaded;
    if !missed.is_empty() {
        r.rejected = Some(missed.join("; "));
    } else if p.overloaded {
        r.rejected = Some("overloaded: more requests arrive than it completes".into());
    }
    r
}
