//! Placement before sizing: how many devices, at which tensor-parallel degree. `--devices
//! h100-80gb` (no count) asks for the smallest count that fits; a count the model cannot be
//! split over, with no `--tensor-parallel` given, gets the largest degree that splits it, the
//! other devices holding replicas. Each choice is said in an info finding.

use crate::findings::{Code, Findings, grouped};
use crate::options::{ContextFit, MemoryEngine, OptionsError, PlanOptions};
use crate::{Described, memory};

/// Most devices of one kind tried for an open count: a full NVL72 rack's worth and some.
pub const MAX_SEARCHED_DEVICES: u64 = 128;

pub struct Placed {
    /// The options as planned: the chosen count and degree written in.
    pub options: PlanOptions,
    /// The choices made.
    pub notes: Vec<(Code, String)>,
}

/// What the system looks like under `options`: `None` when some artifact cannot be split
/// over its degree, else whether it fits.
fn fits(described: &[Described], options: &PlanOptions, engine: MemoryEngine) -> Option<bool> {
    let mut scratch: Vec<Findings> = described.iter().map(|_| Findings::default()).collect();
    let prepared = crate::speculative::prepare(described, options, engine, &mut scratch);
    memory::fits_as_planned(&prepared.planned()?, options, engine)
}

/// Degrees listed as alternatives when no device count bounds them.
const LISTED_DEGREES: u64 = 16;

/// A `tensor_parallel` the caller gave that the artifact `refused` cannot be split over (the
/// degrees placement picks always split) is the caller's mistake, not a verdict on the model:
/// the error names the degrees that split every artifact (and divide the device count, when
/// one is named). Only this error path sizes the other degrees.
pub fn unsplit_degree(
    described: &[Described],
    refused: &str,
    options: &PlanOptions,
    engine: MemoryEngine,
) -> OptionsError {
    let splits = |degree: u64| {
        let candidate = PlanOptions {
            tensor_parallel: Some(degree),
            devices: None,
            ..options.clone()
        };
        let mut scratch: Vec<Findings> = described.iter().map(|_| Findings::default()).collect();
        crate::speculative::prepare(described, &candidate, engine, &mut scratch)
            .sizings
            .iter()
            .flatten()
            .all(memory::Sizing::splits)
    };
    let count = options
        .devices
        .as_ref()
        .filter(|d| d.open_count().is_none())
        .map(|d| d.count());
    let working: Vec<String> = (1..=count.unwrap_or(LISTED_DEGREES))
        .filter(|d| count.is_none_or(|c| c.is_multiple_of(*d)) && splits(*d))
        .map(|d| d.to_string())
        .collect();
    let among = match count {
        Some(count) => format!(" and divide the {count} devices"),
        None => String::new(),
    };
    OptionsError {
        option: "tensor_parallel",
        message: format!(
            "{}-way tensor parallelism cannot split {refused}: its attention heads, every layer's KV heads and its MLP widths must divide evenly (KV heads may instead divide the degree); degrees that split it{among}: {}",
            options.tensor_parallel_degree(),
            working.join(", ")
        ),
    }
}

/// The devices and degree to plan on, then the context: an engine's own fit may lower one
/// nobody set (llama.cpp's, `memory.context_fitted`).
pub fn choose(described: &[Described], options: &PlanOptions, engine: MemoryEngine) -> Placed {
    let mut placed = choose_devices(described, options, engine);
    if let Some(fit) = fitted_context(described, &placed.options, engine) {
        let detail = format!(
            "no context was given, and llama.cpp would load the model's {} tokens a sequence and fall short of its 1 GiB margin: its fit lowers the context to {} (common/fit.cpp step 2){}",
            grouped(fit.from),
            grouped(fit.context),
            match fit.settled {
                true => ", enough to keep every layer as asked",
                false => ", then fits the layers",
            }
        );
        placed.options.fitted_context = Some(fit);
        placed.notes.push((Code::MemoryContextFitted, detail));
    }
    placed
}

/// What the engine's fit does to a context nobody set, for one artifact (llama.cpp's fit of a
/// model and its draft together is not followed).
fn fitted_context(described: &[Described], options: &PlanOptions, engine: MemoryEngine) -> Option<ContextFit> {
    // Sized only for an engine whose fit may lower it: nothing more is prepared otherwise.
    if !engine.unit().fits_context(options) || options.devices.is_none() || described.len() != 1 {
        return None;
    }
    let mut scratch = vec![Findings::default()];
    let prepared = crate::speculative::prepare(described, options, engine, &mut scratch);
    let sizings = prepared.planned()?;
    memory::fit_context(sizings.first()?, options, engine)
}

fn choose_devices(described: &[Described], options: &PlanOptions, engine: MemoryEngine) -> Placed {
    let as_given = || Placed {
        options: options.clone(),
        notes: Vec::new(),
    };
    let Some(devices) = &options.devices else {
        return as_given();
    };
    if let Some(group) = devices.open_count() {
        // Whole deployments of tensor × data parallel ranks at a time.
        let step = options
            .tensor_parallel
            .unwrap_or(1)
            .max(1)
            .saturating_mul(options.data_parallel_degree());
        let mut largest_placed = None;
        for count in (step..=MAX_SEARCHED_DEVICES).step_by(step as usize) {
            let candidate = PlanOptions {
                devices: Some(devices.with_count(count)),
                ..options.clone()
            };
            match fits(described, &candidate, engine) {
                Some(true) => {
                    let detail = format!(
                        "{count} × {} is the smallest count that fits, at tensor-parallel degree {}",
                        group.name,
                        candidate.tensor_parallel_degree()
                    );
                    return Placed {
                        options: candidate,
                        notes: vec![(Code::MemoryDevicesChosen, detail)],
                    };
                }
                Some(false) => largest_placed = Some(candidate),
                None => {}
            }
        }
        let detail = format!(
            "no count of {} up to {} fits; shown at the most devices the model splits over",
            group.name,
            grouped(MAX_SEARCHED_DEVICES)
        );
        return Placed {
            options: largest_placed.unwrap_or_else(|| options.clone()),
            notes: vec![(Code::MemoryDevicesChosen, detail)],
        };
    }
    let count = devices.count();
    if options.tensor_parallel.is_some()
        || options.data_parallel.is_some()
        || count < 2
        || fits(described, options, engine).is_some()
    {
        return as_given();
    }
    // The count does not split the model: the largest degree dividing it that does.
    for degree in (1..count).rev().filter(|d| count.is_multiple_of(*d)) {
        let candidate = PlanOptions {
            tensor_parallel: Some(degree),
            ..options.clone()
        };
        if fits(described, &candidate, engine).is_some() {
            let detail = format!(
                "{count} devices do not split the model; planned at tensor-parallel degree {degree}, the largest that does, with {} replica(s)",
                count / degree
            );
            return Placed {
                options: candidate,
                notes: vec![(Code::MemoryTensorParallelChosen, detail)],
            };
        }
    }
    as_given()
}
